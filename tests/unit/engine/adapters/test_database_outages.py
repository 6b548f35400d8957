"""Which database errors are outages (engine/adapters/database_outages.py), on errors the
real drivers raise: SQLite in process, psycopg against a port where nothing listens,
and, when STEPWAY_TEST_POSTGRES_URL is set, errors of a real PostgreSQL server."""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from engine.adapters import run_store_sql
from engine.adapters.database_outages import Outage, outage_of
from engine.ports.run_store import NewRun, RunStatus, RunStoreUnavailable, RunUpdate
from tests.postgres_schemas import fresh_schema

PG_URL = os.environ.get("STEPWAY_TEST_POSTGRES_URL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raised(call: Callable[[], object]) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "x.db"
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
    con.close()
    yield path


@pytest.fixture
def locked(db: Path) -> Iterator[Path]:
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        yield db
    finally:
        lock.execute("COMMIT")
        lock.close()


# --- SQLite ------------------------------------------------------------------------


def test_a_sqlite_file_locked_past_the_busy_timeout_is_an_outage(locked: Path) -> None:
    con = sqlite3.connect(locked, isolation_level=None, timeout=0)
    error = raised(lambda: con.execute("BEGIN IMMEDIATE"))
    outage = outage_of(error)
    assert outage == Outage("database is locked", "sqlite3.OperationalError SQLITE_BUSY", error)


def test_the_same_through_sqlalchemy_names_the_driver_error_as_its_cause(locked: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{locked}", connect_args={"timeout": 0})
    try:
        with engine.connect() as conn:
            statement = sa.text("INSERT INTO t VALUES (:k, :v)")
            error = raised(lambda: conn.execute(statement, {"k": "a", "v": "card 4111"}))
    finally:
        engine.dispose()
    assert isinstance(error, sa.exc.OperationalError) and "4111" in str(error)
    outage = outage_of(error)
    assert outage is not None and outage.reason == "database is locked"
    assert outage.cause is error.orig and "4111" not in str(outage.cause)


def test_a_sqlite_file_that_cannot_be_opened_is_an_outage(tmp_path: Path) -> None:
    error = raised(lambda: sqlite3.connect(tmp_path / "missing" / "x.db"))
    outage = outage_of(error)
    assert outage is not None and outage.reason == "cannot open the database file"


def test_sql_and_constraint_errors_of_sqlite_are_no_outage(db: Path) -> None:
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("INSERT INTO t VALUES ('a', 'b')")
    for call in (
        lambda: con.execute("SELEC 1"),
        lambda: con.execute("SELECT * FROM no_such_table"),
        lambda: con.execute("INSERT INTO t VALUES ('a', 'b')"),
        lambda: con.execute("INSERT INTO t VALUES ('c', NULL)"),
    ):
        error = raised(call)
        assert isinstance(error, sqlite3.Error)
        assert outage_of(error) is None, error
    con.close()


def test_no_free_connection_in_the_pool_is_an_outage(db: Path) -> None:
    engine = sa.create_engine(
        f"sqlite:///{db}",
        poolclass=sa.pool.QueuePool,
        pool_size=1,
        max_overflow=0,
        pool_timeout=0.05,
    )
    try:
        with engine.connect():
            error = raised(engine.connect)
    finally:
        engine.dispose()
    assert isinstance(error, sa.exc.TimeoutError)
    outage = outage_of(error)
    assert outage is not None and outage.reason == "no connection to the database was free in time"


def test_other_errors_are_no_outage() -> None:
    assert outage_of(ValueError("database is locked")) is None
    assert outage_of(OSError("connection refused")) is None


# --- PostgreSQL ------------------------------------------------------------------------


def test_a_postgresql_server_that_refuses_connections_is_an_outage() -> None:
    url = f"postgresql+psycopg://stepway:hunter2@127.0.0.1:{free_port()}/stepway"
    engine = sa.create_engine(url)
    try:
        error = raised(engine.connect)
    finally:
        engine.dispose()
    outage = outage_of(error)
    assert outage is not None and outage.reason == "cannot connect to the database"
    assert outage.detail == "psycopg.OperationalError (no SQLSTATE)"
    assert isinstance(outage.cause, psycopg.OperationalError)
    assert "hunter2" not in outage.reason + outage.detail


def test_a_postgresql_server_that_never_answers_is_an_outage_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that accepts the TCP connection and stays silent (a stuck server, a proxy
    whose backend is gone): the run store's call fails as unavailable once the connect
    timeout is over, instead of holding its thread for good."""
    monkeypatch.setattr(run_store_sql, "PG_CONNECT_TIMEOUT_SECONDS", 1)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes handshakes; nothing is ever said
        port = silent.getsockname()[1]
        store = run_store_sql.SqlRunStore(
            f"postgresql+psycopg://stepway@127.0.0.1:{port}/stepway", migrate=False
        )
        outcome: list[BaseException | None] = []

        def read() -> None:
            try:
                store.get_run("any")
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        try:
            began = time.monotonic()
            reader.start()
            reader.join(30)  # libpq's own default is to wait without end
            waited = time.monotonic() - began
            assert outcome, f"the read still waits after {waited:.0f} s"
        finally:
            store.close()
    [error] = outcome
    assert isinstance(error, RunStoreUnavailable), error
    assert error.reason == "cannot connect to the database"


postgres = pytest.mark.skipif(not PG_URL, reason="needs STEPWAY_TEST_POSTGRES_URL")


@pytest.fixture
def pg() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    assert PG_URL
    url = make_url(PG_URL).set(drivername="postgresql").render_as_string(hide_password=False)
    con = psycopg.connect(url, autocommit=True)
    try:
        yield con
    finally:
        con.close()


@postgres
@pytest.mark.postgres
def test_server_errors_of_postgresql_that_are_outages(
    pg: psycopg.Connection[tuple[object, ...]],
) -> None:
    url = make_url(PG_URL or "").set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as other:
        pg.execute("SET statement_timeout = 50")
        timed_out = raised(lambda: pg.execute("SELECT pg_sleep(1)"))
        pg.execute("RESET statement_timeout")
        other.execute("SELECT pg_terminate_backend(%s)", (pg.info.backend_pid,))
        terminated = raised(lambda: pg.execute("SELECT 1"))
    reasons = {
        type(e).__name__: getattr(outage_of(e), "reason", None) for e in (timed_out, terminated)
    }
    assert reasons == {
        "QueryCanceled": "a statement was cancelled (statement timeout)",
        "AdminShutdown": "the database is shutting down",
    }


@postgres
@pytest.mark.postgres
def test_server_errors_of_postgresql_that_are_no_outage(
    pg: psycopg.Connection[tuple[object, ...]],
) -> None:
    pg.execute("CREATE TEMPORARY TABLE u (k int PRIMARY KEY)")
    pg.execute("INSERT INTO u VALUES (1)")
    for sql in (
        "INSERT INTO u VALUES (1)",  # unique violation
        "SELECT * FROM no_such_table",
        "SELECT 1/0",
        "SELECT repeat('x', 1100000000)",  # program limit exceeded: an OperationalError
    ):
        error = raised(lambda sql=sql: pg.execute(sql))
        assert isinstance(error, psycopg.Error)
        assert outage_of(error) is None, (sql, type(error).__name__)


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A run store URL of a fresh schema of the test server (dropped afterwards)."""
    assert PG_URL
    with fresh_schema(PG_URL) as url:
        yield url.render_as_string(hide_password=False)


def _update_while_another_session_holds_the_row(url: str, schema_url: str) -> BaseException | None:
    """Update run ``w1`` of a store of ``url`` while another session (of
    ``schema_url``) holds its row lock in an open transaction; the update's outcome
    (None: it went through). Fails the test when the update still waits after 30 s
    (PostgreSQL's own default is to wait without end)."""
    store = run_store_sql.SqlRunStore(url)
    try:
        store.create_run(NewRun(workflow_id="w1", name="wf", version=1, create_time=1))
        plain = (
            make_url(schema_url).set(drivername="postgresql").render_as_string(hide_password=False)
        )
        with psycopg.connect(plain) as other:  # a transaction left open elsewhere
            other.execute("SELECT 1 FROM runs WHERE workflow_id = 'w1' FOR UPDATE")
            outcome: list[BaseException | None] = []

            def update() -> None:
                try:
                    store.update_run("w1", RunUpdate(status=RunStatus.PAUSED), 2)
                    outcome.append(None)
                except BaseException as exc:
                    outcome.append(exc)

            writer = threading.Thread(target=update, daemon=True)
            writer.start()
            writer.join(30)
            assert outcome, "the update still waits for the lock after 30 s"
            other.rollback()
        # the lock is gone: the same update goes through
        assert store.update_run("w1", RunUpdate(status=RunStatus.PAUSED), 3)
        run = store.get_run("w1")
        assert run is not None and run.status == RunStatus.PAUSED
        return outcome[0]
    finally:
        store.close()


@postgres
@pytest.mark.postgres
@pytest.mark.parametrize(
    ("default_seconds", "url_option"),
    [(0.5, ""), (3600, " -clock_timeout=300ms")],
    ids=["the store's default", "the URL's lock_timeout over the default"],
)
def test_a_postgresql_call_waiting_for_a_lock_is_an_outage_after_the_lock_timeout(
    pg_schema_url: str, monkeypatch: pytest.MonkeyPatch, default_seconds: float, url_option: str
) -> None:
    monkeypatch.setattr(run_store_sql, "PG_LOCK_TIMEOUT_SECONDS", default_seconds)
    url = make_url(pg_schema_url)
    options = f"{url.query['options']}{url_option}"
    error = _update_while_another_session_holds_the_row(
        url.update_query_dict({"options": options}).render_as_string(hide_password=False),
        pg_schema_url,
    )
    assert isinstance(error, RunStoreUnavailable), error
    assert error.reason == "a lock of the database was not available in time"
