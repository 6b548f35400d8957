"""On SQLite the run store opens its transactions itself, on its thread's own
connection (``BEGIN IMMEDIATE`` for a write, ``BEGIN`` for a read, on the driver's
connection): a write transaction holds the file's write lock from its first statement,
so a writer of another process waits, and a read transaction sees one snapshot. A
thread's connection lives as long as the thread, or until the store is closed."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import event, text

from engine.adapters.run_store_sql import SqlRunStore
from engine.language.definitions import TaskStatus
from engine.ports.run_store import TaskRecord, TaskUpdate

T = TypeVar("T")


def _another_connection(path: Path) -> sqlite3.Connection:
    """A connection of its own, as another process has: no busy wait, autocommit."""
    return sqlite3.connect(path, timeout=0, isolation_level=None)


def test_a_write_transaction_holds_the_write_lock_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SqlRunStore(f"sqlite:///{path}")
    other = _another_connection(path)
    try:
        assert not store.engine.dispatch.before_cursor_execute  # the driver-level BEGIN
        with store._begin() as conn:
            conn.execute(text("SELECT 1"))  # a read only: deferred BEGIN would not lock
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # free again once committed
        other.execute("COMMIT")
    finally:
        other.close()
        store.close()


def test_a_read_transaction_sees_one_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SqlRunStore(f"sqlite:///{path}")
    other = _another_connection(path)
    try:
        other.execute("CREATE TABLE t (v INTEGER)")
        other.execute("INSERT INTO t VALUES (1)")
        with store._read() as conn:
            first = conn.execute(text("SELECT COUNT(*) FROM t")).scalar()
            other.execute("INSERT INTO t VALUES (2)")  # another writer commits meanwhile
            second = conn.execute(text("SELECT COUNT(*) FROM t")).scalar()
        assert first == second == 1
        with store._read() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM t")).scalar() == 2
    finally:
        other.close()
        store.close()


def _handles(path: Path) -> int:
    """This process's open file handles on the database file (one per connection)."""
    target = os.path.realpath(path)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            continue  # closed meanwhile
    return count


def _in_a_thread(fn: Callable[[], T]) -> T:
    """``fn()`` on a thread of its own, which has ended when this returns."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def _task(task_id: str) -> TaskRecord:
    return TaskRecord(task_id=task_id, workflow_id="w1", reference_task_name=task_id, task_type="x")


needs_proc = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="counts file handles in /proc"
)


@needs_proc
def test_a_thread_keeps_one_connection_until_it_ends(tmp_path: Path) -> None:
    """(This thread opens none: SQLite keeps the file handle of a connection closed while
    another connection of the process holds a lock on the file.)"""
    path = tmp_path / "runs.db"
    store = SqlRunStore(f"sqlite:///{path}")
    try:
        assert _handles(path) == 0  # the migration's connection is closed

        def use() -> int:
            store.upsert_task(_task("t1"), 1)
            assert store.get_task("t1") is not None
            return _handles(path)

        assert _in_a_thread(use) == 1  # one connection for both transactions
        assert _handles(path) == 0  # closed as its thread ended, the store still open
        assert _in_a_thread(lambda: store.get_task("t1")) is not None
    finally:
        store.close()
    assert _handles(path) == 0


@needs_proc
def test_a_transaction_in_flight_at_close_commits_then_its_connection_closes(
    tmp_path: Path,
) -> None:
    """A batch running in another thread when the store is closed still commits, and its
    connection is closed as it ends; a call after ``close`` works and keeps nothing
    open."""
    path = tmp_path / "runs.db"
    store = SqlRunStore(f"sqlite:///{path}")
    inside, go_on = threading.Event(), threading.Event()

    def batch() -> None:
        with store.batch():
            store.upsert_task(_task("t1"), 1)
            inside.set()
            go_on.wait()
            store.update_task("t1", 1, TaskUpdate(status=TaskStatus.IN_PROGRESS), 2)

    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(batch)
        inside.wait()
        store.close()
        assert _handles(path) == 1  # the batch's, inside its transaction
        go_on.set()
        done.result()
        assert _handles(path) == 0  # closed as the batch ended, its thread still alive
    row = store.get_task("t1")  # after close: on a connection of its own, closed after
    assert row is not None and row.status == TaskStatus.IN_PROGRESS
    assert _handles(path) == 0


def test_a_read_inside_a_write_of_the_same_thread_reads_the_last_commit(
    tmp_path: Path,
) -> None:
    """The thread's connection is in the write transaction: the read runs on a
    connection of its own, which sees what was committed, not the write in progress."""
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        store.upsert_task(_task("t1"), 1)
        with store._begin() as conn:
            conn.execute(text("DELETE FROM tasks WHERE task_id = 't1'"))
            assert store.get_task("t1") is not None
        assert store.get_task("t1") is None
    finally:
        store.close()


def test_a_statement_of_sqlalchemy_in_a_transaction_commits_or_rolls_back_with_it(
    tmp_path: Path,
) -> None:
    """A Core statement makes SQLAlchemy begin a transaction of its own on the thread's
    connection (no second BEGIN); it ends with the store's, and the next transaction
    on that connection begins as usual."""
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement.split()[0] + (" IMMEDIATE" if "IMMEDIATE" in statement else ""))

    try:
        with store._begin() as conn:  # the thread's connection exists before the listener
            conn.execute(text("CREATE TABLE t (v INTEGER)"))
        event.listen(store.engine, "before_cursor_execute", record)
        with pytest.raises(RuntimeError), store._begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (1)"))
            raise RuntimeError("boom")
        with store._begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (2)"))
        with store._read() as conn:
            assert conn.execute(text("SELECT v FROM t")).scalars().all() == [2]
        assert seen == ["BEGIN IMMEDIATE", "INSERT", "BEGIN IMMEDIATE", "INSERT", "BEGIN", "SELECT"]
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
        store.close()


@pytest.mark.parametrize(("query", "busy_ms"), [("", 30_000), ("?timeout=0.25", 250)])
def test_the_busy_timeout_is_the_urls_timeout(tmp_path: Path, query: str, busy_ms: int) -> None:
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}{query}")
    try:
        with store._read() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == busy_ms
    finally:
        store.close()
