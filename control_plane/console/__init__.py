"""The web console: runs as pictures, and actions on them, served by the control plane.

Server-rendered HTML pages at ``/`` (runs), ``/runs/{id}``, ``/inbox``, ``/task-types``,
``/workflows``, ``/taskdefs`` and ``/start``, with one stylesheet and one small script of
our own under ``/static/`` (nothing is fetched from elsewhere; the pages work without the
script, which only refreshes live parts and shows times in local time). Pages call the
control plane's services in-process with the API's authentication and role checks
(:mod:`control_plane.console.session`).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI

__all__ = ["mount_console"]

STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}


def _static_router() -> APIRouter:
    from fastapi import APIRouter
    from fastapi.responses import Response

    from control_plane.api.errors import ApiError
    from control_plane.console.routing import ConsoleRoute

    router = APIRouter(route_class=ConsoleRoute)
    files: dict[str, bytes] = {
        name: resources.files(__package__).joinpath("static", name).read_bytes() for name in STATIC
    }

    @router.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in files:
            raise ApiError(404, f"no file {name}")
        return Response(
            files[name], media_type=STATIC[name], headers={"Cache-Control": "max-age=300"}
        )

    return router


def mount_console(app: FastAPI) -> None:
    """Add the console's pages to the control plane app (unless the settings turn it off).
    The page modules are imported here, not with the package: the control plane's
    settings import :mod:`control_plane.console.config`."""
    from control_plane.console import pages_meta, pages_run, pages_runs, signin

    settings: Any = app.state.settings
    console = getattr(settings, "console", None)
    if console is not None and not console.enabled:
        return
    for module in (pages_runs, pages_run, pages_meta, signin):
        app.include_router(module.router)
    app.include_router(_static_router())
