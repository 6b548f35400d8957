"""The sweep of deferred messages (engine/runtime/deferred_sweep.py) over a SQLite run
store and queue: attempts handed out and ended as the Task API does it, whose messages
no one settled."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_store_sql import SqlRunStore
from engine.ports.payload_store import PayloadLimits
from engine.ports.queue import QueueSettings
from engine.ports.run_store import NewRun, TaskRecord, TaskStatus, TaskUpdate
from engine.runtime.deferred_sweep import DeferredSweep
from engine.runtime.services import EngineServices

QUEUE = "parse"
#: the logger of the sweep (engine/runtime/deferred_sweep.py)
SWEEP_LOGGER = "engine.runtime.deferred_sweep"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Stores:
    run_store: SqlRunStore
    queue: SqliteTaskQueue

    def ended_attempt(self, task_id: str) -> None:
        """A task handed out (its message deferred, its sequence number on the lease) and
        COMPLETED, its message left deferred (the queue was down at that moment)."""
        now = now_ms()
        self.run_store.upsert_task(
            TaskRecord(
                task_id=task_id,
                workflow_id="w1",
                reference_task_name=task_id,
                task_type="WORKER",
                task_def_name=QUEUE,
                queue_name=QUEUE,
            ),
            now,
        )
        self.queue.send(QUEUE, {"taskId": task_id}, message_id=f"{task_id}:1")
        [message] = self.queue.receive(QUEUE)
        handed = self.run_store.hand_out_task(
            task_id,
            1,
            "wk",
            lease_expires_at=now + 60_000,
            now=now,
            sequence_number=message.sequence_number,
            queue_name=QUEUE,
        )
        assert handed.task is not None
        self.queue.defer(QUEUE, message)
        done = TaskUpdate(status=TaskStatus.COMPLETED, end_time=now)
        assert self.run_store.finish_task(task_id, 1, done, now, holder="wk")

    def deferred(self) -> int:
        return self.queue.depth(QUEUE).deferred


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    run_store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    SqliteQueueProvisioner(tmp_path / "queues.db").ensure_queue(QUEUE, QueueSettings())
    queue = SqliteTaskQueue(tmp_path / "queues.db")
    run_store.create_run(NewRun(workflow_id="w1", name="wf", version=1, create_time=now_ms()))
    try:
        yield Stores(run_store, queue)
    finally:
        queue.close()
        run_store.close()


def test_a_round_settles_a_bounded_number_and_the_next_goes_on_from_there(
    stores: Stores,
) -> None:
    for n in range(5):
        stores.ended_attempt(f"t{n}")
    sweep = DeferredSweep(stores.run_store, stores.queue, grace_ms=0, batch=2, max_batches=2)
    assert stores.deferred() == 5
    assert sweep.run_once() == 4  # two batches of two
    assert stores.deferred() == 1
    assert sweep.run_once() == 1
    assert stores.deferred() == 0
    assert sweep.run_once() == 0


def test_a_round_waits_out_the_grace_time(stores: Stores) -> None:
    stores.ended_attempt("t1")
    assert DeferredSweep(stores.run_store, stores.queue, grace_ms=3_600_000).run_once() == 0
    assert stores.deferred() == 1
    later = DeferredSweep(
        stores.run_store,
        stores.queue,
        grace_ms=3_600_000,
        clock=lambda: now_ms() + 3_600_000,
    )
    assert later.run_once() == 1
    assert stores.deferred() == 0


def test_a_message_found_settled_already_is_recorded_and_not_asked_about_again(
    stores: Stores,
) -> None:
    """The queue answers that the message is not deferred (settled by another replica's
    sweep, say): the lease records it, and no later round lists it."""
    stores.ended_attempt("t1")
    lease = stores.run_store.get_lease("t1", 1)
    assert lease is not None and lease.sequence_number is not None
    assert stores.queue.settle_deferred(QUEUE, lease.sequence_number)
    sweep = DeferredSweep(stores.run_store, stores.queue, grace_ms=0)
    assert sweep.run_once() == 1
    assert stores.run_store.unsettled_attempts(now_ms() + 1) == []
    assert sweep.run_once() == 0


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_the_services_sweep_through_a_queue_outage_until_they_are_closed(
    stores: Stores, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``EngineServices.start_sweep``: rounds that meet the queue locked are logged and
    the sweep goes on; once the queue is free the message is settled; ``close`` stops
    the sweep."""
    stores.ended_attempt("t1")
    queue = SqliteTaskQueue(tmp_path / "queues.db", busy_timeout_seconds=0.1)
    services = EngineServices(
        run_store=stores.run_store,
        queue=queue,
        payloads=None,
        payload_limits=PayloadLimits(),
        client_factory=lambda: None,
    )
    lock = sqlite3.connect(tmp_path / "queues.db", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        with caplog.at_level(logging.WARNING, logger=SWEEP_LOGGER):
            services.start_sweep(0.05, grace_ms=0)
            assert services.sweeping

            # the sweep's own records: a thread another test left may log meanwhile
            def swept() -> list[str]:
                return [r.getMessage() for r in caplog.records if r.name == SWEEP_LOGGER]

            wait_until(
                lambda: sum("not swept" in m for m in swept()) >= 2,
                "two rounds to meet the locked queue",
            )
        assert "task queue unavailable: database is locked" in swept()[0]
    finally:
        lock.execute("COMMIT")
        lock.close()
    try:
        wait_until(lambda: stores.deferred() == 0, "the sweep to settle the message")
    finally:
        services.close()
        queue.close()
    assert not services.sweeping
    lease = stores.run_store.get_lease("t1", 1)
    assert lease is not None and lease.settled_at is not None


def test_no_sweep_with_an_interval_of_zero(stores: Stores) -> None:
    services = EngineServices(
        run_store=stores.run_store,
        queue=stores.queue,
        payloads=None,
        payload_limits=PayloadLimits(),
        client_factory=lambda: None,
    )
    services.start_sweep(0)
    assert not services.sweeping
    services.close()
