"""Fixtures of the adapter tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.ports.queue import QueueSettings


@pytest.fixture
def make_sqlite_queue(tmp_path: Path) -> Iterator[Callable[[float], SqliteTaskQueue]]:
    """``make(busy_timeout_seconds)``: a SQLite queue on ``tmp_path / "queues.db"`` with
    the queue ``parse`` provisioned; closed at the end of the test."""
    made: list[SqliteTaskQueue] = []

    def make(busy_timeout_seconds: float) -> SqliteTaskQueue:
        path = tmp_path / "queues.db"
        provisioner = SqliteQueueProvisioner(path)
        provisioner.ensure_queue("parse", QueueSettings())
        provisioner.close()
        queue = SqliteTaskQueue(path, busy_timeout_seconds=busy_timeout_seconds)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()
