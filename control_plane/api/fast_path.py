"""The API's hot routes served straight from ASGI, in front of the FastAPI app.

A worker's polls and results are most of the control plane's requests, and through
Starlette and FastAPI (their middleware stack, the router, dependency solving) each
one cost about as much server CPU as the hand-out itself (``bench/profile_handoffs.py``);
in a burst of starts, a third of the API process's time went to FastAPI's routing and
dependency solving (``bench/profile_starts.py``). :class:`FastPath` recognises the
method and path of the hot routes of ``control_plane/api/tasks.py`` (poll, batch poll,
result, result then next task) and of ``control_plane/api/workflow.py`` (the two
starts) and calls their route functions itself, with what FastAPI would give them: the request,
the caller from the routes' own dependency (``control_plane/auth.py``), the path and
query parameters and the body validated by the routes' own FastAPI fields.

It answers only where the full app would answer the same: the route's answer, or the
error the route or the caller's authentication raised, rendered by the exception
handlers the app registered (``control_plane/api/error_handlers.py``). Everything else
goes to the full app unchanged (a body it read is handed on as it came), which then
answers as it always does:

* any other route, method or scope, and any request while FastAPI's own telemetry is on;
* a path or query parameter that fails its route's validation or holds a NUL
  (``control_plane/api/routing.py``);
* a body above the size limit (``BodySizeLimit`` answers 413), one whose content type
  is not plainly ``application/json``, one empty, malformed, possibly nested too deep
  (more brackets than the depth limit), possibly holding a string that is not Unicode
  text (it spells a UTF-16 surrogate) or a NaN or Infinity, or not valid for the route
  (FastAPI's 400 naming the field).
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from fastapi import FastAPI, Request, Response
from fastapi.dependencies.utils import request_params_to_args
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.api import tasks as api_tasks
from control_plane.api import workflow as api_workflow
from control_plane.api.routing import StepwayRoute, all_routes
from control_plane.auth import principal
from protocol.limits import needs_checking

__all__ = ["HOT_ROUTES", "FastPath"]

#: the route functions served here
HOT_ROUTES: tuple[Callable[..., Awaitable[Response] | Response], ...] = (
    api_tasks.poll,
    api_tasks.batch_poll,
    api_tasks.update_task,
    api_tasks.update_task_v2,
    api_workflow.start,
    api_workflow.start_by_name,
)

#: validated path and query arguments kept per route (the same path and query string
#: give the same arguments); past it the route's memory starts afresh
_PARAMS_REMEMBERED = 1024

#: the longest path plus query string whose arguments are kept (a client sending ever
#: new long ones would otherwise fill the memory: at most 1,024 x 2 KiB per route)
_PARAMS_KEY_BYTES = 2048

#: argument values that can be handed to more than one request (nothing can change them)
_IMMUTABLE = (str, int, float, bool, type(None))

#: content types whose body FastAPI reads as JSON with no doubt (others go to the app)
_JSON_TYPES = frozenset({b"application/json", b"application/json; charset=utf-8"})


class _FallThrough(Exception):
    """The request is one for the full app."""


@dataclass(frozen=True)
class _HotRoute:
    route: StepwayRoute
    method: str
    #: the route function's parameter that takes the request, and the one the caller
    request_name: str
    caller_name: str
    is_coroutine: bool
    #: (path parameter values, query string) -> the arguments they validate to
    params_seen: dict[tuple[tuple[str, ...], bytes], dict[str, Any]] = field(
        default_factory=dict, compare=False
    )

    @classmethod
    def of(cls, route: StepwayRoute) -> _HotRoute:
        """What serving ``route`` here needs; refuses a route whose parameters this
        module would not resolve as FastAPI does."""
        dependant = route.dependant
        methods = sorted(route.methods or ())
        callers = [d for d in dependant.dependencies if d.call is principal]
        unsupported = (
            len(methods) != 1
            or dependant.header_params
            or dependant.cookie_params
            or len(dependant.body_params) > 1
            or len(callers) != 1
            or len(dependant.dependencies) != 1
            or dependant.request_param_name is None
            or dependant.response_param_name
            or dependant.background_tasks_param_name
            or dependant.security_scopes_param_name
            or get_type_hints(route.endpoint).get("return") is not Response
        )
        if unsupported:
            raise TypeError(f"{route.path}: the fast path serves no such route")
        assert dependant.request_param_name is not None and callers[0].name is not None
        return cls(
            route,
            methods[0],
            dependant.request_param_name,
            callers[0].name,
            inspect.iscoroutinefunction(route.endpoint),
        )


class FastPath:
    """ASGI app: the hot routes of ``app`` served here, every other request handed
    to ``full`` (the app behind its middleware)."""

    def __init__(self, app: FastAPI, full: ASGIApp, max_body_bytes: int) -> None:
        self._app = app
        self._full = full
        self._max_body_bytes = max_body_bytes
        by_endpoint = {r.endpoint: r for r in all_routes(app) if isinstance(r, StepwayRoute)}
        self._routes = [_HotRoute.of(by_endpoint[endpoint]) for endpoint in HOT_ROUTES]
        handlers = dict(app.exception_handlers)
        if Exception not in handlers:
            raise TypeError("the fast path renders errors with the app's handlers: none")
        #: the 500 answer (Starlette's ServerErrorMiddleware), the others (its
        #: ExceptionMiddleware)
        self._server_error = handlers.pop(Exception)
        self._handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._match(scope)
        if found is None:
            await self._full(scope, receive, send)
            return
        hot, path_params = found
        scope["app"] = self._app
        request = Request(scope, receive)
        read: list[Message] = []  # the body's messages, once read
        try:
            values = self._params(hot, request, path_params)
            body_field = hot.route.body_field
            if body_field is not None:
                await self._read_body(scope, receive, read)
                values[body_field.name] = self._validated_body(body_field, read)
        except _FallThrough:
            await self._full(scope, _replaying(read, receive) if read else receive, send)
            return
        await self._answer(hot, request, values, send)

    def _match(self, scope: Scope) -> tuple[_HotRoute, dict[str, str]] | None:
        if (
            scope["type"] != "http"
            or scope.get("root_path")
            or self._app.root_path
            or self._app.dependency_overrides
            or _framework_telemetry_on(self._app)
        ):
            return None
        path: str = scope["path"]
        if "\x00" in path:
            return None
        method = scope["method"]
        for hot in self._routes:
            if hot.method != method:
                continue
            matched = hot.route.path_regex.match(path)
            if matched is not None:
                if any(p.match(path) for p in hot.route.preferred):
                    return None
                return hot, matched.groupdict()
        return None

    def _params(
        self, hot: _HotRoute, request: Request, path_params: dict[str, str]
    ) -> dict[str, Any]:
        """The route function's path and query arguments, validated by the route's own
        fields as FastAPI validates them. Validation is a function of the path and the
        query string alone, so the arguments of a path and query string seen before
        are taken from memory when every one of them is immutable (a worker polls, a
        client starts a workflow, with the same ones over and over: FastAPI's
        validation was a third of a start's time on the event loop,
        bench/profile_starts.py)."""
        query_string: bytes = request.scope["query_string"]
        if b"%00" in query_string.lower() or b"\x00" in query_string:
            raise _FallThrough
        key = (tuple(path_params.values()), query_string)  # the route fixes the names
        seen = hot.params_seen
        known = seen.get(key)
        if known is not None:
            return dict(known)
        dependant = hot.route.dependant
        values, errors = request_params_to_args(dependant.path_params, path_params)
        if not errors and dependant.query_params:
            query, errors = request_params_to_args(dependant.query_params, request.query_params)
            values.update(query)
        if errors:
            raise _FallThrough
        size = len(query_string) + sum(len(v) for v in key[0])
        if size <= _PARAMS_KEY_BYTES and all(type(v) in _IMMUTABLE for v in values.values()):
            if len(seen) >= _PARAMS_REMEMBERED:
                seen.clear()
            seen[key] = dict(values)
        return values

    async def _read_body(self, scope: Scope, receive: Receive, read: list[Message]) -> None:
        """Read the whole body into ``read`` (its messages as received). Falls through
        with nothing read when its declared length is above the limit or it is not
        plainly JSON; stops reading once it is above the limit."""
        content_type = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self._max_body_bytes:
                    raise _FallThrough
            elif name == b"content-type" and content_type is None:
                content_type = value.lower()
        if content_type not in _JSON_TYPES:
            raise _FallThrough
        size = 0
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                raise _FallThrough  # the client went away: the full app sees it
            size += len(message.get("body", b""))
            if size > self._max_body_bytes:
                raise _FallThrough
            if not message.get("more_body", False):
                return

    @staticmethod
    def _validated_body(field: Any, read: list[Message]) -> Any:
        """The body, validated by the route's body ``field`` (FastAPI's) as FastAPI
        validates it; falls through unless it is a JSON object, possibly nested within
        the depth limit and spelling no surrogate, NaN or Infinity, that the field
        takes."""
        raw = b"".join(m.get("body", b"") for m in read)
        if needs_checking(raw):
            raise _FallThrough
        try:
            value = json.loads(raw)  # as Starlette's Request.json()
        except ValueError:
            raise _FallThrough from None
        if type(value) is not dict:
            raise _FallThrough
        validated, errors = field.validate(value, {}, loc=("body",))
        if errors:
            raise _FallThrough
        return validated

    async def _answer(
        self, hot: _HotRoute, request: Request, values: dict[str, Any], send: Send
    ) -> None:
        scope, receive = request.scope, request.receive
        try:
            values[hot.caller_name] = await principal(request)
            values[hot.request_name] = request
            endpoint = hot.route.endpoint
            if hot.is_coroutine:
                response: Response = await endpoint(**values)
            else:
                response = await run_in_threadpool(endpoint, **values)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                # as Starlette's ServerErrorMiddleware: the 500 answer, then the
                # exception on to the server, which logs it
                await (await self._server_error(request, exc))(scope, receive, send)
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Any:
        """The app's handler of ``exc`` (as Starlette's ExceptionMiddleware finds it),
        None for the server error handler's."""
        for cls in type(exc).__mro__:
            if cls in self._handlers:
                return self._handlers[cls]
        return None


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first hands on ``messages`` (already received)."""
    pending = deque(messages)

    async def replay() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return replay


def _framework_telemetry_on(app: FastAPI) -> bool:
    """True when FastAPI records its own spans or metrics for each request (a global
    OpenTelemetry provider is set): the full app serves every request then."""
    telemetry = getattr(app, "_native_telemetry", None)
    return bool(telemetry is not None and telemetry.enabled())
