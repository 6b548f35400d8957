"""Contract suite of the task-queue port, run on every adapter that can run here.

SQLite always; Azure Service Bus when STEPWAY_TEST_SERVICEBUS_NAMESPACE names a
namespace (``<name>.servicebus.windows.net``) that DefaultAzureCredential may
manage (Azure Service Bus Data Owner). Service Bus locks last at least 5 s, so the
lock-expiry tests take longer there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.ports.queue import (
    REASON_MAX_DELIVERY,
    MessageLockLost,
    MessageNotFound,
    QueueMessage,
    QueueNotFound,
    QueueSettings,
    TaskQueue,
    dead_letter_queue_name,
)

SB_ENV = "STEPWAY_TEST_SERVICEBUS_NAMESPACE"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Harness:
    kind: str
    queue: TaskQueue
    make_queue: Callable[[QueueSettings], str]
    replica: Callable[[], TaskQueue]
    lock: float  # a short lock duration this backend accepts
    exact_deferred_depth: bool
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    def new_queue(self, **overrides: object) -> str:
        values: dict[str, object] = {"lock_duration_seconds": self.lock}
        values.update(overrides)
        return self.make_queue(QueueSettings(**values))  # type: ignore[arg-type]


def _sqlite_harness(tmp_path: Path) -> Harness:
    path = tmp_path / "queues.db"
    provisioner = SqliteQueueProvisioner(path)
    main = SqliteTaskQueue(path)
    replicas: list[SqliteTaskQueue] = []

    def make_queue(settings: QueueSettings) -> str:
        name = f"t{uuid.uuid4().hex[:10]}"
        provisioner.ensure_queue(name, settings)
        return name

    def replica() -> TaskQueue:
        r = SqliteTaskQueue(path)
        replicas.append(r)
        return r

    h = Harness("sqlite", main, make_queue, replica, lock=0.4, exact_deferred_depth=True)
    h.cleanup.append(main.close)
    h.cleanup.append(provisioner.close)
    h.cleanup.append(lambda: [r.close() for r in replicas])
    return h


def _servicebus_harness(namespace: str) -> Harness:
    from azure.identity import DefaultAzureCredential
    from azure.servicebus.management import ServiceBusAdministrationClient

    from engine.adapters.queue_servicebus import ServiceBusTaskQueue

    fqns = namespace if "." in namespace else f"{namespace}.servicebus.windows.net"
    credential = DefaultAzureCredential()
    admin = ServiceBusAdministrationClient(fqns, credential)
    created: list[str] = []
    instances: list[ServiceBusTaskQueue] = []

    def make_queue(settings: QueueSettings) -> str:
        name = f"stepway-test-{uuid.uuid4().hex[:10]}"
        admin.create_queue(
            name,
            lock_duration=timedelta(seconds=max(5.0, settings.lock_duration_seconds)),
            max_delivery_count=settings.max_delivery_count,
            requires_duplicate_detection=settings.requires_duplicate_detection,
            duplicate_detection_history_time_window=timedelta(
                seconds=max(20, settings.duplicate_detection_window_seconds)
            ),
            dead_lettering_on_message_expiration=settings.dead_lettering_on_message_expiration,
        )
        created.append(name)
        return name

    def replica() -> TaskQueue:
        r = ServiceBusTaskQueue(fqns, credential)
        instances.append(r)
        return r

    main = ServiceBusTaskQueue(fqns, credential)
    instances.append(main)

    def cleanup() -> None:
        for r in instances:
            r.close()
        for name in created:
            admin.delete_queue(name)
        admin.close()

    h = Harness("servicebus", main, make_queue, replica, lock=5.0, exact_deferred_depth=False)
    h.cleanup.append(cleanup)
    return h


@pytest.fixture(params=["sqlite", "servicebus"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "servicebus":
        namespace = os.environ.get(SB_ENV)
        if not namespace:
            pytest.skip(f"Service Bus contract run needs {SB_ENV} (a namespace) and Azure login")
        h = _servicebus_harness(namespace)
    else:
        h = _sqlite_harness(tmp_path)
    try:
        yield h
    finally:
        for fn in h.cleanup:
            fn()


def _receive_one(q: TaskQueue, queue: str, wait: float = 2.0) -> QueueMessage:
    got = q.receive(queue, 1, wait)
    assert len(got) == 1, f"expected a message in {queue}"
    return got[0]


# -- basic flow ----------------------------------------------------------------


def test_send_receive_complete(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    body = {"taskId": "t1", "workflowId": "w1", "taskRef": "parse", "input": {}, "attempt": 1}
    q.send(name, body, "t1:1")
    m = _receive_one(q, name)
    assert m.json() == body
    assert m.message_id == "t1:1"
    assert m.delivery_count == 0
    assert m.lock_token and m.locked_until and m.locked_until > datetime.now(UTC)
    assert m.sequence_number > 0
    q.complete(name, m)
    assert q.receive(name, 1, 0.1) == []
    assert q.depth(name).total == 0
    with pytest.raises(MessageLockLost):
        q.complete(name, m)  # settled already


def test_bytes_body_round_trips(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, b"\x00raw\xff", "b1")
    m = _receive_one(q, name)
    assert m.body == b"\x00raw\xff"
    q.complete(name, m.lock_token or "")


def test_duplicate_message_id_is_dropped(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"n": 1}, "task-7:1")
    q.send(name, {"n": 2}, "task-7:1")  # dropped silently
    q.send(name, {"n": 3}, "task-7:2")
    got = q.receive(name, 10, 1.0)
    got += q.receive(name, 10, 0.2)
    assert sorted(m.json()["n"] for m in got) == [1, 3]


def test_duplicate_dropped_even_after_completion(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"n": 1}, "x:1")
    q.complete(name, _receive_one(q, name))
    q.send(name, {"n": 1}, "x:1")  # a re-run of the dispatch activity
    assert q.receive(name, 1, 0.3) == []


def test_scheduled_send_is_invisible_until_due(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    delay = 1.0 if harness.kind == "sqlite" else 3.0
    due = datetime.now(UTC) + timedelta(seconds=delay)
    q.send(name, {"later": True}, "s:1", scheduled_enqueue_time=due)
    assert q.receive(name, 1, 0.2) == []
    d = q.depth(name)
    assert (d.scheduled, d.active) == (1, 0)
    m = _receive_one(q, name, wait=delay + 3)
    assert datetime.now(UTC) >= due - timedelta(milliseconds=50)
    assert m.json() == {"later": True}
    q.complete(name, m)


# -- locks -----------------------------------------------------------------------


def test_lock_hides_message_from_other_receivers(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    other = harness.replica()
    q.send(name, {"x": 1}, "l:1")
    m = _receive_one(q, name)
    assert other.receive(name, 1, 0.2) == []
    assert q.receive(name, 1, 0.1) == []
    q.complete(name, m)


def test_lock_expiry_returns_message_with_delivery_count_incremented(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"x": 1}, "e:1")
    first = _receive_one(q, name)
    again = _receive_one(harness.replica(), name, wait=harness.lock + 3)
    assert again.sequence_number == first.sequence_number
    assert again.delivery_count == first.delivery_count + 1
    with pytest.raises(MessageLockLost):
        q.complete(name, first)  # the old lock is gone


def test_abandon_returns_message_at_once(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"x": 1}, "a:1")
    m = _receive_one(q, name)
    q.abandon(name, m)
    again = _receive_one(q, name, wait=1.0)
    assert again.sequence_number == m.sequence_number
    assert again.delivery_count == 1
    q.complete(name, again)


def test_receive_first_takes_the_queues_in_their_order(harness: Harness) -> None:
    q = harness.queue
    high, normal = harness.new_queue(), harness.new_queue()
    q.send(normal, {"n": 1}, "n:1")
    q.send(high, {"h": 1}, "h:1")
    q.send(normal, {"n": 2}, "n:2")
    [first] = q.receive_first([high, normal], 1, 2.0)
    assert (first.queue, first.json()) == (high, {"h": 1})
    rest = q.receive_first([high, normal], 5, 2.0)
    assert [(m.queue, m.json()) for m in rest] == [(normal, {"n": 1}), (normal, {"n": 2})]
    for m in [first, *rest]:
        q.complete(m.queue, m)


def test_receive_first_waits_for_a_message_on_any_of_its_queues(harness: Harness) -> None:
    q = harness.queue
    high, normal = harness.new_queue(), harness.new_queue()
    timer = threading.Timer(0.3, lambda: harness.replica().send(high, {"late": True}, "l:1"))
    timer.start()
    try:
        got = q.receive_first([high, normal], 1, 10.0)
    finally:
        timer.join()
    assert [(m.queue, m.json()) for m in got] == [(high, {"late": True})]
    q.complete(high, got[0])


def test_receive_first_names_a_missing_queue(harness: Harness) -> None:
    name = harness.new_queue()
    missing = f"missing{uuid.uuid4().hex[:8]}"
    with pytest.raises(QueueNotFound) as raised:
        harness.queue.receive_first([name, missing], 1, 0.0)
    assert raised.value.queue == missing


# -- deferral --------------------------------------------------------------------


def test_defer_then_fetch_by_sequence_number_on_another_replica(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"task": "d"}, "d:1")
    m = _receive_one(q, name)
    q.defer(name, m)
    assert q.receive(name, 1, 0.2) == []  # invisible to every receiver
    d = q.depth(name)
    if harness.exact_deferred_depth:
        assert (d.active, d.deferred) == (0, 1)
    else:
        assert d.active + d.deferred == 1

    replica = harness.replica()
    [fetched] = replica.receive_deferred(name, [m.sequence_number])
    assert fetched.json() == {"task": "d"}
    assert fetched.lock_token and fetched.lock_token != m.lock_token
    with pytest.raises(MessageNotFound):
        q.receive_deferred(name, [m.sequence_number])  # locked by the replica
    replica.complete(name, fetched)
    assert q.depth(name).total == 0
    with pytest.raises(MessageNotFound):
        q.receive_deferred(name, [m.sequence_number])


def test_fetched_deferred_message_returns_to_deferred_when_its_lock_expires(
    harness: Harness,
) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"task": "d"}, "d:2")
    m = _receive_one(q, name)
    q.defer(name, m)
    [fetched] = q.receive_deferred(name, [m.sequence_number])
    time.sleep(harness.lock + 0.2)
    assert q.receive(name, 1, 0.1) == []  # not back in the active queue
    [again] = harness.replica().receive_deferred(name, [m.sequence_number])
    assert again.delivery_count == fetched.delivery_count + 1
    with pytest.raises(MessageLockLost):
        q.complete(name, fetched)


def test_settle_deferred_completes_a_deferred_message_by_sequence_number(
    harness: Harness,
) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"task": "s"}, "s:1")
    m = _receive_one(q, name)
    q.defer(name, m)
    assert harness.replica().settle_deferred(name, m.sequence_number) is True
    assert q.depth(name).total == 0
    with pytest.raises(MessageNotFound):
        q.receive_deferred(name, [m.sequence_number])
    # settled already: nothing to settle
    assert q.settle_deferred(name, m.sequence_number) is False


def test_settle_deferred_dead_letters_with_the_reason(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"task": "s"}, "s:2")
    m = _receive_one(q, name)
    q.defer(name, m)
    assert q.settle_deferred(name, m.sequence_number, "RetriesExhausted", "boom") is True
    dead = _receive_one(q, dead_letter_queue_name(name))
    assert dead.json() == {"task": "s"}
    assert (dead.dead_letter_reason, dead.dead_letter_description) == ("RetriesExhausted", "boom")
    q.complete(dead_letter_queue_name(name), dead)


def test_settle_deferred_leaves_an_active_or_fetched_message_alone(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"x": 1}, "s:3")
    [peeked] = q.peek(name, 1)
    assert q.settle_deferred(name, peeked.sequence_number) is False  # active, not deferred
    m = _receive_one(q, name)
    q.defer(name, m)
    [fetched] = harness.replica().receive_deferred(name, [m.sequence_number])
    assert q.settle_deferred(name, m.sequence_number) is False  # locked by the replica
    q.complete(name, fetched)  # the replica's lock still holds
    assert q.depth(name).total == 0


# -- batches -------------------------------------------------------------------


def test_a_batch_is_one_transaction_seen_by_others_once_it_ends(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"n": 1}, "b:1")
    replica = harness.replica()
    with q.batch():
        [m] = q.receive(name, 1, 0.0)
        q.defer(name, m)
        q.send(name, {"n": 2}, "b:2")
        if harness.kind == "sqlite":
            # nothing of it is seen outside before it ends (Service Bus: each call is
            # an operation of its own)
            assert replica.depth(name).deferred == 0
            assert replica.peek(name, 10)[0].json() == {"n": 1}
    assert [x.json() for x in replica.receive(name, 5, 1.0)] == [{"n": 2}]
    [fetched] = replica.receive_deferred(name, [m.sequence_number])
    assert fetched.json() == {"n": 1}


def test_a_batch_that_raises_leaves_nothing(harness: Harness) -> None:
    if harness.kind != "sqlite":
        pytest.skip("Service Bus has no transaction to roll back: each call stands")
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"n": 1}, "r:1")
    with pytest.raises(RuntimeError), q.batch():
        [m] = q.receive(name, 1, 0.0)
        q.complete(name, m)
        q.send(name, {"n": 2}, "r:2")
        raise RuntimeError("the caller failed")
    got = q.receive(name, 5, 0.5)
    assert [x.json() for x in got] == [{"n": 1}]
    assert got[0].delivery_count == 0  # its lock was rolled back with the rest


def test_a_call_that_fails_in_a_batch_undoes_only_its_own_writes(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    for i in range(2):
        q.send(name, {"n": i}, f"u:{i}")
    first, second = q.receive(name, 2, 1.0)
    q.defer(name, first)
    q.defer(name, second)
    with q.batch():
        q.send(name, {"n": 2}, "u:2")
        with pytest.raises(MessageNotFound):
            # the first one would be locked, the missing one makes the call fail: neither
            q.receive_deferred(name, [first.sequence_number, 10**12])
        [fetched] = q.receive_deferred(name, [second.sequence_number])
    assert [x.json() for x in q.receive(name, 5, 1.0)] == [{"n": 2}]
    # the failed call locked nothing: the first is there to fetch, the second is locked
    assert [x.json() for x in q.receive_deferred(name, [first.sequence_number])] == [{"n": 0}]
    with pytest.raises(MessageNotFound):
        q.receive_deferred(name, [second.sequence_number])
    q.complete(name, fetched)


def test_a_batch_that_only_reads_lets_others_write(tmp_path: Path) -> None:
    """SQLite: the batch's transaction begins at its first write; until then another
    process's writer (here a connection of its own with no busy wait) is not held up."""
    import sqlite3

    path = tmp_path / "reads.db"
    SqliteQueueProvisioner(path).ensure_queue("r", QueueSettings())
    q = SqliteTaskQueue(path)
    q.send("r", {"n": 1}, "r:1")
    raw = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with q.batch():
            assert q.peek("r", 5)[0].json() == {"n": 1}
            assert q.receive("r", 1, 0.0) != []  # its first write: the lock is taken now
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                raw.execute("BEGIN IMMEDIATE")
        raw.execute("BEGIN IMMEDIATE")  # free again once it committed
        raw.execute("ROLLBACK")
        with q.batch():
            assert q.depth("r").total == 1
            raw.execute("BEGIN IMMEDIATE")  # a batch that only read holds no lock
            raw.execute("ROLLBACK")
    finally:
        raw.close()
        q.close()


