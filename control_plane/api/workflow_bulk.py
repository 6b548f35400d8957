"""Workflow bulk API (Conductor's WorkflowBulkResource): pause, resume, restart, retry
and terminate a list of runs in one request.

Each run is steered as its own endpoint of ``control_plane/api/workflow.py`` would,
one after the other; a run that cannot be (not found, in a state the operation
refuses, a backing service unavailable) is reported under ``bulkErrorResults`` with
the message its own endpoint would answer, and the others go on. The answer is 200
with Conductor's BulkResponse. As Conductor's WorkflowBulkService, a request names at
least one run and at most :data:`MAX_BULK_RUNS`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body

from control_plane.api.errors import OUTAGES, ApiError
from control_plane.api.openapi import COMMON, errors
from control_plane.api.routing import StepwayRoute
from control_plane.api.workflow import Caller, Service
from control_plane.auth import Principal, require_role

__all__ = ["MAX_BULK_RUNS", "router"]

#: runs one bulk request may name (Conductor's WorkflowBulkService.MAX_REQUEST_ITEMS)
MAX_BULK_RUNS = 1000

#: Conductor's BulkResponse.message
PROCESSED = "Bulk Request has been processed."

router = APIRouter(
    prefix="/api/workflow/bulk", tags=["workflow"], route_class=StepwayRoute, responses=COMMON
)

RunIds = Annotated[list[str] | None, Body()]


def _each(caller: Principal, workflow_ids: list[str] | None, steer: Callable[[str], Any]) -> Any:
    """Steer every run of ``workflow_ids``; Conductor's BulkResponse."""
    require_role(caller, "operator")
    if not workflow_ids:
        raise ApiError(400, "WorkflowIds list cannot be null.")
    if len(workflow_ids) > MAX_BULK_RUNS:
        raise ApiError(
            400,
            f"Cannot process more than {MAX_BULK_RUNS} workflows. Please use multiple requests.",
        )
    done: list[str] = []
    failed: dict[str, str] = {}
    for workflow_id in workflow_ids:
        try:
            steer(workflow_id)
        except ApiError as exc:
            failed[workflow_id] = exc.message
        except OUTAGES as exc:
            failed[workflow_id] = str(exc)
        else:
            done.append(workflow_id)
    return {"bulkErrorResults": failed, "bulkSuccessfulResults": done, "message": PROCESSED}


BULK = errors(400)


@router.put("/pause", summary="Pause a list of runs", responses=BULK)
def pause(service: Service, caller: Caller, workflow_ids: RunIds = None) -> Any:
    return _each(caller, workflow_ids, service.pause)


@router.put("/resume", summary="Resume a list of paused runs", responses=BULK)
def resume(service: Service, caller: Caller, workflow_ids: RunIds = None) -> Any:
    return _each(caller, workflow_ids, service.resume)


@router.post("/restart", summary="Run a list of finished runs again", responses=BULK)
def restart(
    service: Service,
    caller: Caller,
    workflow_ids: RunIds = None,
    useLatestDefinitions: bool = False,
) -> Any:
    return _each(caller, workflow_ids, lambda i: service.restart(i, useLatestDefinitions))


@router.post("/retry", summary="Retry a list of finished runs", responses=BULK)
def retry(service: Service, caller: Caller, workflow_ids: RunIds = None) -> Any:
    return _each(caller, workflow_ids, service.retry)


@router.post("/terminate", summary="Terminate a list of runs", responses=BULK)
def terminate(
    service: Service, caller: Caller, workflow_ids: RunIds = None, reason: str | None = None
) -> Any:
    return _each(caller, workflow_ids, lambda i: service.terminate(i, reason))
