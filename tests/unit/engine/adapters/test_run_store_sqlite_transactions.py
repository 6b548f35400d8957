"""On SQLite the run store opens its transactions itself (``BEGIN IMMEDIATE`` for a
write, issued on the driver's connection when no statement listener is attached): a
write transaction holds the file's write lock from its first statement, so a writer of
another process waits, and a read transaction sees one snapshot."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from engine.adapters.run_store_sql import SqlRunStore


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
