"""The DBOS workflows of the bench. DBOS registers module-level functions by name in
every process that runs them (the bench's DBOS process and its queue workers), so they
live in this module, with the one HTTP client their steps share."""

from __future__ import annotations

from typing import Any

import httpx
from dbos import DBOS

_http = httpx.Client(timeout=30)

QUEUE = "bench"
"""Run by the bench's own DBOS process (1-step queued workflow latency)."""
DRAIN_QUEUE = "bench_drain"
"""Run only by the queue worker processes."""
POLLING_SECONDS = 0.01
"""Queue polling interval (DBOS's default is 1 s; a latency-minded user lowers it)."""


@DBOS.step()
def get_step(url: str) -> dict[str, Any]:
    response = _http.get(url)
    return {"statusCode": response.status_code, "body": response.text}


@DBOS.step()
def noop_step(value: int) -> int:
    return value


@DBOS.workflow()
def get_workflow(n: int, url: str) -> int:
    for _ in range(n):
        get_step(url)
    return n


@DBOS.workflow()
def noop_workflow(n: int) -> int:
    for i in range(n):
        noop_step(i)
    return n


def config(database_url: str) -> Any:
    return {"name": "bench", "system_database_url": database_url, "log_level": "WARNING"}
