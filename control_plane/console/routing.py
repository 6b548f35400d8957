"""The console's route class: HTML error pages, the sign-in redirect, security headers."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute

from control_plane.api.errors import ApiError
from control_plane.console.html import html, page, url
from control_plane.console.session import SIGNIN_PATH, SignInRequired

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def _error_page(status: int, message: str) -> Response:
    title = {403: "Not allowed", 404: "Not found", 409: "Not now"}.get(status, "Error")
    body = html(
        '<p class="error" role="alert">{}</p><p><a href="/">Back to the runs</a></p>',
        message,
    )
    return HTMLResponse(page(title, body, who=None, csrf=""), status_code=status)


class ConsoleRoute(APIRoute):
    """Console routes answer errors with HTML pages (the API keeps its JSON bodies), send
    a caller who must sign in to the sign-in page, and add the security headers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                response = await handler(request)
            except SignInRequired as exc:
                response = RedirectResponse(
                    url(SIGNIN_PATH, next=exc.next_url, why=exc.message), 303
                )
            except ApiError as exc:
                response = _error_page(exc.status, exc.message)
            for name, value in SECURITY_HEADERS.items():
                response.headers.setdefault(name, value)
            return response

        return route
