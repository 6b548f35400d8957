"""The control plane FastAPI app: metadata API, Task API, workflow API, payload URLs.

``create_app(settings, deps)`` builds the app on the given adapters. OpenAPI is at
``/openapi.json``, the interactive docs at ``/docs``. The Task API's hot routes are
served in front of the framework by ``control_plane/api/fast_path.py``, which hands
every request it does not fully understand to the full app.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import FastAPI, Query, Request, Response
from starlette.types import Receive, Scope, Send

from control_plane.api import metadata as api_metadata
from control_plane.api import tasks as api_tasks
from control_plane.api import workflow as api_workflow
from control_plane.api import workflow_bulk as api_workflow_bulk
from control_plane.api.error_handlers import BodySizeLimit, install_error_handlers
from control_plane.api.errors import ApiError
from control_plane.api.fast_path import FastPath
from control_plane.api.openapi import errors, install_openapi
from control_plane.api.routing import StepwayRoute, install_routing
from control_plane.auth import build_authenticator
from control_plane.console import mount_console
from control_plane.deps import Deps, Settings
from control_plane.services.metadata import MetadataService
from control_plane.services.task_handout import TaskHandout
from control_plane.services.task_results import TaskResults
from control_plane.services.task_support import TaskDefCache
from control_plane.services.tasks import TaskService
from control_plane.services.workflows import WorkflowService
from control_plane.services.write_groups import WriteGroups
from engine.ports.payload_store import InvalidReference, PayloadNotFound

__all__ = ["StepwayApp", "create_app"]


class StepwayApp(FastAPI):
    """The FastAPI app, with its hot routes (the Task API's, the starts) served first by
    :class:`~control_plane.api.fast_path.FastPath` once :meth:`serve_hot_routes`
    was called (without it, every request goes through the framework)."""

    fast_path: FastPath | None = None

    def serve_hot_routes(self, max_body_bytes: int) -> None:
        """Serve the hot routes in front of the framework; call once every route is
        registered. ``max_body_bytes``: the body size limit of the app's middleware."""
        self.fast_path = FastPath(self, self.full_app, max_body_bytes)

    async def full_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app through the framework: its middleware, router and routes."""
        await super().__call__(scope, receive, send)

    def close(self) -> None:
        """Stop the app's own threads (the run starter and recovery); the adapters in
        its deps are closed by whoever made them."""
        self.state.workflow_service.starts.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.fast_path is None:
            await super().__call__(scope, receive, send)
        else:
            await self.fast_path(scope, receive, send)


def _payload_routes(app: FastAPI) -> None:
    """Serve the local payload store's signed URLs (``/api/payloads/<ref>?exp=&sig=``).

    The signature is the authorization: it names the payload, the operation and the
    expiry, so no bearer token is needed (like a SAS URL)."""

    def _verify(request: Request, reference: str, operation: str, exp: str, sig: str) -> None:
        store = request.app.state.deps.payloads
        verify = getattr(store, "verify_signature", None)
        if verify is None:
            raise ApiError(404, "this payload store does not serve signed URLs here")
        if not verify(reference, operation, exp, sig):
            raise ApiError(403, "invalid or expired payload signature")

    @app.get(
        "/api/payloads/{reference:path}",
        tags=["payloads"],
        summary="Read a payload",
        responses=errors(400, 403, 404),
    )
    def read_payload(
        request: Request,
        reference: str,
        exp: Annotated[str, Query()],
        sig: Annotated[str, Query()],
    ) -> Response:
        _verify(request, reference, "read", exp, sig)
        try:
            data = request.app.state.deps.payloads.get(reference)
        except (PayloadNotFound, InvalidReference):
            raise ApiError(404, f"payload {reference} not found") from None
        return Response(data, media_type="application/json")

    @app.put(
        "/api/payloads/{reference:path}",
        tags=["payloads"],
        summary="Write a payload",
        status_code=201,
        responses=errors(400, 403, 404, 413),
    )
    async def write_payload(
        request: Request,
        reference: str,
        exp: Annotated[str, Query()],
        sig: Annotated[str, Query()],
    ) -> Response:
        _verify(request, reference, "write", exp, sig)
        store = request.app.state.deps.payloads
        data = await request.body()
        if len(data) > store.limits.max_size:
            raise ApiError(
                413, f"payload is {len(data)} bytes, above the maximum {store.limits.max_size}"
            )
        await anyio.to_thread.run_sync(store.put, reference, data)
        return Response(status_code=201)


def create_app(
    settings: Settings | None = None, deps: Deps | None = None, *, fast_path: bool = True
) -> StepwayApp:
    """The control plane app; ``fast_path=False`` serves the hot Task API routes through
    the framework too (the reference the fast path is tested against)."""
    if deps is None:
        raise ValueError("create_app needs deps (run store, queue, provisioner, signals ...)")
    settings = settings or Settings()
    app = StepwayApp(
        title="Stepway control plane",
        version="0.1.0",
        description="Conductor-compatible metadata, task and workflow APIs.",
    )
    app.state.settings = settings
    app.state.deps = deps
    app.state.authenticator = build_authenticator(settings)
    app.state.poll_limiter = anyio.CapacityLimiter(settings.max_concurrent_polls)
    taskdefs = TaskDefCache(settings, deps)
    tasks = TaskService(settings, deps, taskdefs)
    app.state.task_defs = taskdefs
    app.state.task_service = tasks
    app.state.task_handout = TaskHandout(settings, deps, taskdefs)
    app.state.task_results = TaskResults(settings, deps, taskdefs)
    # the Task API's writes on local adapters, grouped per turn of the event loop
    app.state.write_groups = WriteGroups(deps.run_store, deps.queue)
    app.state.metadata_service = MetadataService(settings, deps)
    app.state.workflow_service = WorkflowService(settings, deps, tasks)
    # starts a stopped process stored but did not schedule (with every adapter local, all
    # starts; elsewhere those whose scheduling ran out of time). Another process may be
    # trying the same: a start scheduled twice counts once
    app.state.workflow_service.starts.recover()
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.router.route_class = StepwayRoute
    app.include_router(api_metadata.router)
    app.include_router(api_tasks.router)
    app.include_router(api_workflow.router)
    app.include_router(api_workflow_bulk.router)
    _payload_routes(app)
    mount_console(app)

    @app.get("/health", tags=["health"], summary="Liveness", responses=errors(400))
    def health() -> dict[str, str]:
        return {"status": "ok"}

    install_routing(app)
    install_openapi(app)
    if fast_path:
        app.serve_hot_routes(settings.max_body_bytes)
    return app