def test_a_receiver_waiting_on_a_batch_send_is_woken_once_it_committed(tmp_path: Path) -> None:
    """SQLite: a long poll of 30 s that re-reads the file only at its end (idle re-reads
    every 60 s here) gets a message sent meanwhile only when it is woken. A wake-up given
    inside the batch, before the commit, would find nothing and leave it waiting out its
    30 s; a lost one likewise."""
    path = tmp_path / "wake.db"
    SqliteQueueProvisioner(path).ensure_queue("w", QueueSettings())
    q = SqliteTaskQueue(path, idle_poll_seconds=(60.0, 60.0))
    got: list[QueueMessage] = []
    waiting = threading.Thread(target=lambda: got.extend(q.receive("w", 1, 30.0)))
    waiting.start()
    try:
        time.sleep(0.3)  # the receiver waits by now
        with q.batch():
            q.send("w", {"n": 1}, "w:1")
            time.sleep(0.2)  # a wake-up given now would find the message not committed
        waiting.join(10)
        assert not waiting.is_alive(), "the receiver was not woken by the batch's send"
        assert [m.json() for m in got] == [{"n": 1}]
    finally:
        waiting.join(35)
        q.close()


def test_receive_deferred_of_an_active_message_is_not_found(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"x": 1}, "n:1")
    [peeked] = q.peek(name, 1)
    with pytest.raises(MessageNotFound):
        q.receive_deferred(name, [peeked.sequence_number])
    assert _receive_one(q, name).sequence_number == peeked.sequence_number


