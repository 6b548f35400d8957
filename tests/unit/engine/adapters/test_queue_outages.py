"""A task queue backend that cannot be used right now raises the port's
``QueueUnavailable`` (not a ``QueueError``: no caller takes it for an answer of the
queue): the SQLite queue whose file another connection holds past the busy timeout,
and the Service Bus adapter, through the real SDK, against an address that refuses
connections."""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient

from engine.adapters.queue_servicebus import ServiceBusTaskQueue
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.ports.queue import QueueError, QueueUnavailable


@pytest.fixture
def queue(make_sqlite_queue: Callable[[float], SqliteTaskQueue]) -> SqliteTaskQueue:
    return make_sqlite_queue(0.2)


def test_a_locked_sqlite_queue_is_unavailable_until_it_is_free(
    queue: SqliteTaskQueue, tmp_path: Path
) -> None:
    queue.send("parse", {"n": 1}, message_id="m1")
    lock = sqlite3.connect(tmp_path / "queues.db", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        for call in (
            lambda: queue.send("parse", {"n": 2}, message_id="m2"),
            lambda: queue.receive("parse", 1, 0),
        ):
            with pytest.raises(QueueUnavailable) as caught:
                call()
            assert not isinstance(caught.value, QueueError)
            assert str(caught.value) == "task queue unavailable: database is locked"
            assert caught.value.detail == "sqlite3.OperationalError SQLITE_BUSY"
    finally:
        lock.execute("COMMIT")
        lock.close()
    [message] = queue.receive("parse", 5, 0)
    assert message.message_id == "m1"  # m2 was not sent


def test_a_closed_sqlite_queue_still_raises_its_queue_error(queue: SqliteTaskQueue) -> None:
    queue.close()
    with pytest.raises(QueueError, match="closed"):
        queue.send("parse", {"n": 1}, message_id="m1")


class _Token:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("token", int(time.time()) + 3600)


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_service_bus_that_cannot_be_reached_is_unavailable() -> None:
    """The namespace is 127.0.0.1 (the SDK's AMQP port, 5671, where nothing listens);
    the administration client's (HTTPS) is a port where nothing listens either."""
    if _listening(5671):
        pytest.skip("something listens on 127.0.0.1:5671")
    port = _refused_port()
    queue = ServiceBusTaskQueue(
        "127.0.0.1",
        _Token(),
        client=ServiceBusClient("127.0.0.1", _Token(), retry_total=0),
        admin_client=ServiceBusAdministrationClient(f"127.0.0.1:{port}", _Token(), retry_total=0),
    )
    try:
        for call in (
            lambda: queue.send("parse", {"n": 1}, message_id="m1"),
            lambda: queue.receive("parse", 1, 0.1),
            lambda: queue.depth("parse"),
        ):
            with pytest.raises(QueueUnavailable) as caught:
                call()
            assert str(caught.value) == "task queue unavailable: cannot connect to Service Bus"
            assert "127.0.0.1" not in str(caught.value)
    finally:
        queue.close()
