"""Small helpers shared by the bench parent, the system processes and the workers."""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

MARK = "@@bench "
"""Prefix of the protocol lines a child process writes on stdout (libraries may print
other lines there; they are ignored)."""


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(message) + "\n")
    sys.stdout.flush()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition: Callable[[], Any], timeout: float, interval: float = 0.01) -> Any:
    """Polls ``condition`` until it returns something truthy; raises TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached within {timeout} s")
        time.sleep(interval)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def python_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python process of the bench: the repo on the path,
    unbuffered output, quiet logging."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("STEPWAY_LOG_LEVEL", "WARNING")
    env.update(extra)
    return env
