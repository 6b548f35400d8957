"""Waiting for the write lock of a SQLite file that another process holds
(engine/adapters/sqlite_busy.py): the stores get it once it is free, give up with
SQLite's own "database is locked" after their busy timeout, and keep SQLite's busy
handler for reads. Another process is played by a connection of the test's own (the
stores' in-process lock does not see it, as it does not see another process)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from engine.adapters.database_outages import is_sqlite_busy
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_store_sql import SqlRunStore
from engine.adapters.sqlite_busy import BusyWait
from engine.adapters.sqlite_transactions import BEGIN_WRITE
from engine.ports.queue import QueueUnavailable
from engine.ports.run_store import NewRun, RunStoreUnavailable


def _hold_write_lock(path: Path, seconds: float) -> threading.Thread:
    """Another writer takes ``path``'s write lock now and lets it go after ``seconds``."""
    taken = threading.Event()

    def hold() -> None:
        con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        con.execute("BEGIN IMMEDIATE")
        taken.set()
        time.sleep(seconds)
        con.execute("COMMIT")
        con.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(5)
    return thread


@pytest.fixture
def queue(make_sqlite_queue: Callable[[float], SqliteTaskQueue]) -> SqliteTaskQueue:
    return make_sqlite_queue(5)


def test_a_queue_write_waits_for_another_writer_and_then_goes_through(
    queue: SqliteTaskQueue, tmp_path: Path
) -> None:
    begins: list[str] = []
    queue._db.connection().set_trace_callback(
        lambda sql: begins.append(sql) if sql.startswith("BEGIN IMMEDIATE") else None
    )
    holder = _hold_write_lock(tmp_path / "queues.db", 0.3)
    queue.send("parse", {"n": 1}, message_id="m1")  # waits out the other writer
    holder.join()
    [message] = queue.receive("parse", 5, 0)
    assert message.message_id == "m1"
    # it tried again and again while the lock was held (sleeps of at most 2 ms), where
    # SQLite's busy handler makes one try of the statement that sleeps up to 100 ms at a
    # time inside it
    assert len(begins) >= 10, begins


def test_a_run_store_write_waits_for_another_writer_and_then_goes_through(
    tmp_path: Path,
) -> None:
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    begins: list[str] = []

    @sa.event.listens_for(store._engine, "before_cursor_execute")
    def seen(*args: Any) -> None:
        if args[2] == BEGIN_WRITE:
            begins.append(args[2])

    try:
        store.create_run(NewRun(workflow_id="w0", name="wf", version=1, create_time=1))
        holder = _hold_write_lock(tmp_path / "runs.db", 0.3)
        begins.clear()
        store.create_run(NewRun(workflow_id="w1", name="wf", version=1, create_time=2))
        holder.join()
        run = store.get_run("w1")
        assert run is not None and run.name == "wf"
        # tried again and again while the lock was held, as the queue's writer is
        assert len(begins) >= 10, begins
    finally:
        store.close()


def test_a_writer_gives_up_after_its_busy_timeout_as_sqlite_would(
    tmp_path: Path, make_sqlite_queue: Callable[[float], SqliteTaskQueue]
) -> None:
    path = tmp_path / "queues.db"
    queue = make_sqlite_queue(0.2)
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}?timeout=0.2")
    try:
        store.create_run(NewRun(workflow_id="w0", name="wf", version=1, create_time=1))
        holders = [_hold_write_lock(path, 1.5), _hold_write_lock(tmp_path / "runs.db", 1.5)]
        with pytest.raises(QueueUnavailable) as queue_caught:
            queue.send("parse", {"n": 1}, message_id="m1")
        assert str(queue_caught.value) == "task queue unavailable: database is locked"
        with pytest.raises(RunStoreUnavailable) as store_caught:
            store.create_run(NewRun(workflow_id="w1", name="wf", version=1, create_time=2))
        assert "database is locked" in str(store_caught.value)
        for holder in holders:
            holder.join()
        assert queue.receive("parse", 5, 0) == []  # nothing half-sent
        assert store.get_run("w1") is None
    finally:
        store.close()


def test_reads_keep_sqlites_busy_handler_and_writes_begin_without_it(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    con.execute("PRAGMA busy_timeout = 1234")
    busy = BusyWait(con, 1234)

    def timeout() -> int:
        return int(con.execute("PRAGMA busy_timeout").fetchone()[0])

    busy.retrying(lambda: con.execute("BEGIN IMMEDIATE"))
    assert con.in_transaction and timeout() == 0
    con.execute("COMMIT")
    busy.before_read()
    assert timeout() == 1234
    busy.before_read()
    assert timeout() == 1234


def test_an_error_other_than_a_busy_lock_is_raised_at_once(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    busy = BusyWait(con, 60_000)
    con.execute("BEGIN")
    with pytest.raises(sqlite3.OperationalError) as caught:
        busy.retrying(lambda: con.execute("BEGIN IMMEDIATE"))  # within a transaction
    assert not is_sqlite_busy(caught.value)
    con.execute("COMMIT")
