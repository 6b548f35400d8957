"""Pointers into offloaded payloads, so large values travel by reference.

When a scheduled task's input parameter is exactly one reference to (part of) an output
that lives in the payload store, the Decider puts a pointer in the task's input instead
of the value: ``{"$payloadRef": "<reference>", "path": "$.text"}``. The input, the run
state and the durable history stay small; the activity that does the task's I/O (the
WORKER dispatch, a built-in activity, a child run's start) dereferences the pointers.
Pure: the loader is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.language.expressions import resolve
from protocol.payload_keys import POINTER, POINTER_PATH

PATH = POINTER_PATH


def pointer(reference: str, path: str) -> dict[str, str]:
    return {POINTER: reference, PATH: path}


def is_pointer(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) == 2
        and isinstance(value.get(POINTER), str)
        and isinstance(value.get(PATH), str)
    )


def has_pointers(value: Any) -> bool:
    if is_pointer(value):
        return True
    if isinstance(value, dict):
        return any(has_pointers(v) for v in value.values())
    if isinstance(value, list):
        return any(has_pointers(v) for v in value)
    return False


def dereference(value: Any, load: Callable[[str], Any]) -> Any:
    """``value`` with every pointer replaced by the value it points at."""
    if is_pointer(value):
        document = load(str(value[POINTER]))
        path = str(value[PATH])
        if path == "$":
            return document
        return resolve("${doc" + path[1:] + "}", {"doc": document})
    if isinstance(value, dict):
        return {k: dereference(v, load) for k, v in value.items()}
    if isinstance(value, list):
        return [dereference(v, load) for v in value]
    return value
