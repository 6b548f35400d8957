"""Conductor-style error bodies for every 4xx/5xx, and the request body size limit.

Every error response has the body ``{status, message, instance, retryable,
validationErrors: [{path, message}]}``: our own :class:`ApiError`, FastAPI's
``RequestValidationError`` (400, one entry per field, malformed JSON included),
Starlette's HTTP errors (404 for unknown routes, 405 with every method of the path in
``Allow`` ...), bodies above the size
limit (413), a run store, task queue, payload store or durable backend that is unavailable
right now (503, retryable, with ``Retry-After``: ``OUTAGES`` in
``control_plane.api.errors``) and unexpected exceptions (500, details only in the server
log).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.api.errors import (
    OUTAGES,
    ApiError,
    bad_request,
    conflict,
    forbidden,
    not_found,
)
from control_plane.api.routing import allowed_methods

log = logging.getLogger(__name__)

#: ``Retry-After`` of a 503: a backing service unavailable right now
RETRY_AFTER_SECONDS = 1

__all__ = [
    "OUTAGES",
    "ApiError",
    "BodySizeLimit",
    "bad_request",
    "conflict",
    "error_body",
    "error_response",
    "forbidden",
    "install_error_handlers",
    "not_found",
]

INSTANCE = socket.gethostname()
DEFAULT_MAX_BODY_BYTES = 12 * 1024 * 1024


def error_body(
    status: int,
    message: str,
    validation_errors: Sequence[tuple[str, str]] = (),
    retryable: bool = False,
) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "instance": INSTANCE,
        "retryable": retryable,
        "validationErrors": [{"path": p, "message": m} for p, m in validation_errors],
    }


def error_response(
    status: int,
    message: str,
    validation_errors: Sequence[tuple[str, str]] = (),
    retryable: bool = False,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(status, message, validation_errors, retryable),
        status,
        headers=dict(headers) if headers else None,
    )


def _field_path(loc: Sequence[Any]) -> str:
    """``("body", "status")`` -> ``$.status``; ``("query", "count")`` -> ``count``."""
    if not loc:
        return "$"
    where, rest = loc[0], list(loc[1:])
    if where == "body":
        path = "$"
        for part in rest:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        return path
    return ".".join(str(p) for p in rest) or str(where)


def validation_issues(exc: RequestValidationError) -> list[tuple[str, str]]:
    issues: list[tuple[str, str]] = []
    for err in exc.errors():
        loc = list(err.get("loc") or ())
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            detail = ctx.get("error") or err.get("msg") or "invalid JSON"
            issues.append(("$", f"malformed JSON body: {detail}"))
            continue
        path = _field_path(loc)
        msg = str(err.get("msg") or "invalid value")
        if err.get("type") == "missing":
            msg = "required"
        issues.append((path, msg))
    return issues


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if exc.status == 503 else None
        if exc.status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        return error_response(
            exc.status, exc.message, exc.validation_errors, exc.retryable, headers
        )

    async def request_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        issues = validation_issues(exc)
        summary = "; ".join(f"{p}: {m}" for p, m in issues[:5])
        return error_response(400, f"invalid request: {summary}", issues)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        message = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # every method of the path, not only those of the first route that matched
            headers["Allow"] = ", ".join(allowed_methods(request.app, request.scope))
        return error_response(exc.status_code, message, headers=headers)

    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, OUTAGES)
        # one line, no traceback: the driver's or SDK's error is named by class and code
        # only (its message may hold the statement's parameters or the server's address)
        detail = getattr(exc, "detail", "")
        log.warning("%s on %s %s (%s)", exc, request.method, request.url.path, detail)
        return error_response(
            503, str(exc), retryable=True, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        # not retryable, as Conductor's ApplicationExceptionMapper answers anything but a
        # TransientException: the outages that a retry can outlast are 503 (above)
        return error_response(500, f"internal error: {type(exc).__name__}", retryable=False)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, request_validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    for outage in OUTAGES:
        app.add_exception_handler(outage, unavailable)
    app.add_exception_handler(Exception, unexpected)


class _BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    """ASGI middleware: refuse request bodies above ``max_bytes`` with 413.

    Checks ``Content-Length`` up front and counts streamed bytes (chunked bodies)."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers") or []:
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = 0
                if length > self.max_bytes:
                    await self._reject(scope, receive, send)
                    return
        seen = 0
        too_large = False

        async def counting_receive() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    too_large = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # FastAPI turns an error while reading the body into its own 400; once the
            # limit was hit, drop whatever the app answers and send the 413 below.
            if not too_large:
                await send(message)

        with contextlib.suppress(_BodyTooLarge):
            await self.app(scope, counting_receive, guarded_send)
        if too_large:
            await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            f"request body is larger than the limit of {self.max_bytes} bytes",
            [("$", f"at most {self.max_bytes} bytes")],
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)
