from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from stepway_worker import Registry, Worker, WorkerSettings
from stepway_worker.testing import FakeTaskServer


@pytest.fixture
def server() -> Iterator[FakeTaskServer]:
    with FakeTaskServer() as fake:
        yield fake


@pytest.fixture
def reg() -> Registry:
    return Registry()


def fast_settings(url: str, **changes: Any) -> WorkerSettings:
    values: dict[str, Any] = {
        "server_url": url,
        "worker_id": "test-worker",
        "long_poll_ms": 200,
        "poll_interval": 0.05,
        "retry_initial": 0.05,
        "retry_max": 0.2,
        "shutdown_grace": 5.0,
        "http_timeout": 5.0,
    }
    values.update(changes)
    return WorkerSettings(**values)


@pytest.fixture
def start_worker(server: FakeTaskServer, reg: Registry) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(**changes: Any) -> Worker:
        w = Worker(reg, settings=fast_settings(server.url, **changes))
        workers.append(w.start())
        return w

    yield start
    for w in workers:
        if not w._stopped.is_set():
            w.stop(grace=2.0)
