"""Metadata API: task definitions (with queue provisioning) and workflow definitions.

``dryRun=true`` on the writing endpoints returns the plan (what would be created,
updated or left unchanged, queues included) and writes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request

from control_plane.api.errors import bad_request
from control_plane.api.openapi import COMMON, errors
from control_plane.api.routing import StepwayRoute
from control_plane.auth import Principal, principal, require_role
from control_plane.services.metadata import MetadataService
from protocol.limits import MAX_INT32

router = APIRouter(
    prefix="/api/metadata", tags=["metadata"], route_class=StepwayRoute, responses=COMMON
)
Version = Annotated[int, Path(ge=1, le=MAX_INT32)]

Caller = Annotated[Principal, Depends(principal)]


async def _service(request: Request) -> MetadataService:
    service: MetadataService = request.app.state.metadata_service
    return service


Service = Annotated[MetadataService, Depends(_service)]


def _forget(request: Request, report: dict[str, Any]) -> None:
    for entry in report.get("taskDefs", []):
        request.app.state.task_defs.forget(entry["name"])


@router.post(
    "/taskdefs",
    summary="Register task definitions (a list); creates their queues",
    responses=errors(413),
)
def register_task_defs(
    request: Request,
    service: Service,
    caller: Caller,
    body: Annotated[Any, Body()],
    dryRun: bool = False,
) -> dict[str, Any]:
    require_role(caller, "admin")
    if not isinstance(body, list):
        raise bad_request("expected a JSON list of task definitions", "$")
    report = service.register_task_defs(body, dry_run=dryRun)
    _forget(request, report)
    return report


@router.put("/taskdefs", summary="Register or update one task definition", responses=errors(413))
def put_task_def(
    request: Request,
    service: Service,
    caller: Caller,
    body: Annotated[Any, Body()],
    dryRun: bool = False,
) -> dict[str, Any]:
    require_role(caller, "admin")
    report = service.register_task_defs([body], single=True, dry_run=dryRun)
    _forget(request, report)
    return report


@router.get("/taskdefs", summary="All task definitions")
def list_task_defs(service: Service, caller: Caller) -> list[dict[str, Any]]:
    require_role(caller, "reader")
    return service.list_task_defs()


@router.get("/taskdefs/{name}", summary="One task definition", responses=errors(404))
def get_task_def(service: Service, caller: Caller, name: str) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.get_task_def(name)


@router.delete(
    "/taskdefs/{name}",
    summary="Delete a task definition not used by a workflow",
    responses=errors(404, 409),
)
def delete_task_def(request: Request, service: Service, caller: Caller, name: str) -> None:
    require_role(caller, "admin")
    service.delete_task_def(name)
    request.app.state.task_defs.forget(name)


@router.post(
    "/workflow",
    summary="Create a workflow definition (409 if that version exists, unless overwrite=true)",
    responses=errors(409, 413),
)
def create_workflow(
    request: Request,
    service: Service,
    caller: Caller,
    body: Annotated[Any, Body()],
    dryRun: bool = False,
    overwrite: Annotated[
        bool, Query(description="replace the version if it exists (Orkes Conductor)")
    ] = False,
) -> dict[str, Any]:
    require_role(caller, "admin")
    report = service.register_workflows(
        [body], single=True, create_only=not overwrite, dry_run=dryRun
    )
    if not dryRun:
        request.app.state.task_defs.workflows_changed()
    return report


@router.put(
    "/workflow",
    summary="Create or update workflow definitions (a list)",
    responses=errors(409, 413),
)
def put_workflows(
    request: Request,
    service: Service,
    caller: Caller,
    body: Annotated[Any, Body()],
    dryRun: bool = False,
    overwrite: Annotated[
        bool, Query(description="false: 409 if a version exists (Orkes Conductor)")
    ] = True,
) -> dict[str, Any]:
    require_role(caller, "admin")
    if not isinstance(body, list):
        raise bad_request("expected a JSON list of workflow definitions", "$")
    report = service.register_workflows(
        body, single=False, create_only=not overwrite, dry_run=dryRun
    )
    if not dryRun:
        request.app.state.task_defs.workflows_changed()
    return report


@router.post(
    "/workflow/validate",
    summary="Validate a workflow definition without storing it",
    responses=errors(413),
)
def validate_workflow(
    service: Service, caller: Caller, body: Annotated[Any, Body()]
) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.validate_workflow(body)


@router.get("/workflow", summary="All workflow definitions (every version)")
def list_workflows(service: Service, caller: Caller) -> list[dict[str, Any]]:
    require_role(caller, "reader")
    return service.list_workflows()


@router.get(
    "/workflow/names-and-versions",
    summary="Every workflow definition's versions by name, without the definitions",
)
def names_and_versions(service: Service, caller: Caller) -> dict[str, list[dict[str, Any]]]:
    require_role(caller, "reader")
    return service.names_and_versions()


@router.get(
    "/workflow/{name}",
    summary="A workflow definition (latest version by default)",
    responses=errors(404),
)
def get_workflow(
    service: Service,
    caller: Caller,
    name: str,
    version: Annotated[int | None, Query(ge=1, le=MAX_INT32)] = None,
) -> dict[str, Any]:
    require_role(caller, "reader")
    return service.get_workflow(name, version)


@router.delete(
    "/workflow/{name}/{version}",
    summary="Delete one version of a definition",
    responses=errors(404),
)
def delete_workflow(
    request: Request, service: Service, caller: Caller, name: str, version: Version
) -> None:
    require_role(caller, "admin")
    service.delete_workflow(name, version)
    request.app.state.task_defs.workflows_changed()
