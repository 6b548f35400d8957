"""Workflow API: start, read, search and steer runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import PlainTextResponse

from control_plane.api.openapi import COMMON, errors
from control_plane.api.routing import StepwayRoute
from control_plane.api.tracing import CallerTrace
from control_plane.auth import Principal, principal, require_role
from control_plane.services.wire_types import Int64, NonNegative64
from control_plane.services.workflows import StartWorkflowRequest, WorkflowService
from protocol.limits import MAX_INT32

router = APIRouter(
    prefix="/api/workflow", tags=["workflow"], route_class=StepwayRoute, responses=COMMON
)
STARTS = errors(404, 413, 503)

Caller = Annotated[Principal, Depends(principal)]


def _service(request: Request) -> WorkflowService:
    service: WorkflowService = request.app.state.workflow_service
    return service


Service = Annotated[WorkflowService, Depends(_service)]


@router.get("/search", summary="Search runs (newest first)")
def search(
    service: Service,
    caller: Caller,
    query: str | None = None,
    freeText: str | None = None,
    workflowType: str | None = None,
    status: Annotated[
        list[str] | None,
        Query(description="RUNNING, PAUSED, COMPLETED, FAILED, TIMED_OUT or TERMINATED"),
    ] = None,
    correlationId: str | None = None,
    startTime: Annotated[Int64 | None, Query(description="createTime >= (epoch ms)")] = None,
    endTime: Annotated[Int64 | None, Query(description="createTime < (epoch ms)")] = None,
    start: Annotated[NonNegative64, Query()] = 0,
    size: Annotated[int, Query(ge=0, le=1000)] = 100,
) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.search(
        query=query,
        free_text=freeText,
        workflow_type=workflowType,
        status=status or [],
        correlation_id=correlationId,
        start_time=startTime,
        end_time=endTime,
        start=start,
        size=size,
    )


@router.post(
    "",
    response_class=PlainTextResponse,
    summary="Start a run (StartWorkflowRequest)",
    responses=STARTS,
)
def start(
    service: Service, caller: Caller, request: StartWorkflowRequest, trace: CallerTrace
) -> str:
    require_role(caller, "operator")
    return service.start(request, caller_trace=trace)


@router.post(
    "/{name}",
    response_class=PlainTextResponse,
    summary="Start a run (body = input)",
    responses=STARTS,
)
def start_by_name(
    service: Service,
    caller: Caller,
    trace: CallerTrace,
    name: str,
    body: Annotated[dict[str, Any] | None, Body()] = None,
    version: Annotated[int | None, Query(ge=1, le=MAX_INT32)] = None,
    correlationId: str | None = None,
    priority: Annotated[int, Query(ge=0, le=99)] = 0,
) -> str:
    require_role(caller, "operator")
    return service.start(
        StartWorkflowRequest(
            name=name,
            version=version,
            input=body or {},
            correlation_id=correlationId,
            priority=priority,
        ),
        caller_trace=trace,
    )


@router.get("/{workflowId}", summary="A run, with its tasks by default", responses=errors(404))
def get(service: Service, caller: Caller, workflowId: str, includeTasks: bool = True) -> Any:
    require_role(caller, "reader")
    return service.get(workflowId, includeTasks)


@router.get("/{workflowId}/status", summary="Status of a run", responses=errors(404))
def status(service: Service, caller: Caller, workflowId: str) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.status(workflowId)


@router.put("/{workflowId}/pause", summary="Pause (suspend) a run", responses=errors(404, 409))
def pause(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.pause(workflowId)


@router.put("/{workflowId}/resume", summary="Resume a paused run", responses=errors(404, 409))
def resume(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.resume(workflowId)


@router.delete("/{workflowId}", summary="Terminate a run", responses=errors(404, 409))
def terminate(service: Service, caller: Caller, workflowId: str, reason: str | None = None) -> None:
    require_role(caller, "operator")
    service.terminate(workflowId, reason)


@router.post(
    "/{workflowId}/restart",
    summary="Run a finished run again from the start",
    responses=errors(404, 409, 503),
)
def restart(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.restart(workflowId)


@router.post(
    "/{workflowId}/retry",
    summary="Retry a failed run (restarts it from the start with the same input)",
    responses=errors(404, 409, 503),
)
def retry(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.retry(workflowId)
