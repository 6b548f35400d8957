"""SQLite task queue with Service Bus semantics (the embedded default).

One SQLite file holds every queue. Safe for many threads and several processes
on the same file:

* WAL journal; every mutating call is ONE ``BEGIN IMMEDIATE`` transaction, so the
  select-then-lock of a receive is atomic across processes and two receivers
  never lock the same message. Inside one process the writers of a file are also
  serialised by a ``threading.Lock`` so threads queue up cheaply instead of
  spinning in SQLite's busy handler; other processes' writers are waited for with
  short sleeps up to ``busy_timeout_seconds`` (``engine/adapters/sqlite_busy.py``).
* A file locked past the busy timeout or that cannot be opened raises the port's
  ``QueueUnavailable`` (``SqliteDatabase.write`` and ``read``, where every statement runs).
* A receive is an index range scan on ``(queue, state, visible_at)``: O(log n + k).
  A locked message keeps ``state = active`` with ``visible_at = locked_until``, so
  an expired lock makes it receivable again without any sweeper; the redelivery
  then increments ``delivery_count`` (and dead-letters at ``max_delivery_count``).
* A receive first reads whether a message is due; only then does it take the write
  lock, so idle receivers do not queue up on it.
* ``batch()`` holds one such transaction, begun at the first write, for the calls of
  a thread (the Task API's grouped hand-offs, ``control_plane/services/write_groups.py``);
  each call inside it is a savepoint, so a call that fails undoes only its own writes,
  and the wake-ups of its sends wait for its commit.
* ``receive(max_wait_seconds=...)`` long-polls: it waits until a send in this
  process to one of its queues wakes it (one waiter per message, the longest
  waiting, so that a message does not wake every idle receiver of the process), or
  until the next due time (scheduled message, lock expiry). A send in another process
  rings this process's doorbell (``engine/adapters/queue_doorbell.py``: a loopback
  datagram), which wakes it the same way; short, growing re-reads (20 ms up to 250 ms)
  remain the fallback for a ring that is lost.

Dead-lettered messages move to the queue ``<q>/$deadletterqueue`` (same table),
keeping their sequence number. Sequence numbers are unique per file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from engine.adapters.database_outages import outage_of
from engine.adapters.queue_doorbell import SCHEMA as DOORBELL_SCHEMA
from engine.adapters.queue_doorbell import Doorbell
from engine.adapters.sqlite_busy import BusyWait
from engine.ports.queue import (
    REASON_MAX_DELIVERY,
    REASON_TTL_EXPIRED,
    MessageLockLost,
    MessageNotFound,
    MessageRef,
    QueueDepth,
    QueueError,
    QueueMessage,
    QueueNotFound,
    QueueSettings,
    QueueUnavailable,
    base_queue_name,
    dead_letter_queue_name,
    encode_body,
    is_dead_letter_queue,
    lock_token_of,
    requeue_message_id,
)

ACTIVE = 0
DEFERRED = 1

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS sbq_queues (
    name        TEXT PRIMARY KEY,
    settings    TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sbq_messages (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    queue           TEXT NOT NULL,
    state           INTEGER NOT NULL,
    visible_at      REAL NOT NULL,
    message_id      TEXT NOT NULL,
    body            BLOB NOT NULL,
    content_type    TEXT,
    enqueued_at     REAL NOT NULL,
    scheduled_at    REAL,
    expires_at      REAL,
    delivery_count  INTEGER NOT NULL DEFAULT 0,
    lock_token      TEXT,
    locked_until    REAL,
    dl_reason       TEXT,
    dl_description  TEXT
);
CREATE INDEX IF NOT EXISTS sbq_messages_ready ON sbq_messages (queue, state, visible_at);
CREATE UNIQUE INDEX IF NOT EXISTS sbq_messages_lock ON sbq_messages (lock_token)
    WHERE lock_token IS NOT NULL;
CREATE TABLE IF NOT EXISTS sbq_dedup (
    queue       TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    expires_at  REAL NOT NULL,
    PRIMARY KEY (queue, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sbq_dedup_expiry ON sbq_dedup (expires_at);
"""
    + DOORBELL_SCHEMA
)

