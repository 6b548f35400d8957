"""Workflow API: start, read, search and steer runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import PlainTextResponse

from control_plane.auth import Principal, principal, require_role
from control_plane.services.workflows import StartWorkflowRequest, WorkflowService

router = APIRouter(prefix="/api/workflow", tags=["workflow"])

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
    status: Annotated[list[str] | None, Query()] = None,
    correlationId: str | None = None,
    startTime: Annotated[int | None, Query(description="createTime >= (epoch ms)")] = None,
    endTime: Annotated[int | None, Query(description="createTime < (epoch ms)")] = None,
    start: Annotated[int, Query(ge=0)] = 0,
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


@router.post("", response_class=PlainTextResponse, summary="Start a run (StartWorkflowRequest)")
def start(service: Service, caller: Caller, request: StartWorkflowRequest) -> str:
    require_role(caller, "operator")
    return service.start(request)


@router.post("/{name}", response_class=PlainTextResponse, summary="Start a run (body = input)")
def start_by_name(
    service: Service,
    caller: Caller,
    name: str,
    body: Annotated[dict[str, Any] | None, Body()] = None,
    version: Annotated[int | None, Query(ge=1)] = None,
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
        )
    )


@router.get("/{workflowId}", summary="A run, with its tasks by default")
def get(service: Service, caller: Caller, workflowId: str, includeTasks: bool = True) -> Any:
    require_role(caller, "reader")
    return service.get(workflowId, includeTasks)


@router.get("/{workflowId}/status", summary="Status of a run")
def status(service: Service, caller: Caller, workflowId: str) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.status(workflowId)


@router.put("/{workflowId}/pause", summary="Pause (suspend) a run")
def pause(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.pause(workflowId)


@router.put("/{workflowId}/resume", summary="Resume a paused run")
def resume(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.resume(workflowId)


@router.delete("/{workflowId}", summary="Terminate a run")
def terminate(service: Service, caller: Caller, workflowId: str, reason: str | None = None) -> None:
    require_role(caller, "operator")
    service.terminate(workflowId, reason)


@router.post("/{workflowId}/restart", summary="Run a finished run again from the start")
def restart(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.restart(workflowId)


@router.post(
    "/{workflowId}/retry",
    summary="Retry a failed run (restarts it from the start with the same input)",
)
def retry(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.retry(workflowId)
