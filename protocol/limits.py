"""Limits on JSON values and on names, shared by the control plane and the engine.

Pure functions, no I/O. The limits are documented in ``docs/configuration.md``
("Limits on JSON and names").

* **Depth.** A JSON value nested deeper than :data:`MAX_JSON_DEPTH` containers is
  refused wherever it enters (API bodies, worker results, script and jq results):
  recursive code (validation, serialization, expressions) would otherwise hit Python's
  recursion limit or the C stack. :func:`json_depth_problem` measures without recursion,
  so it is safe on any value, however deep.
* **Names.** A definition name (workflow or task definition) travels in URL paths
  (``/api/workflow/{name}``), in queue names and in database keys: :func:`name_problem`
  refuses what cannot travel there.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = [
    "MAX_INT32",
    "MAX_INT64",
    "MAX_JSON_DEPTH",
    "MAX_NAME_LENGTH",
    "MIN_INT64",
    "NAME_FORBIDDEN",
    "JsonTooDeep",
    "check_json_depth",
    "json_depth",
    "json_depth_problem",
    "loads_limited",
    "name_problem",
    "text_problem",
]

#: Containers (objects and arrays) one inside the other, at most. ``{}`` and ``[]`` are
#: depth 1, a scalar is depth 0. Far above what business data needs, far below what
#: recursive code in the platform can handle.
MAX_JSON_DEPTH = 100

#: Integer bounds on the wire: versions, attempts and seconds are 32-bit (Conductor's
#: Java ``int``, and the run store's integer columns); epoch milliseconds and offsets
#: are 64-bit.
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)

#: Characters of a definition name, at most (the database key columns hold 255).
MAX_NAME_LENGTH = 255

#: Characters a definition name must not contain besides control characters: ``/``
#: separates URL path segments, ``:`` is refused by Conductor in workflow names.
NAME_FORBIDDEN = "/:"


class JsonTooDeep(ValueError):
    """A JSON value is nested deeper than the limit."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


_CONTAINERS = (dict, list, tuple)


def json_depth(value: Any, stop_above: int | None = None) -> int:
    """The nesting depth of ``value`` (dicts, lists and tuples are containers).
    Iterative: safe on any depth. With ``stop_above``, stops as soon as a point deeper
    than that is found (the result is then ``stop_above + 1``)."""
    if not isinstance(value, _CONTAINERS):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if stop_above is not None and depth > stop_above:
                return deepest
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))
    return deepest


def _path_deeper_than(value: Any, limit: int) -> str:
    """A JSON path to a container at depth ``limit + 1`` (shortened for messages)."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while stack:
        node, depth, path = stack.pop()
        if depth > limit:
            return path if len(path) <= 120 else path[:117] + "..."
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, _CONTAINERS):
                step = f"[{key}]" if isinstance(key, int) else f".{key}"
                stack.append((child, depth + 1, path + step))
    return "$"


def json_depth_problem(value: Any, limit: int = MAX_JSON_DEPTH, what: str = "value") -> str | None:
    """Why ``value`` is too deep (a sentence naming the limit and where), or None."""
    if json_depth(value, stop_above=limit) <= limit:
        return None
    where = _path_deeper_than(value, limit)
    return f"{what} is nested more than {limit} levels deep (at {where}); the limit is {limit}"


def check_json_depth(value: Any, limit: int = MAX_JSON_DEPTH, what: str = "value") -> None:
    """Raise :class:`JsonTooDeep` when ``value`` is nested deeper than ``limit``."""
    problem = json_depth_problem(value, limit, what)
    if problem is not None:
        raise JsonTooDeep(problem, _path_deeper_than(value, limit))


def loads_limited(data: str | bytes, limit: int = MAX_JSON_DEPTH, what: str = "value") -> Any:
    """``json.loads`` that refuses a document nested deeper than ``limit`` with
    :class:`JsonTooDeep` (also when the parser itself gives up on the depth) and lets
    malformed JSON raise ``json.JSONDecodeError`` as usual."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise JsonTooDeep(
            f"{what} is nested more than {limit} levels deep; the limit is {limit}", "$"
        ) from None
    check_json_depth(value, limit, what)
    return value


def text_problem(text: str, what: str = "value") -> str | None:
    """Why ``text`` cannot be an identifier (it holds a control character, NUL
    included), or None."""
    for i, char in enumerate(text):
        if unicodedata.category(char) == "Cc":
            return f"{what} contains the control character U+{ord(char):04X} at index {i}"
    return None


def name_problem(name: str, what: str = "name") -> str | None:
    """Why ``name`` cannot be a definition name, or None. Allowed: 1 to
    :data:`MAX_NAME_LENGTH` characters without control characters (NUL included),
    without ``/`` or ``:``, and without leading or trailing white space."""
    if not name or not name.strip():
        return f"{what} must not be empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"{what} is {len(name)} characters; at most {MAX_NAME_LENGTH} are allowed"
    problem = text_problem(name, what)
    if problem is not None:
        return problem
    for char in NAME_FORBIDDEN:
        if char in name:
            return f"{what} {name!r} must not contain {char!r}"
    if name != name.strip():
        return f"{what} {name!r} must not start or end with white space"
    return None
