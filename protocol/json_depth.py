"""How deep JSON may nest, checked without recursion wherever JSON enters Stepway.

A value nested thousands of levels deep breaks recursive code: Python raises
``RecursionError``, C serializers (QuickJS's ``JSON.stringify``, jq's printer) overflow
their stack and take the process down. Every place that takes JSON from outside (API
bodies, worker results, script and jq results, payloads read back, HTTP responses of
built-in activities) refuses values nested deeper than a limit, with a clear reason.

Depth counts containers: a scalar has depth 0, ``[]`` and ``{"a": 1}`` depth 1,
``{"a": [1]}`` depth 2. The default limit is :data:`MAX_JSON_DEPTH` (64 levels).

* :func:`json_depth` / :func:`check_depth` measure a parsed value iteratively (no
  recursion, stops as soon as the limit is passed).
* :func:`loads` parses text and refuses it when it is too deep; it never raises
  ``RecursionError`` (CPython's parser checks its own recursion and raises that, which is
  turned into :class:`JsonTooDeep`).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "JsonTooDeep", "check_depth", "json_depth", "loads"]

#: Deepest nesting of arrays and objects accepted in a value.
MAX_JSON_DEPTH = 64


class JsonTooDeep(ValueError):
    """A JSON value nested deeper than the limit. ``str()`` names what and the limit."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        super().__init__(
            f"{what} is nested deeper than the limit of {limit} levels of arrays and objects"
        )


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of ``value`` (dicts, lists and tuples count), or ``limit + 1``
    as soon as it is known to be deeper than ``limit``. Iterative: safe on any depth."""
    if not isinstance(value, dict | list | tuple):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return limit + 1
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list | tuple) and child:
                stack.append((child, depth + 1))
            elif isinstance(child, dict | list | tuple) and depth + 1 > deepest:
                deepest = depth + 1
                if deepest > limit:
                    return limit + 1
    return deepest


def check_depth(value: Any, what: str = "JSON value", limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JsonTooDeep` (naming ``what``) if ``value`` nests deeper than
    ``limit``."""
    if json_depth(value, limit) > limit:
        raise JsonTooDeep(what, limit)


def loads(text: str | bytes, what: str = "JSON value", limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``, refusing values nested deeper than ``limit`` with
    :class:`JsonTooDeep` (never ``RecursionError``). Malformed text raises
    ``json.JSONDecodeError`` as usual."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(what, limit) from None
    check_depth(value, what, limit)
    return value