def test_requeue_puts_message_back_with_a_delay(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    q.send(name, {"x": 1}, "r:1")
    m = _receive_one(q, name)
    delay = 0.8 if harness.kind == "sqlite" else 3.0
    new_id = q.requeue(name, m, delay)
    assert new_id != m.message_id
    assert q.receive(name, 1, 0.1) == []
    assert q.depth(name).scheduled == 1
    again = _receive_one(q, name, wait=delay + 3)
    assert again.json() == {"x": 1}
    assert again.message_id == new_id
    # A deferred message fetched by sequence number can be requeued too (callbackAfterSeconds).
    q.defer(name, again)
    replica = harness.replica()
    [fetched] = replica.receive_deferred(name, [again.sequence_number])
    third_id = replica.requeue(name, fetched, 0.2)
    assert third_id.count("#r") == 1  # ids do not grow with each requeue
    third = _receive_one(q, name, wait=3.0)
    assert (third.message_id, third.json()) == (third_id, {"x": 1})
    q.complete(name, third)


# -- dead letters ----------------------------------------------------------------


def test_dead_letter_with_reason_is_visible_in_the_dlq(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    dlq = dead_letter_queue_name(name)
    q.send(name, {"x": 1}, "dl:1")
    m = _receive_one(q, name)
    q.defer(name, m)
    replica = harness.replica()
    [fetched] = replica.receive_deferred(name, [m.sequence_number])
    replica.dead_letter(name, fetched, "RetriesExhausted", "attempt 3 of 3 failed")
    assert q.depth(name).dead_lettered == 1
    with pytest.raises(MessageNotFound):
        q.receive_deferred(name, [m.sequence_number])
    [peeked] = q.peek(dlq, 10)
    assert peeked.dead_letter_reason == "RetriesExhausted"
    assert peeked.dead_letter_description == "attempt 3 of 3 failed"
    assert peeked.json() == {"x": 1}
    assert peeked.message_id == "dl:1"
    assert peeked.lock_token is None
    got = _receive_one(q, dlq)
    assert got.sequence_number == peeked.sequence_number
    q.complete(dlq, got)
    assert q.depth(name).dead_lettered == 0


def test_max_delivery_count_moves_message_to_dlq(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue(max_delivery_count=2)
    q.send(name, {"x": 1}, "mdc:1")
    q.abandon(name, _receive_one(q, name))
    q.abandon(name, _receive_one(q, name, wait=1.0))
    assert q.receive(name, 1, 0.2) == []
    [dead] = q.peek(dead_letter_queue_name(name), 10)
    assert dead.dead_letter_reason == REASON_MAX_DELIVERY
    assert q.depth(name).dead_lettered == 1


def test_lock_expiry_counts_toward_max_delivery_count(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue(max_delivery_count=1)
    q.send(name, {"x": 1}, "mdc:2")
    _receive_one(q, name)
    time.sleep(harness.lock + 0.2)
    assert q.receive(name, 1, 0.2) == []
    [dead] = q.peek(dead_letter_queue_name(name), 10)
    assert dead.dead_letter_reason == REASON_MAX_DELIVERY


# -- depth and errors ------------------------------------------------------------


def test_depth_counts_each_state(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue(lock_duration_seconds=max(harness.lock, 30.0))
    far = datetime.now(UTC) + timedelta(hours=1)
    q.send(name, {"s": "scheduled"}, "1", scheduled_enqueue_time=far)
    for i in range(2, 6):
        q.send(name, {"i": i}, str(i))
    first = _receive_one(q, name)
    q.defer(name, first)
    second = _receive_one(q, name)
    q.dead_letter(name, second, "Bad")
    _receive_one(q, name)  # locked: still counted active
    d = q.depth(name)
    assert d.scheduled == 1
    assert d.dead_lettered == 1
    if harness.exact_deferred_depth:
        assert (d.active, d.deferred) == (2, 1)
    else:
        assert d.active + d.deferred == 3


def test_unknown_queue_raises_queue_not_found(harness: Harness) -> None:
    q = harness.queue
    missing = f"no-such-queue-{uuid.uuid4().hex[:8]}"
    with pytest.raises(QueueNotFound):
        q.send(missing, {"x": 1}, "m:1")
    with pytest.raises(QueueNotFound):
        q.depth(missing)
    if harness.kind == "sqlite":
        with pytest.raises(QueueNotFound):
            q.receive(missing, 1, 0)


def test_long_poll_returns_soon_after_a_send(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue()
    sender = harness.replica()
    timer = threading.Timer(0.3, lambda: sender.send(name, {"x": 1}, "lp:1"))
    start = time.monotonic()
    timer.start()
    try:
        m = _receive_one(q, name, wait=5.0)
    finally:
        timer.join()
    elapsed = time.monotonic() - start
    # woken by the send, not by the 5 s wait running out (generous for a loaded machine)
    assert 0.25 <= elapsed < 3.0
    q.complete(name, m)


def test_concurrent_receivers_get_distinct_messages(harness: Harness) -> None:
    q, name = harness.queue, harness.new_queue(lock_duration_seconds=60.0)
    total = 500
    for i in range(total):
        q.send(name, {"i": i}, f"c:{i}")
    seen: list[int] = []
    seen_lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while True:
                got = q.receive(name, 10, 0.3)
                if not got:
                    return
                for m in got:
                    q.complete(name, m)
                with seen_lock:
                    seen.extend(m.json()["i"] for m in got)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(seen) == total, "a message was lost or handed to two receivers"
    assert sorted(seen) == list(range(total))
    assert q.depth(name).total == 0


# -- SQLite only -----------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from engine.adapters.queue_sqlite import SqliteTaskQueue
    path, queue = sys.argv[1], sys.argv[2]
    q = SqliteTaskQueue(path)
    seen = []
    print("ready", flush=True)
    sys.stdin.readline()
    while True:
        got = q.receive(queue, 5, 0.5)
        if not got:
            break
        for m in got:
            q.complete(queue, m)
            seen.append(m.json()["i"])
        time.sleep(0.01)  # a worker's work: no receiver can drain the queue alone
    print(json.dumps(seen), flush=True)
    """
)


def test_two_processes_on_one_sqlite_file_get_distinct_messages(tmp_path: Path) -> None:
    import json

    path = tmp_path / "shared.db"
    provisioner = SqliteQueueProvisioner(path)
    provisioner.ensure_queue("shared", QueueSettings(lock_duration_seconds=60))
    q = SqliteTaskQueue(path)
    total = 400
    for i in range(total):
        q.send("shared", {"i": i}, f"p:{i}")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), "shared"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        for _ in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        # this process receives too: three processes compete
        mine: list[int] = []
        while got := q.receive("shared", 5, 0.5):
            for m in got:
                q.complete("shared", m)
                mine.append(m.json()["i"])
            time.sleep(0.01)  # paced like the children, so all three compete
        results = [mine]
        for p in procs:
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 0
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        q.close()
        provisioner.close()
    everything = [i for r in results for i in r]
    assert sorted(everything) == list(range(total)), "lost or duplicated across processes"
    assert sum(1 for r in results if r) >= 2, "expected more than one process to receive"


def test_sqlite_receive_uses_the_ready_index(tmp_path: Path) -> None:
    path = tmp_path / "plan.db"
    SqliteQueueProvisioner(path).ensure_queue("p", QueueSettings())
    q = SqliteTaskQueue(path)
    con = q.database.connection()
    plan = con.execute(
        "EXPLAIN QUERY PLAN SELECT seq FROM sbq_messages INDEXED BY sbq_messages_ready "
        "WHERE queue = ? AND state = 0 AND visible_at <= ? ORDER BY visible_at LIMIT 10",
        ("p", time.time()),
    ).fetchall()
    detail = " ".join(str(r[-1]) for r in plan)
    assert "sbq_messages_ready" in detail and "SCAN" not in detail.replace("SEARCH", "")
    assert "TEMP B-TREE" not in detail
    q.close()


def test_sqlite_long_poll_does_not_spin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "spin.db"
    SqliteQueueProvisioner(path).ensure_queue("idle", QueueSettings())
    q = SqliteTaskQueue(path)
    calls = 0
    original = q._receive_once

    def counting(*args: object) -> object:
        nonlocal calls
        calls += 1
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(q, "_receive_once", counting)
    assert q.receive("idle", 1, 1.0) == []
    assert calls <= 12, f"{calls} polls in 1 s"
    q.close()


# -- Service Bus adapter, offline (no namespace needed) ---------------------------


class _FakeSender:
    def __init__(self, error: Exception | None = None) -> None:
        self.sent: list[object] = []
        self.error = error

    def send_messages(self, message: object) -> None:
        if self.error:
            raise self.error
        self.sent.append(message)

    def close(self) -> None:
        pass


class _FakeClient:
    def __init__(self, sender: _FakeSender) -> None:
        self.sender = sender

    def get_queue_sender(self, queue: str) -> _FakeSender:
        return self.sender

    def close(self) -> None:
        pass


class _FakeAdmin:
    def get_queue_runtime_properties(self, queue: str) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(
            active_message_count=3,
            scheduled_message_count=1,
            dead_letter_message_count=2,
            transfer_message_count=0,
            transfer_dead_letter_message_count=0,
            total_message_count=7,
        )

    def close(self) -> None:
        pass


def test_servicebus_adapter_maps_send_depth_and_errors_offline() -> None:
    from azure.servicebus.exceptions import MessagingEntityNotFoundError

    from engine.adapters.queue_servicebus import ServiceBusTaskQueue

    sender = _FakeSender()
    q = ServiceBusTaskQueue(
        "example.servicebus.windows.net",
        None,  # type: ignore[arg-type]
        client=_FakeClient(sender),  # type: ignore[arg-type]
        admin_client=_FakeAdmin(),  # type: ignore[arg-type]
    )
    due = datetime.now(UTC) + timedelta(seconds=30)
    q.send("parse_pdf", {"taskId": "t"}, "t:1", scheduled_enqueue_time=due)
    [sent] = sender.sent
    assert sent.message_id == "t:1"  # type: ignore[attr-defined]
    assert sent.scheduled_enqueue_time_utc == due  # type: ignore[attr-defined]
    assert sent.content_type == "application/json"  # type: ignore[attr-defined]
    assert b"".join(sent.body) == b'{"taskId":"t"}'  # type: ignore[attr-defined]
    d = q.depth("parse_pdf")
    assert (d.active, d.scheduled, d.deferred, d.dead_lettered) == (3, 1, 1, 2)
    with pytest.raises(MessageLockLost):
        q.complete("parse_pdf", "a-lock-token-from-another-replica")
    sender.error = MessagingEntityNotFoundError(message="The messaging entity could not be found")
    with pytest.raises(QueueNotFound):
        q.send("nope", {"x": 1}, "n:1")
    q.close()
