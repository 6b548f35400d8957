"""Workflow API: start, read, search and steer runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse

from control_plane.api.openapi import COMMON, errors
from control_plane.api.routing import StepwayRoute
from control_plane.api.tracing import CallerTrace
from control_plane.auth import Principal, principal, require_role
from control_plane.deps import call_adapters
from control_plane.services.replays import RerunWorkflowRequest, SkipTaskRequest
from control_plane.services.signals import ReturnStrategy
from control_plane.services.wire import run_summary
from control_plane.services.wire_types import Int64, NonNegative64, Text
from control_plane.services.workflows import (
    ExecuteWorkflowRequest,
    StartWorkflowRequest,
    WorkflowService,
    WorkflowTestRequest,
)
from protocol.limits import MAX_INT32

router = APIRouter(
    prefix="/api/workflow", tags=["workflow"], route_class=StepwayRoute, responses=COMMON
)
STARTS = errors(404, 413, 503)
#: correlation ids one batch look-up takes
MAX_CORRELATION_IDS = 1000

Caller = Annotated[Principal, Depends(principal)]


async def _service(request: Request) -> WorkflowService:
    service: WorkflowService = request.app.state.workflow_service
    return service


Service = Annotated[WorkflowService, Depends(_service)]


@router.get("/search", summary="Search runs (newest first, or by sort)")
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
    sort: Annotated[
        str | None,
        Query(description="startTime:DESC (the default), startTime:ASC or startTime"),
    ] = None,
) -> dict[str, Any]:
    require_role(caller, "reader")
    found = service.find(
        query=query,
        free_text=freeText,
        workflow_type=workflowType,
        status=status or [],
        correlation_id=correlationId,
        start_time=startTime,
        end_time=endTime,
        start=start,
        size=size,
        sort=sort,
    )
    # Conductor's SearchResult of WorkflowSummary
    return {"totalHits": found.total_hits, "results": [run_summary(r) for r in found.results]}


@router.post(
    "",
    response_class=PlainTextResponse,
    summary="Start a run (StartWorkflowRequest)",
    responses=STARTS,
)
async def start(http: Request, caller: Caller, request: StartWorkflowRequest) -> Response:
    require_role(caller, "operator")
    return await _start(http, request)


@router.post(
    "/test",
    summary="Test a definition: worker tasks complete with mocked results",
    responses=STARTS,
)
def test(
    service: Service, caller: Caller, request: WorkflowTestRequest, trace: CallerTrace
) -> dict[str, Any]:
    require_role(caller, "operator")
    return service.test(request, caller_trace=trace)


@router.post(
    "/execute/{name}/{version}",
    summary="Start a run and wait until it ends or blocks (at most waitForSeconds)",
    responses=STARTS,
)
def execute(
    service: Service,
    caller: Caller,
    name: str,
    version: Annotated[int, Path(ge=0, le=MAX_INT32)],
    request: ExecuteWorkflowRequest,
    trace: CallerTrace,
    requestId: Text | None = None,
    waitUntilTaskRef: Text | None = None,
    waitForSeconds: Annotated[int, Query(ge=0, le=600)] = 10,
    returnStrategy: ReturnStrategy = ReturnStrategy.TARGET_WORKFLOW,
) -> Any:
    require_role(caller, "operator")
    started = StartWorkflowRequest.model_validate(
        {**request.model_dump(), "name": name, "version": version or None}
    )
    return service.execute(
        started, requestId, waitUntilTaskRef, waitForSeconds, returnStrategy, caller_trace=trace
    )


@router.put(
    "/decide/{workflowId}",
    summary="Decide a run (Stepway decides on every event)",
    responses=errors(404),
)
def decide(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.decide(workflowId)


@router.get("/{name}/correlated/{correlationId}", summary="Runs of a workflow by correlation id")
def correlated(
    service: Service,
    caller: Caller,
    name: str,
    correlationId: str,
    includeClosed: bool = False,
    includeTasks: bool = False,
) -> list[dict[str, Any]]:
    require_role(caller, "reader")
    return service.correlated(name, correlationId, includeClosed, includeTasks)


@router.post("/{name}/correlated", summary="Runs of a workflow by correlation ids")
def correlated_batch(
    service: Service,
    caller: Caller,
    name: str,
    correlationIds: Annotated[list[Text], Body(max_length=MAX_CORRELATION_IDS)],
    includeClosed: bool = False,
    includeTasks: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    require_role(caller, "reader")
    return service.correlated_many(name, correlationIds, includeClosed, includeTasks)


@router.post(
    "/{name}",
    response_class=PlainTextResponse,
    summary="Start a run (body = input)",
    responses=STARTS,
)
async def start_by_name(
    http: Request,
    caller: Caller,
    name: str,
    body: Annotated[dict[str, Any] | None, Body()] = None,
    version: Annotated[int | None, Query(ge=1, le=MAX_INT32)] = None,
    correlationId: str | None = None,
    priority: Annotated[int, Query(ge=0, le=99)] = 0,
) -> Response:
    require_role(caller, "operator")
    request = StartWorkflowRequest(
        name=name,
        version=version,
        input=body or {},
        correlation_id=correlationId,
        priority=priority,
    )
    return await _start(http, request)


# The two start routes read their service and the caller's traceparent from the app and
# the request themselves, and answer a Response: control_plane/api/fast_path.py serves
# them in front of the framework (a burst of starts spent a third of the API's time in
# FastAPI's routing and dependency solving: bench/profile_starts.py).


async def _start(http: Request, request: StartWorkflowRequest) -> Response:
    """The new run's id. With local adapters a start is answered once stored (its
    orchestration scheduled right after: :mod:`control_plane.services.run_starts`);
    with network adapters, in a thread, once its orchestration is scheduled."""
    service: WorkflowService = http.app.state.workflow_service
    trace = http.headers.get("traceparent")
    if service.deps.local_adapters:
        workflow_id = await service.start_stored(request, caller_trace=trace)
    else:
        workflow_id = await call_adapters(service.deps, service.start, request, caller_trace=trace)
    return PlainTextResponse(workflow_id)


@router.get("/running/{name}", summary="Ids of the RUNNING runs of a workflow version")
def running(
    service: Service,
    caller: Caller,
    name: str,
    version: Annotated[int, Query(ge=1, le=MAX_INT32)] = 1,
    startTime: Annotated[Int64 | None, Query(description="createTime >= (epoch ms)")] = None,
    endTime: Annotated[Int64 | None, Query(description="createTime < (epoch ms)")] = None,
) -> list[str]:
    require_role(caller, "reader")
    return service.running(name, version, startTime, endTime)


@router.get(
    "/externalstoragelocation",
    summary="Signed URL to read or write a run's payload",
    responses=errors(400, 403, 501),
)
def external_storage_location(
    service: Service, caller: Caller, operation: str, payloadType: str, path: str | None = None
) -> dict[str, str]:
    """Conductor's WorkflowResource ``externalstoragelocation`` (its clients read a run's
    input or output kept by reference there): as ``GET /tasks/external-storage-location``."""
    return service.tasks.storage_location(path, operation, payloadType, None, caller)


@router.get("/{workflowId}", summary="A run, with its tasks by default", responses=errors(404))
def get(service: Service, caller: Caller, workflowId: str, includeTasks: bool = True) -> Any:
    require_role(caller, "reader")
    return service.get(workflowId, includeTasks)


@router.get(
    "/{workflowId}/tasks", summary="A page of a run's tasks (SearchResult)", responses=errors(404)
)
def tasks(
    service: Service,
    caller: Caller,
    workflowId: str,
    start: Annotated[NonNegative64, Query()] = 0,
    count: Annotated[int, Query(ge=0, le=1000)] = 15,
    status: Annotated[list[str] | None, Query()] = None,
) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.task_page(workflowId, start, count, status or [])


@router.get(
    "/{workflowId}/status", summary="Status of a run (WorkflowStatus)", responses=errors(404)
)
def status(
    service: Service,
    caller: Caller,
    workflowId: str,
    includeOutput: bool = False,
    includeVariables: bool = False,
) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.status(workflowId, includeOutput, includeVariables)


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
    status_code=204,
    summary="Run a finished run again from the start (useLatestDefinitions: the latest version)",
    responses=errors(404, 409, 503),
)
def restart(
    service: Service, caller: Caller, workflowId: str, useLatestDefinitions: bool = False
) -> None:
    require_role(caller, "operator")
    service.restart(workflowId, useLatestDefinitions)


@router.post(
    "/{workflowId}/retry",
    status_code=204,
    summary="Retry a finished run from the tasks it did not get through",
    responses=errors(404, 409, 503),
)
def retry(
    service: Service, caller: Caller, workflowId: str, resumeSubworkflowTasks: bool = False
) -> None:
    require_role(caller, "operator")
    service.retry(workflowId, resumeSubworkflowTasks)


@router.post(
    "/{workflowId}/resetcallbacks",
    status_code=204,
    summary="Hand out now the run's worker tasks waiting out callbackAfterSeconds",
    responses=errors(404, 409, 503),
)
def reset_callbacks(service: Service, caller: Caller, workflowId: str) -> None:
    require_role(caller, "operator")
    service.reset_callbacks(workflowId)


@router.post(
    "/{workflowId}/rerun",
    response_class=PlainTextResponse,
    summary="Run a finished run again from a task (reRunFromTaskId) or from the start",
    responses=errors(404, 409, 503),
)
def rerun(
    service: Service,
    caller: Caller,
    workflowId: str,
    request: Annotated[RerunWorkflowRequest, Body()],
) -> str:
    require_role(caller, "operator")
    return service.rerun(workflowId, request)


@router.put(
    "/{workflowId}/skiptask/{taskReferenceName}",
    summary="Skip a task the running run has not reached yet",
    responses=errors(404, 409, 503),
)
def skip_task(
    service: Service,
    caller: Caller,
    workflowId: str,
    taskReferenceName: str,
    request: Annotated[SkipTaskRequest | None, Body()] = None,
) -> None:
    require_role(caller, "operator")
    service.skip(workflowId, taskReferenceName, request or SkipTaskRequest())


@router.delete(
    "/{workflowId}/terminate-remove",
    summary="Terminate a run, then delete it",
    responses=errors(404, 409),
)
def terminate_remove(
    service: Service, caller: Caller, workflowId: str, reason: str | None = None
) -> None:
    require_role(caller, "operator")
    service.terminate_remove(workflowId, reason)


@router.delete(
    "/{workflowId}/remove", summary="Delete a run and its tasks", responses=errors(404, 409)
)
def remove(service: Service, caller: Caller, workflowId: str, archiveWorkflow: bool = True) -> None:
    require_role(caller, "operator")
    service.remove(workflowId)
