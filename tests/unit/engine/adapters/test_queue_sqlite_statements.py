"""What a hand-out costs the SQLite queue, in SQL statements (counted by SQLite's own
trace callback on the connection the queue uses in this thread): a poll of
``<type>-high`` then ``<type>`` receives with one read and one write transaction that
does not look at a queue the read found empty, a defer and the completion of a
deferred message are one statement each. Counts, not times: a regression that adds
statements to the hot path fails here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.ports.queue import MessageLockLost, QueueSettings
from engine.ports.queue_provisioning import queue_names
from protocol.queues import poll_queues


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[SqliteTaskQueue]:
    path = tmp_path / "queues.db"
    provisioner = SqliteQueueProvisioner(path)
    for name in queue_names("parse", []):  # as registering its task definition does
        provisioner.ensure_queue(name, QueueSettings())
    provisioner.close()
    q = SqliteTaskQueue(path)
    try:
        yield q
    finally:
        q.close()


class Statements:
    def __init__(self, queue: SqliteTaskQueue) -> None:
        self.kinds: Counter[str] = Counter()
        queue._db.connection().set_trace_callback(self._seen)

    def _seen(self, sql: str) -> None:
        self.kinds[sql.split(None, 1)[0].upper()] += 1

    def take(self) -> Counter[str]:
        kinds, self.kinds = self.kinds, Counter()
        return kinds


def test_a_hand_out_costs_a_fixed_number_of_statements(queue: SqliteTaskQueue) -> None:
    queues = poll_queues("parse", None)
    assert queues == ["parse-high", "parse"]
    queue.send("parse", {"n": 1}, "m1")
    seen = Statements(queue)

    (message,) = queue.receive_first(queues, max_messages=1, lock_seconds=60.0)
    # the read of both queues' next due time; BEGIN IMMEDIATE, the queue's settings,
    # the ready message, its lock, COMMIT: -high, empty when read, is not looked at
    assert seen.take() == Counter({"SELECT": 3, "BEGIN": 1, "UPDATE": 1, "COMMIT": 1})

    queue.defer("parse", message)
    assert seen.take() == Counter({"BEGIN": 1, "UPDATE": 1, "COMMIT": 1})

    assert queue.settle_deferred("parse", message.sequence_number)
    assert seen.take() == Counter({"BEGIN": 1, "DELETE": 1, "COMMIT": 1})
    assert queue.depth("parse").active + queue.depth("parse").deferred == 0


def test_the_one_statement_settlements_keep_their_checks(queue: SqliteTaskQueue) -> None:
    queue.send("parse", {"n": 1}, "m1")
    (message,) = queue.receive("parse", lock_seconds=60.0)
    queue.defer("parse", message)
    with pytest.raises(MessageLockLost):
        queue.defer("parse", message)  # its lock went with the first defer
    # a deferred message fetched (locked) by another caller is not completed under it
    (fetched,) = queue.receive_deferred("parse", [message.sequence_number])
    assert not queue.settle_deferred("parse", message.sequence_number)
    queue.complete("parse", fetched)
    assert not queue.settle_deferred("parse", message.sequence_number)  # gone