_COLUMNS = (
    "seq, queue, state, visible_at, message_id, body, content_type, enqueued_at, "
    "scheduled_at, expires_at, delivery_count, lock_token, locked_until, dl_reason, dl_description"
)

_POLL_MIN = 0.02
_POLL_MAX = 0.25


class _FileShared:
    """Per-file, per-process state shared by every adapter instance on that file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.write_lock = threading.Lock()
        #: receivers waiting, by queue, in the order they began to wait
        self.waiting: dict[str, list[threading.Event]] = {}
        self.waiting_lock = threading.Lock()
        self.schema_ready = False
        #: open :class:`SqliteDatabase` objects on the file in this process
        self.users = 0
        self.doorbell = self._new_doorbell()

    def _new_doorbell(self) -> Doorbell:
        return Doorbell(self.path, self.wake, write_lock=self.write_lock)

    def opened(self) -> None:
        with self.waiting_lock:
            self.users += 1

    def closed(self) -> None:
        """The last user of the file in this process stops listening to the doorbell."""
        with self.waiting_lock:
            self.users -= 1
            if self.users > 0:
                return
            doorbell, self.doorbell = self.doorbell, self._new_doorbell()
        doorbell.close()

    def wait(self, queues: list[str], timeout: float) -> None:
        """Wait up to ``timeout`` for a ``wake`` of one of ``queues`` (a send of this
        process, or of another that rang the doorbell)."""
        self.doorbell.listen()
        event = threading.Event()
        with self.waiting_lock:
            for queue in queues:
                self.waiting.setdefault(queue, []).append(event)
        try:
            event.wait(timeout)
        finally:
            with self.waiting_lock:
                for queue in queues:
                    waiters = self.waiting.get(queue)
                    if waiters is not None:
                        if event in waiters:
                            waiters.remove(event)
                        if not waiters:
                            del self.waiting[queue]

    def wake(self, queue: str | None) -> None:
        """Wake the longest-waiting receiver of ``queue`` not woken yet (a message
        arrived or came back); every receiver when ``queue`` is None."""
        with self.waiting_lock:
            if queue is None:
                for waiters in self.waiting.values():
                    for event in waiters:
                        event.set()
                return
            for event in self.waiting.get(queue, ()):
                if not event.is_set():
                    event.set()
                    return


_registry_lock = threading.Lock()
_registry: dict[str, _FileShared] = {}


def _shared_for(path: str) -> _FileShared:
    key = os.path.realpath(path)
    with _registry_lock:
        shared = _registry.get(key)
        if shared is None:
            shared = _registry[key] = _FileShared(key)
        return shared


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _epoch(value: datetime) -> float:
    if value.tzinfo is None:
        raise ValueError("scheduled_enqueue_time must be timezone-aware")
    return value.timestamp()


def settings_to_json(settings: QueueSettings) -> str:
    return json.dumps(asdict(settings), sort_keys=True)


@functools.lru_cache(maxsize=1024)
def settings_from_json(text: str) -> QueueSettings:
    """The settings stored as ``text``: one frozen value per distinct text, so that the
    receive path, which reads a queue's settings in every transaction, does not decode
    the same JSON each time (5 % of the Task API's CPU in ``bench.profile_handoffs``)."""
    data: dict[str, Any] = json.loads(text)
    known = set(QueueSettings.__dataclass_fields__)
    return QueueSettings(**{k: v for k, v in data.items() if k in known})


def _raise_if_outage(exc: sqlite3.Error) -> None:
    """Raise :class:`QueueUnavailable` when ``exc`` is an outage of the database
    (``engine/adapters/database_outages.py``); else return and the caller re-raises."""
    outage = outage_of(exc)
    if outage is not None:
        raise QueueUnavailable(outage.reason, outage.detail) from exc


class _Batch:
    """A thread's batch (``SqliteDatabase.batch``)."""

    __slots__ = ("open", "wakes")

    def __init__(self) -> None:
        #: its transaction has begun (and the file's write lock of this process is held)
        self.open = False
        #: the queues whose receivers to wake once it commits
        self.wakes: list[str | None] = []


class SqliteDatabase:
    """Connections to one queue database file: one per thread, WAL mode."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_seconds: float = 5.0) -> None:
        self.path = os.fspath(path)
        self.busy_timeout_seconds = busy_timeout_seconds
        self.shared = _shared_for(self.path)
        self.shared.opened()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._closed = False
        self._ensure_schema()

    def connection(self) -> sqlite3.Connection:
        if self._closed:
            raise QueueError("queue database is closed")
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_seconds,
                isolation_level=None,
                check_same_thread=False,
            )
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_seconds * 1000)}")
            self._local.con = con
            self._local.busy = BusyWait(con, int(self.busy_timeout_seconds * 1000))
            with self._all_lock:
                self._all.append(con)
        return con

    def _ensure_schema(self) -> None:
        if self.shared.schema_ready:
            return
        with self.write() as con:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
        self.shared.schema_ready = True

    def _batch(self) -> _Batch | None:
        """This thread's batch; None outside one."""
        state: _Batch | None = getattr(self._local, "batch", None)
        return state

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction for this thread's calls in the block, committed at its
        end: it begins with the block's first write (``BEGIN IMMEDIATE``, the file's
        write lock), so a block that only reads takes no lock; from then on ``read``
        and ``read_row`` use it too. The receivers its writes would wake are woken after
        the commit. A batch inside a batch is part of it."""
        if self._batch() is not None:
            yield
            return
        state = _Batch()
        self._local.batch = state
        try:
            yield
            if state.open:
                self._end_batch(state, "COMMIT")
        except BaseException:
            if state.open:
                with contextlib.suppress(Exception):  # what the block raised is the error
                    self._end_batch(state, "ROLLBACK")
            raise
        finally:
            self._local.batch = None
        for queue in dict.fromkeys(state.wakes):
            self.notify(queue)

    def _begin_batch(self, state: _Batch) -> sqlite3.Connection:
        """The batch's transaction, begun at its first write."""
        con = self.connection()
        if not state.open:
            self.shared.write_lock.acquire()
            try:
                self._local.busy.retrying(lambda: con.execute("BEGIN IMMEDIATE"))
            except BaseException as exc:
                self.shared.write_lock.release()
                if isinstance(exc, sqlite3.Error):
                    _raise_if_outage(exc)
                raise
            state.open = True
        return con

    def _end_batch(self, state: _Batch, statement: str) -> None:
        con: sqlite3.Connection = self._local.con
        try:
            con.execute(statement)
        except sqlite3.Error as exc:
            if statement == "COMMIT":
                with contextlib.suppress(sqlite3.Error):
                    con.execute("ROLLBACK")
            _raise_if_outage(exc)
            raise
        finally:
            state.open = False
            self.shared.write_lock.release()

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (the file's write lock), or in this
        thread's batch a savepoint of it, undone alone when the block raises. An outage
        of the file (locked past the busy timeout, unreadable) raises
        :class:`QueueUnavailable`."""
        state = self._batch()
        try:
            if state is not None:
                con = self._begin_batch(state)
                con.execute("SAVEPOINT queue_call")
                undo = ("ROLLBACK TO queue_call", "RELEASE queue_call")
                with _kept_or_undone(con, "RELEASE queue_call", undo):
                    yield con
                return
            con = self.connection()
            with self.shared.write_lock:
                self._local.busy.retrying(lambda: con.execute("BEGIN IMMEDIATE"))
                with _kept_or_undone(con, "COMMIT", ("ROLLBACK",)):
                    yield con
        except sqlite3.Error as exc:
            _raise_if_outage(exc)
            raise

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot; never blocks writers). An outage
        of the file raises :class:`QueueUnavailable`."""
        state = self._batch()
        if state is not None and state.open:  # the batch's snapshot, with its writes
            try:
                yield self._local.con
            except sqlite3.Error as exc:
                _raise_if_outage(exc)
                raise
            return
        try:
            con = self.connection()
            self._local.busy.before_read()
            con.execute("BEGIN")
            try:
                yield con
            finally:
                con.execute("COMMIT")
        except sqlite3.Error as exc:
            _raise_if_outage(exc)
            raise

    def read_row(self, sql: str, args: Sequence[Any]) -> Any:
        """The first row of one statement, its own read transaction (no BEGIN/COMMIT
        round trips: the statement alone is a consistent snapshot). An outage of the
        file raises :class:`QueueUnavailable`."""
        try:
            con = self.connection()
            state = self._batch()
            if state is not None and state.open:
                return con.execute(sql, args).fetchone()
            return self._local.busy.retrying(lambda: con.execute(sql, args).fetchone())
        except sqlite3.Error as exc:
            _raise_if_outage(exc)
            raise

    def notify(self, queue: str | None = None) -> None:
        """A message of ``queue`` can be received (None: of any queue): wakes a receiver
        of this process and rings the other processes' doorbells (inside a batch: once
        it committed)."""
        state = self._batch()
        if state is not None:
            state.wakes.append(queue)
            return
        self.shared.wake(queue)
        self.shared.doorbell.ring(queue)

    def close(self) -> None:
        if not self._closed:
            self.shared.closed()
        self._closed = True
        with self._all_lock:
            for con in self._all:
                with contextlib.suppress(sqlite3.Error):
                    con.close()
            self._all.clear()


@contextlib.contextmanager
def _kept_or_undone(con: sqlite3.Connection, keep: str, undo: tuple[str, ...]) -> Iterator[None]:
    """The block's statements kept with ``keep``, or undone with ``undo`` when it raises."""
    try:
        yield
    except BaseException:
        for statement in undo:
            con.execute(statement)
        raise
    con.execute(keep)


def _check_queues(con: sqlite3.Connection, queues: list[str]) -> None:
    """Raise :class:`QueueNotFound` for the first of ``queues`` that does not exist."""
    bases = [base_queue_name(q) for q in queues]
    found = {
        row[0]
        for row in con.execute(
            f"SELECT name FROM sbq_queues WHERE name IN ({','.join('?' * len(bases))})", bases
        )
    }
    for queue, base in zip(queues, bases, strict=True):
        if base not in found:
            raise QueueNotFound(queue)


def _min_visible(con: sqlite3.Connection, queues: list[str]) -> float | None:
    """The earliest ``visible_at`` of the active messages of ``queues`` (one scalar
    query per queue, each an index lookup of its minimum)."""
    sql = " UNION ALL ".join(
        ["SELECT MIN(visible_at) FROM sbq_messages WHERE queue = ? AND state = ?"] * len(queues)
    )
    args: list[Any] = []
    for queue in queues:
        args += [queue, ACTIVE]
    found = [row[0] for row in con.execute(sql, args).fetchall() if row[0] is not None]
    return float(min(found)) if found else None


def load_settings(con: sqlite3.Connection, queue: str) -> QueueSettings:
    row = con.execute(
        "SELECT settings FROM sbq_queues WHERE name = ?", (base_queue_name(queue),)
    ).fetchone()
    if row is None:
        raise QueueNotFound(queue)
    return settings_from_json(row[0])


class SqliteTaskQueue:
    """:class:`engine.ports.queue.TaskQueue` on a SQLite file.

    Queues must be created first with
    :class:`engine.adapters.queue_provisioning_sqlite.SqliteQueueProvisioner`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_seconds: float = 5.0,
        clock: Any = time.time,
        idle_poll_seconds: tuple[float, float] = (_POLL_MIN, _POLL_MAX),
    ) -> None:
        self._db = SqliteDatabase(path, busy_timeout_seconds)
        self._clock = clock
        #: a long poll that nothing wakes re-reads after the first of these, doubling the
        #: sleep up to the second
        self._poll_min, self._poll_max = idle_poll_seconds

    @property
    def database(self) -> SqliteDatabase:
        return self._db

    # -- sending -----------------------------------------------------------

    def send(
        self,
        queue: str,
        body: bytes | Mapping[str, Any],
        message_id: str,
        scheduled_enqueue_time: datetime | None = None,
    ) -> None:
        if is_dead_letter_queue(queue):
            raise QueueError(f"cannot send to a dead-letter queue: {queue!r}")
        if not message_id:
            raise ValueError("message_id is required")
        content_type = (
            None if isinstance(body, bytes | bytearray | memoryview) else "application/json"
        )
        data = encode_body(body)
        scheduled = None if scheduled_enqueue_time is None else _epoch(scheduled_enqueue_time)
        with self._db.write() as con:
            now = self._clock()
            settings = load_settings(con, queue)
            if not self._record_message_id(con, queue, message_id, settings, now):
                return
            self._insert(con, queue, message_id, data, content_type, settings, now, scheduled)
        self._db.notify(queue)

    def _record_message_id(
        self,
        con: sqlite3.Connection,
        queue: str,
        message_id: str,
        settings: QueueSettings,
        now: float,
    ) -> bool:
        """Duplicate detection. False when the id was seen within the window."""
        if not settings.requires_duplicate_detection:
            return True
        row = con.execute(
            "SELECT expires_at FROM sbq_dedup WHERE queue = ? AND message_id = ?",
            (queue, message_id),
        ).fetchone()
        if row is not None and row[0] > now:
            return False
        con.execute(
            "INSERT OR REPLACE INTO sbq_dedup (queue, message_id, expires_at) VALUES (?, ?, ?)",
            (queue, message_id, now + settings.duplicate_detection_window_seconds),
        )
        # Prune a bounded number of expired entries per send (index on expires_at).
        con.execute(
            "DELETE FROM sbq_dedup WHERE (queue, message_id) IN (SELECT queue, message_id "
            "FROM sbq_dedup WHERE expires_at <= ? LIMIT 16)",
            (now,),
        )
        return True

    def _insert(
        self,
        con: sqlite3.Connection,
        queue: str,
        message_id: str,
        data: bytes,
        content_type: str | None,
        settings: QueueSettings,
        now: float,
        scheduled: float | None,
    ) -> None:
        ttl = settings.default_message_ttl_seconds
        con.execute(
            "INSERT INTO sbq_messages (queue, state, visible_at, message_id, body, content_type, "
            "enqueued_at, scheduled_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                queue,
                ACTIVE,
                max(now, scheduled) if scheduled is not None else now,
                message_id,
                data,
                content_type,
                now,
                scheduled,
                None if ttl is None else max(now, scheduled or now) + ttl,
            ),
        )

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return self._db.batch()

    # -- receiving ---------------------------------------------------------

    def receive(
        self,
        queue: str,
        max_messages: int = 1,
        max_wait_seconds: float = 0.0,
        lock_seconds: float | None = None,
    ) -> list[QueueMessage]:
        return self.receive_first([queue], max_messages, max_wait_seconds, lock_seconds)

    def receive_first(
        self,
        queues: Sequence[str],
        max_messages: int = 1,
        max_wait_seconds: float = 0.0,
        lock_seconds: float | None = None,
    ) -> list[QueueMessage]:
        if max_messages < 1:
            raise ValueError("max_messages must be >= 1")
        names = list(dict.fromkeys(queues))
        if not names:
            raise ValueError("no queue to receive from")
        deadline = time.monotonic() + max(0.0, max_wait_seconds)
        poll = self._poll_min
        while True:
            messages, next_due = self._receive_once(names, max_messages, lock_seconds)
            if messages:
                return messages
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            wait = min(remaining, poll)
            if next_due is not None:
                wait = min(wait, max(0.0, next_due - self._clock()) + 0.001)
            self._db.shared.wait(names, wait)
            poll = min(poll * 2, self._poll_max)

    def _next_due(self, queues: list[str]) -> list[float | None]:
        """When the next message of each of ``queues`` is receivable (None: no
        message), read in one statement without taking the write lock: an empty
        receive, the common case of an idle long poll, costs a read. (One scalar
        subquery per queue, so that each is an index lookup of its minimum, and the
        count of the queues that exist; a single statement is its own read
        transaction.)"""
        bases = list(dict.fromkeys(base_queue_name(q) for q in queues))
        sql = "SELECT (SELECT COUNT(*) FROM sbq_queues WHERE name IN ({})){}".format(
            ",".join("?" * len(bases)),
            "".join(
                ", (SELECT MIN(visible_at) FROM sbq_messages WHERE queue = ? AND state = ?)"
                for _ in queues
            ),
        )
        args: list[Any] = list(bases)
        for queue in queues:
            args += [queue, ACTIVE]
        found, *due = self._db.read_row(sql, args)
        if found < len(bases):
            with self._db.read() as con:
                _check_queues(con, queues)  # raises QueueNotFound naming the first missing
        return [None if d is None else float(d) for d in due]

    def _receive_once(
        self, queues: list[str], max_messages: int, lock_seconds: float | None
    ) -> tuple[list[QueueMessage], float | None]:
        dues = self._next_due(queues)
        known = [d for d in dues if d is not None]
        due = min(known) if known else None
        if due is None or due > self._clock():
            return [], due
        out: list[QueueMessage] = []
        dead_lettered = False
        with self._db.write() as con:
            now = self._clock()
            for queue, queue_due in zip(queues, dues, strict=True):
                if len(out) >= max_messages:
                    break
                if queue_due is None:
                    # nothing was there a moment ago: a message sent since is for the
                    # next receive (as one sent just after this one would be)
                    continue
                dead_lettered |= self._lock_ready(
                    con, queue, max_messages - len(out), lock_seconds, now, out
                )
            next_due = None if out else _min_visible(con, queues)
        if dead_lettered:
            self._db.notify()
        return out, next_due

    def _lock_ready(
        self,
        con: sqlite3.Connection,
        queue: str,
        max_messages: int,
        lock_seconds: float | None,
        now: float,
        out: list[QueueMessage],
    ) -> bool:
        """Lock up to ``max_messages`` receivable messages of ``queue`` into ``out``;
        True when one was dead-lettered on the way."""
        settings = load_settings(con, queue)
        lock_for = settings.lock_duration_seconds if lock_seconds is None else lock_seconds
        dlq = is_dead_letter_queue(queue)
        dead_lettered = False
        wanted = len(out) + max_messages
        while len(out) < wanted:
            rows = con.execute(
                f"SELECT {_COLUMNS} FROM sbq_messages INDEXED BY sbq_messages_ready "
                "WHERE queue = ? AND state = ? AND visible_at <= ? "
                "ORDER BY visible_at LIMIT ?",
                (queue, ACTIVE, now, wanted - len(out)),
            ).fetchall()
            if not rows:
                break
            for row in rows:
                seq, delivery_count, lock_token = row[0], row[10], row[11]
                if lock_token is not None:
                    delivery_count += 1  # the previous lock expired unsettled
                if not dlq and self._expired_or_exhausted(
                    con, queue, row, delivery_count, settings, now
                ):
                    dead_lettered = True
                    continue
                token = str(uuid.uuid4())
                until = now + lock_for
                con.execute(
                    "UPDATE sbq_messages SET lock_token = ?, locked_until = ?, "
                    "visible_at = ?, delivery_count = ? WHERE seq = ?",
                    (token, until, until, delivery_count, seq),
                )
                out.append(self._message(row, delivery_count, token, until))
        return dead_lettered

    def _expired_or_exhausted(
        self,
        con: sqlite3.Connection,
        queue: str,
        row: Sequence[Any],
        delivery_count: int,
        settings: QueueSettings,
        now: float,
    ) -> bool:
        """Dead-letter (or drop) a candidate that expired or ran out of deliveries."""
        seq, expires_at = row[0], row[9]
        if expires_at is not None and expires_at <= now:
            if settings.dead_lettering_on_message_expiration:
                self._move_to_dlq(con, queue, seq, delivery_count, REASON_TTL_EXPIRED, "", now)
            else:
                con.execute("DELETE FROM sbq_messages WHERE seq = ?", (seq,))
            return True
        if delivery_count >= settings.max_delivery_count:
            self._move_to_dlq(
                con,
                queue,
                seq,
                delivery_count,
                REASON_MAX_DELIVERY,
                f"Message could not be consumed after {settings.max_delivery_count} "
                "delivery attempts.",
                now,
            )
            return True
        return False

    @staticmethod
    def _move_to_dlq(
        con: sqlite3.Connection,
        queue: str,
        seq: int,
        delivery_count: int,
        reason: str,
        description: str,
        now: float,
    ) -> None:
        con.execute(
            "UPDATE sbq_messages SET queue = ?, state = ?, visible_at = ?, lock_token = NULL, "
            "locked_until = NULL, expires_at = NULL, delivery_count = ?, dl_reason = ?, "
            "dl_description = ? WHERE seq = ?",
            (
                dead_letter_queue_name(base_queue_name(queue)),
                ACTIVE,
                now,
                delivery_count,
                reason,
                description,
                seq,
            ),
        )

    @staticmethod
    def _message(
        row: Sequence[Any],
        delivery_count: int | None = None,
        lock_token: str | None = None,
        locked_until: float | None = None,
    ) -> QueueMessage:
        enqueued = _ts(row[7])
        assert enqueued is not None
        return QueueMessage(
            queue=row[1],
            message_id=row[4],
            body=bytes(row[5]),
            sequence_number=row[0],
            enqueued_time=enqueued,
            delivery_count=row[10] if delivery_count is None else delivery_count,
            lock_token=lock_token,
            locked_until=_ts(locked_until),
            scheduled_enqueue_time=_ts(row[8]),
            dead_letter_reason=row[13],
            dead_letter_description=row[14],
            content_type=row[6],
        )

    # -- deferral ----------------------------------------------------------

    def receive_deferred(self, queue: str, sequence_numbers: Sequence[int]) -> list[QueueMessage]:
        out: list[QueueMessage] = []
        missing: list[int] = []
        with self._db.write() as con:
            now = self._clock()
            settings = load_settings(con, queue)
            for seq in sequence_numbers:
                row = con.execute(
                    f"SELECT {_COLUMNS} FROM sbq_messages "
                    "WHERE seq = ? AND queue = ? AND state = ?",
                    (seq, queue, DEFERRED),
                ).fetchone()
                if row is None:
                    missing.append(seq)
                    continue
                delivery_count, lock_token, locked_until = row[10], row[11], row[12]
                if lock_token is not None:
                    if locked_until > now:
                        missing.append(seq)  # fetched and locked by another caller
                        continue
                    delivery_count += 1
                token = str(uuid.uuid4())
                until = now + settings.lock_duration_seconds
                con.execute(
                    "UPDATE sbq_messages SET lock_token = ?, locked_until = ?, delivery_count = ? "
                    "WHERE seq = ?",
                    (token, until, delivery_count, seq),
                )
                out.append(self._message(row, delivery_count, token, until))
            if missing:
                # Roll back: nothing is locked when a sequence number is not available.
                raise MessageNotFound(queue, missing)
        return out

    def settle_deferred(
        self,
        queue: str,
        sequence_number: int,
        dead_letter_reason: str | None = None,
        description: str = "",
    ) -> bool:
        if dead_letter_reason is not None and is_dead_letter_queue(queue):
            raise QueueError("a dead-letter queue message cannot be dead-lettered again")
        with self._db.write() as con:
            now = self._clock()
            if dead_letter_reason is None:
                # one statement: gone unless fetched and locked by another caller now
                return bool(
                    con.execute(
                        "DELETE FROM sbq_messages WHERE seq = ? AND queue = ? AND state = ? "
                        "AND (lock_token IS NULL OR locked_until <= ?)",
                        (sequence_number, queue, DEFERRED, now),
                    ).rowcount
                )
            row = con.execute(
                "SELECT delivery_count, lock_token, locked_until FROM sbq_messages "
                "WHERE seq = ? AND queue = ? AND state = ?",
                (sequence_number, queue, DEFERRED),
            ).fetchone()
            if row is None:
                return False
            delivery_count, lock_token, locked_until = row
            if lock_token is not None:
                if locked_until > now:
                    return False  # fetched and locked by another caller
                delivery_count += 1
            if dead_letter_reason is None:
                con.execute("DELETE FROM sbq_messages WHERE seq = ?", (sequence_number,))
            else:
                self._move_to_dlq(
                    con,
                    queue,
                    sequence_number,
                    delivery_count,
                    dead_letter_reason,
                    description,
                    now,
                )
        return True

    # -- settlement --------------------------------------------------------

    def _locked_row(self, con: sqlite3.Connection, queue: str, token: str, now: float) -> Any:
        row = con.execute(
            f"SELECT {_COLUMNS} FROM sbq_messages WHERE lock_token = ?", (token,)
        ).fetchone()
        if row is None or row[1] != queue or row[12] is None or row[12] <= now:
            raise MessageLockLost(
                f"lock {token!r} on {queue!r} expired, is unknown, or was already settled"
            )
        return row

    def complete(self, queue: str, message: MessageRef) -> None:
        token = lock_token_of(message)
        with self._db.write() as con:
            row = self._locked_row(con, queue, token, self._clock())
            con.execute("DELETE FROM sbq_messages WHERE seq = ?", (row[0],))

    def abandon(self, queue: str, message: MessageRef) -> None:
        token = lock_token_of(message)
        with self._db.write() as con:
            now = self._clock()
            row = self._locked_row(con, queue, token, now)
            count = row[10] + 1
            if not is_dead_letter_queue(queue):
                settings = load_settings(con, queue)
                if count >= settings.max_delivery_count:
                    self._move_to_dlq(
                        con,
                        queue,
                        row[0],
                        count,
                        REASON_MAX_DELIVERY,
                        f"Message could not be consumed after {settings.max_delivery_count} "
                        "delivery attempts.",
                        now,
                    )
                    return
            con.execute(
                "UPDATE sbq_messages SET lock_token = NULL, locked_until = NULL, visible_at = ?, "
                "delivery_count = ? WHERE seq = ?",
                (now, count, row[0]),
            )
        self._db.notify(queue)

    def defer(self, queue: str, message: MessageRef) -> None:
        token = lock_token_of(message)
        with self._db.write() as con:
            now = self._clock()
            # one statement: the row of the lock, if it holds (as _locked_row checks)
            deferred = con.execute(
                "UPDATE sbq_messages SET state = ?, lock_token = NULL, locked_until = NULL, "
                "visible_at = ? WHERE lock_token = ? AND queue = ? AND locked_until > ?",
                (DEFERRED, now, token, queue, now),
            ).rowcount
        if not deferred:
            raise MessageLockLost(
                f"lock {token!r} on {queue!r} expired, is unknown, or was already settled"
            )

    def dead_letter(
        self,
        queue: str,
        message: MessageRef,
        reason: str,
        description: str = "",
    ) -> None:
        if is_dead_letter_queue(queue):
            raise QueueError("a dead-letter queue message cannot be dead-lettered again")
        token = lock_token_of(message)
        with self._db.write() as con:
            now = self._clock()
            row = self._locked_row(con, queue, token, now)
            self._move_to_dlq(con, queue, row[0], row[10], reason, description, now)

    def requeue(self, queue: str, message: QueueMessage, delay_seconds: float) -> str:
        token = lock_token_of(message)
        new_id = requeue_message_id(message)
        with self._db.write() as con:
            now = self._clock()
            row = self._locked_row(con, queue, token, now)
            settings = load_settings(con, queue)
            if self._record_message_id(con, queue, new_id, settings, now):
                self._insert(
                    con, queue, new_id, bytes(row[5]), row[6], settings, now, now + delay_seconds
                )
            con.execute("DELETE FROM sbq_messages WHERE seq = ?", (row[0],))
        self._db.notify(queue)
        return new_id

    # -- inspection --------------------------------------------------------

    def peek(
        self, queue: str, max_messages: int = 10, from_sequence_number: int = 0
    ) -> list[QueueMessage]:
        with self._db.read() as con:
            load_settings(con, queue)
            rows = con.execute(
                f"SELECT {_COLUMNS} FROM sbq_messages WHERE queue = ? AND seq >= ? "
                "ORDER BY seq LIMIT ?",
                (queue, from_sequence_number, max_messages),
            ).fetchall()
        return [self._message(row) for row in rows]

    def depth(self, queue: str) -> QueueDepth:
        with self._db.read() as con:
            now = self._clock()
            load_settings(con, queue)
            scheduled = con.execute(
                "SELECT COUNT(*) FROM sbq_messages WHERE queue = ? AND state = ? "
                "AND visible_at > ? AND lock_token IS NULL",
                (queue, ACTIVE, now),
            ).fetchone()[0]
            active_all = con.execute(
                "SELECT COUNT(*) FROM sbq_messages WHERE queue = ? AND state = ?",
                (queue, ACTIVE),
            ).fetchone()[0]
            deferred = con.execute(
                "SELECT COUNT(*) FROM sbq_messages WHERE queue = ? AND state = ?",
                (queue, DEFERRED),
            ).fetchone()[0]
            dead = (
                0
                if is_dead_letter_queue(queue)
                else con.execute(
                    "SELECT COUNT(*) FROM sbq_messages WHERE queue = ?",
                    (dead_letter_queue_name(queue),),
                ).fetchone()[0]
            )
        return QueueDepth(
            active=active_all - scheduled,
            scheduled=scheduled,
            deferred=deferred,
            dead_lettered=dead,
        )

    def close(self) -> None:
        self._db.close()
