"""How requests find their route, and the JSON body limits every route applies.

* **Most specific path wins.** A path that several path templates match goes to the
  most specific one, whatever the order of registration: at the first segment where
  two templates differ, a literal segment beats a parameter (OpenAPI's "concrete paths
  before templated ones"). So ``POST /api/tasks/queue/polldata/all`` is a 405 of the
  ``/queue/polldata/all`` path, not a complete-by-reference call on a task ``all``.
  Where templates overlap, a path parameter typed as an enumeration (a ``Literal``)
  takes only its values (``POST /api/tasks/poll/batch/x`` is not a result with
  status ``x``); elsewhere a wrong value is a 400 naming the parameter.
* **405 lists every method of the path** in ``Allow``, not only those of the first
  route that matched it.
* **NUL** in a path or query parameter is refused with 400.
* **JSON bodies** are parsed once here, refusing a document nested deeper than
  ``protocol.limits.MAX_JSON_DEPTH`` with 400 (before any recursive code sees it), and
  one holding a string that is not Unicode text (a lone UTF-16 surrogate such as
  ``"\\ud800"``, which no UTF-8 text, database column or response can hold) with 400
  naming where, one holding the NUL character (which PostgreSQL cannot store) with 400
  naming where, and one using ``NaN``, ``Infinity`` or a number beyond a double's range
  such as ``1e999`` (JSON has no such numbers; stored, they would read back as ``null``)
  with 400 naming where.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from control_plane.api.errors import ApiError
from protocol.limits import (
    MAX_JSON_DEPTH,
    JsonTooDeep,
    NotFiniteNumber,
    loads_limited,
    may_spell_nul,
    may_spell_surrogates,
    needs_checking,
    nul_problem,
    surrogate_problem,
)

__all__ = ["StepwayRoute", "all_routes", "allowed_methods", "install_routing", "read_json_body"]

_PARAM = re.compile(r"^\{[^}]+\}$")


def _segments(path: str) -> list[str | None]:
    """``/api/tasks/{taskId}/log`` -> ``["api", "tasks", None, "log"]`` (None: a parameter)."""
    return [None if _PARAM.match(s) else s for s in path.strip("/").split("/")]


def overlap(a: str, b: str) -> bool:
    """True when path templates ``a`` and ``b`` can match one same path: same number
    of segments and equal literals where both are literal. Templates with a ``:path``
    parameter (any number of segments) are never compared."""
    if ":path}" in a or ":path}" in b:
        return False
    sa, sb = _segments(a), _segments(b)
    if len(sa) != len(sb):
        return False
    return all(x is None or y is None or x == y for x, y in zip(sa, sb, strict=True))


def more_specific(a: str, b: str) -> bool:
    """True when path template ``a`` wins a path that ``b`` matches too: they overlap
    and at the first segment where one has a literal and the other a parameter, ``a``
    has the literal."""
    if not overlap(a, b):
        return False
    for x, y in zip(_segments(a), _segments(b), strict=True):
        if (x is None) != (y is None):
            return x is not None
    return False


def _is_json(request: Request) -> bool:
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


async def read_json_body(request: Request, what: str = "the request body") -> Any:
    """The request body parsed as JSON within the depth limit; 400 naming the limit
    when it is nested deeper, 400 naming where when a string in it is not Unicode text
    or holds NUL, or it holds ``NaN``, ``Infinity`` or a number beyond a double's range.
    Raises ``json.JSONDecodeError`` for malformed JSON."""
    body = await request.body()
    try:
        value = loads_limited(body, MAX_JSON_DEPTH, what)
    except (JsonTooDeep, NotFiniteNumber) as exc:
        raise ApiError(400, str(exc), validation_errors=[(exc.path, str(exc))]) from None
    problem = None
    if may_spell_surrogates(body):
        problem = surrogate_problem(value, what)
    if problem is None and may_spell_nul(body):
        problem = nul_problem(value, what)
    if problem is not None:
        message, path = problem
        raise ApiError(400, message, validation_errors=[(path, message)])
    return value


class StepwayRoute(APIRoute):
    """An API route with the matching rules and body limits described above."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        #: path regexes of more specific routes, and of every other route whose
        #: template overlaps this one; set by :func:`install_routing`
        self.preferred: list[re.Pattern[str]] = []
        self.overlapping: list[re.Pattern[str]] = []
        self.enum_params: dict[str, frozenset[str]] = {}
        for param in self.dependant.path_params:
            values = _literal_values(param.field_info.annotation)
            if values:
                self.enum_params[param.name] = values

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match == Match.NONE:
            return match, child
        path, root = scope["path"], scope.get("root_path", "")
        route_path = path[len(root) :] if root and path.startswith(root) else path
        if any(p.match(route_path) for p in self.preferred):
            return Match.NONE, {}
        params = child.get("path_params", {})
        misfit = any(str(params.get(n)) not in v for n, v in self.enum_params.items())
        # a value outside the enumeration leaves the path to another route that can
        # take it; with no such route, validation answers 400 naming the parameter
        if misfit and any(p.match(route_path) for p in self.overlapping):
            return Match.NONE, {}
        return match, child

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def with_json_limits(request: Request) -> Response:
            _refuse_nul(request)
            if request.method in ("POST", "PUT", "PATCH") and _is_json(request):
                body = await request.body()
                # a document cannot nest deeper than it has brackets, nor hold a
                # surrogate or a NaN it does not spell: most bodies are cleared without
                # parsing them here
                if needs_checking(body):
                    try:
                        value = await read_json_body(request)
                    except json.JSONDecodeError:
                        pass  # FastAPI reports malformed JSON with its position
                    else:
                        request._json = value  # Starlette's cache of Request.json()
            return await handler(request)

        return with_json_limits


def _refuse_nul(request: Request) -> None:
    """400 for a NUL character in a path or query parameter: no identifier holds one,
    and PostgreSQL cannot store or compare one."""
    items = [*request.path_params.items(), *request.query_params.multi_items()]
    for name, value in items:
        if "\x00" in str(value) or "\x00" in name:
            message = f"parameter {name!r} must not contain the NUL character"
            raise ApiError(400, message, validation_errors=[(name.replace("\x00", ""), message)])


def _literal_values(annotation: Any) -> frozenset[str]:
    """The values of a ``Literal`` annotation, else empty."""
    if typing.get_origin(annotation) is typing.Literal:
        return frozenset(str(v) for v in typing.get_args(annotation))
    return frozenset()


def all_routes(app: FastAPI) -> list[BaseRoute]:
    """Every route of the app, those of included routers too, in matching order."""

    def walk(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
        for route in routes:
            included = getattr(route, "original_router", None)  # an included APIRouter
            if included is not None:
                yield from walk(included.routes)
            else:
                yield route

    return list(walk(app.routes))


def install_routing(app: FastAPI) -> None:
    """Tell every route which more specific routes take precedence over it. Call once
    after every router is included."""
    routes = [r for r in all_routes(app) if isinstance(r, StepwayRoute)]
    for route in routes:
        others = [other for other in routes if other.path != route.path]
        route.preferred = [o.path_regex for o in others if more_specific(o.path, route.path)]
        route.overlapping = [o.path_regex for o in others if overlap(o.path, route.path)]


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method the routes of this request's path answer (for ``Allow``)."""
    probe: Scope = {
        "type": "http",
        "path": scope["path"],
        "root_path": scope.get("root_path", ""),
        "method": "\x00",
    }
    methods: set[str] = set()
    for route in all_routes(app):
        match, _ = route.matches(probe)
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)
