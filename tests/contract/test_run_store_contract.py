"""Contract suite of the run store port, run against every adapter.

SQLite always; PostgreSQL when STEPWAY_TEST_POSTGRES_URL is set (each test gets
a fresh schema through ``search_path``, dropped afterwards).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from pydantic import ValidationError
from sqlalchemy import event
from sqlalchemy.engine import make_url

from engine.adapters.run_store_sql import MIGRATIONS_DIR, SqlRunStore, metadata
from engine.ports.run_store import (
    MAX_TASK_LOG_ENTRIES,
    TASK_LOGS_DROPPED,
    HandOut,
    KeptStep,
    NewRun,
    PendingStart,
    RunQuery,
    RunStatus,
    RunStore,
    RunStoreRefused,
    RunStoreUnavailable,
    RunUpdate,
    TaskLimits,
    TaskRecord,
    TaskStatus,
    TaskUpdate,
)
from tests.postgres_schemas import fresh_schema

PG_URL = os.environ.get("STEPWAY_TEST_POSTGRES_URL")
THREADS = 8
T0 = 1_700_000_000_000  # epoch ms

T = TypeVar("T")


# --- fixtures -------------------------------------------------------------------


def _pg_param() -> Any:
    return pytest.param(
        "postgresql",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(
                not PG_URL,
                reason="PostgreSQL adapter not tested: set STEPWAY_TEST_POSTGRES_URL "
                "(e.g. postgresql+psycopg://postgres@127.0.0.1:55432/stepway_test)",
            ),
        ],
    )


@pytest.fixture(params=["sqlite", _pg_param()])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    assert PG_URL
    with fresh_schema(PG_URL) as url:
        yield url.render_as_string(hide_password=False)


@pytest.fixture
def store(store_url: str) -> Iterator[SqlRunStore]:
    s = SqlRunStore(store_url)
    try:
        yield s
    finally:
        s.close()


def run(workflow_id: str, **kw: Any) -> NewRun:
    base: dict[str, Any] = {
        "workflow_id": workflow_id,
        "name": "wf",
        "version": 1,
        "create_time": T0,
    }
    base.update(kw)
    return NewRun(**base)


def task(task_id: str, **kw: Any) -> TaskRecord:
    base: dict[str, Any] = {
        "task_id": task_id,
        "workflow_id": "w1",
        "reference_task_name": f"ref_{task_id}",
        "task_type": "parse_pdf",
        "scheduled_time": T0,
    }
    base.update(kw)
    return TaskRecord(**base)


def race(n: int, fn: Callable[[int], T]) -> list[T]:
    """Run fn(i) for i in range(n) on n threads released at the same moment."""
    barrier = threading.Barrier(n)

    def go(i: int) -> T:
        barrier.wait()
        return fn(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(go, range(n)))


# --- schema / migrations -------------------------------------------------------


def test_upgrade_gives_worker_rows_their_task_type_from_the_queue(store_url: str) -> None:
    """Revision 0002 adds ``task_def_name``; rows written before it get the worker task
    type back from their queue name, once, in the migration."""
    engine = sa.create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        for task_id, queue, domain in [
            ("t1", "parse_pdf", None),
            ("t2", "parse_pdf-high", None),
            ("t3", "eu-parse_pdf", "eu"),
        ]:
            conn.execute(
                sa.text(
                    "INSERT INTO tasks (task_id, workflow_id, reference_task_name, task_type, "
                    "status, attempt, retry_count, seq, poll_count, callback_after_seconds, "
                    "iteration, queue_name, domain) VALUES (:id, 'w1', 'p', 'WORKER', "
                    "'SCHEDULED', 1, 0, 0, 0, 0, 0, :queue, :domain)"
                ),
                {"id": task_id, "queue": queue, "domain": domain},
            )
    engine.dispose()
    upgraded = SqlRunStore(store_url)
    try:
        for task_id in ("t1", "t2", "t3"):
            row = upgraded.get_task(task_id)
            assert row is not None and row.task_def_name == "parse_pdf"
    finally:
        upgraded.close()


def test_upgrade_gives_open_leases_of_polled_attempts_their_slot(store_url: str) -> None:
    """Revision 0004 adds ``leases.slot``: before it every polled attempt held a slot of
    its type's counter, so an unreleased lease with a sequence number gets its type and
    releasing it frees that slot once."""
    engine = sa.create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        for task_id, seq, released in [("t1", 7, False), ("t2", None, False), ("t3", 8, True)]:
            conn.execute(
                sa.text(
                    "INSERT INTO tasks (task_id, workflow_id, reference_task_name, task_type, "
                    "task_def_name, status, attempt, retry_count, seq, poll_count, "
                    "callback_after_seconds, iteration) VALUES (:id, 'w1', :id, 'WORKER', "
                    "'parse_pdf', 'IN_PROGRESS', 1, 0, 0, 1, 0, 0)"
                ),
                {"id": task_id},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO leases (task_id, attempt, worker_id, expires_at, acquired_at, "
                    "sequence_number, released) VALUES (:id, 1, 'wk', 1, 0, :seq, :released)"
                ),
                {"id": task_id, "seq": seq, "released": released},
            )
        conn.execute(
            sa.text("INSERT INTO concurrency_counters (task_type, in_use) VALUES ('parse_pdf', 2)")
        )
    engine.dispose()
    upgraded = SqlRunStore(store_url)
    try:
        slots = {t: getattr(upgraded.get_lease(t, 1), "slot", "-") for t in ("t1", "t2", "t3")}
        assert slots == {"t1": "parse_pdf", "t2": None, "t3": None}
        assert upgraded.release_lease("t1", 1)
        assert upgraded.concurrency_in_use("parse_pdf") == 1
    finally:
        upgraded.close()


def test_upgrade_adds_pending_starts_to_a_store_with_runs(store_url: str) -> None:
    """Revision 0005 adds ``run_starts``: runs created before it have no pending start,
    and runs created after it get theirs."""
    engine = sa.create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0004")
        conn.execute(
            sa.text(
                "INSERT INTO runs (workflow_id, name, version, status, priority, create_time, "
                "update_time) VALUES ('old', 'wf', 1, 'RUNNING', 0, :t, :t)"
            ),
            {"t": T0},
        )
    engine.dispose()
    upgraded = SqlRunStore(store_url)
    try:
        assert upgraded.get_run("old") is not None
        assert upgraded.pending_starts() == [] and not upgraded.has_pending_start("old")
        assert not upgraded.create_run(run("old"), start={"workflowId": "old"}).created
        assert upgraded.create_run(run("new"), start={"workflowId": "new"}).created
        assert [p.workflow_id for p in upgraded.pending_starts()] == ["new"]
    finally:
        upgraded.close()


def test_upgrade_makes_the_input_of_pending_starts_a_json_column(store_url: str) -> None:
    """Revision 0006 turns ``run_starts.run_input`` from text into the store's JSON type
    (JSONB on PostgreSQL, as ``runs.input``): a pending start written as text before it
    reads back the same after it."""
    engine = sa.create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    left = start_of("old", text="héllo ✓ \U0001f600", nested={"a": [1, 2.5, None]}, big=2**70)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0005")
        conn.execute(
            sa.text(
                "INSERT INTO runs (workflow_id, name, version, status, priority, create_time, "
                "update_time) VALUES ('old', 'wf', 1, 'RUNNING', 0, :t, :t)"
            ),
            {"t": T0},
        )
        conn.execute(
            sa.text(
                "INSERT INTO run_starts (workflow_id, run_input, created_at) VALUES ('old', :i, :t)"
            ),
            {"i": json.dumps(left, separators=(",", ":")), "t": T0},
        )
    engine.dispose()
    upgraded = SqlRunStore(store_url)
    try:
        assert upgraded.pending_starts() == [
            PendingStart(workflow_id="old", run_input=left, created_at=T0)
        ]
        (column,) = [
            c
            for c in sa.inspect(upgraded.engine).get_columns("run_starts")
            if c["name"] == "run_input"
        ]
        expected = "JSONB" if upgraded.dialect == "postgresql" else "JSON"
        assert type(column["type"]).__name__ == expected and not column["nullable"]
        assert upgraded.create_run(
            run("new", create_time=T0 + 1), start=start_of("new", n=1)
        ).created
        assert upgraded.pending_starts()[1].run_input == start_of("new", n=1)
    finally:
        upgraded.close()


def test_upgrade_adds_the_settled_time_of_leases_and_downgrade_removes_it(
    store_url: str,
) -> None:
    """Revision 0007 adds ``leases.settled_at`` and the index of the leases not marked
    settled: a lease written before it is not known to be settled (the sweep asks the
    queue about it once); downgrading to 0006 removes both and keeps the leases."""
    engine = sa.create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0006")
        conn.execute(
            sa.text(
                "INSERT INTO tasks (task_id, workflow_id, reference_task_name, task_type, "
                "task_def_name, status, attempt, retry_count, seq, poll_count, "
                "callback_after_seconds, iteration, update_time) VALUES ('t1', 'w1', 't1', "
                "'WORKER', 'parse_pdf', 'COMPLETED', 1, 0, 0, 1, 0, 0, :t)"
            ),
            {"t": T0},
        )
        conn.execute(
            sa.text(
                "INSERT INTO leases (task_id, attempt, worker_id, expires_at, acquired_at, "
                "sequence_number, queue_name, released) VALUES ('t1', 1, 'wk', :t, :t, 7, "
                "'parse_pdf', :released)"
            ),
            {"t": T0, "released": True},
        )
    engine.dispose()

    def schema() -> tuple[set[str], set[str]]:
        inspector = sa.inspect(engine)
        columns = {c["name"] for c in inspector.get_columns("leases")}
        indexes = {str(i["name"]) for i in inspector.get_indexes("leases")}
        return columns, indexes

    upgraded = SqlRunStore(store_url)
    try:
        columns, indexes = schema()
        assert "settled_at" in columns and "ix_leases_unsettled" in indexes
        [old] = upgraded.unsettled_attempts(T0)
        assert (old.lease.task_id, old.lease.sequence_number, old.lease.settled_at) == (
            "t1",
            7,
            None,
        )
        assert upgraded.mark_settled("t1", 1, 7, T0 + 5)
        assert upgraded.unsettled_attempts(T0 + 10) == []
    finally:
        upgraded.close()

    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0006")
    try:
        columns, indexes = schema()
        assert "settled_at" not in columns and "ix_leases_unsettled" not in indexes
        with engine.connect() as conn:
            kept = conn.execute(
                sa.text("SELECT task_id, attempt, sequence_number, queue_name FROM leases")
            ).all()
        assert [tuple(r) for r in kept] == [("t1", 1, 7, "parse_pdf")]
    finally:
        engine.dispose()
    again = SqlRunStore(store_url)  # and up again
    try:
        lease = again.get_lease("t1", 1)
        assert lease is not None and lease.settled_at is None
    finally:
        again.close()


def _at_0006_with_a_lease(store_url: str) -> tuple[sa.Engine, Config]:
    """A PostgreSQL store at revision 0006 holding one released lease (``t1``)."""
    if make_url(store_url).get_backend_name() != "postgresql":
        pytest.skip("PostgreSQL's DDL locks: SQLite serialises every write anyway")
    engine = sa.create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0006")
        conn.execute(sa.text(_LEASE_INSERT), {"task_id": "t1", "t": T0})
    return engine, cfg


_LEASE_INSERT = (
    "INSERT INTO leases (task_id, attempt, worker_id, expires_at, acquired_at, "
    "sequence_number, queue_name, released) VALUES (:task_id, 1, 'wk', :t, :t, 7, "
    "'parse_pdf', true)"
)


def _leases_and_index(engine: sa.Engine) -> tuple[list[str], bool | None]:
    """The task ids of the leases, and whether ``ix_leases_unsettled`` is valid (None:
    there is none)."""
    with engine.connect() as conn:
        tasks = conn.execute(sa.text("SELECT task_id FROM leases ORDER BY task_id")).scalars()
        valid = conn.execute(
            sa.text(
                "SELECT indisvalid FROM pg_index "
                "WHERE indexrelid = to_regclass('ix_leases_unsettled')"
            )
        ).scalar()
        return list(tasks), valid


def _waiting_ddl(engine: sa.Engine, prefix: str, timeout: float = 20.0) -> None:
    """Returns once another session's statement starting with ``prefix`` waits for a
    lock (a migration has reached it)."""
    deadline = time.monotonic() + timeout
    with engine.connect() as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                    "AND wait_event_type = 'Lock' AND query LIKE :q"
                ),
                {"q": prefix + "%"},
            ).scalar()
            conn.rollback()
            if waiting:
                return
            time.sleep(0.02)
    raise AssertionError(f"no statement starting {prefix!r} waited for a lock")


def test_upgrade_to_0007_keeps_writers_of_leases_waiting_a_moment_at_most(
    store_url: str,
) -> None:
    """A replica of the previous version holds a transaction that wrote a lease while a
    new replica applies 0007. Its ``ALTER TABLE leases`` waits for that transaction, but
    only in attempts of a fifth of a second: another writer of leases (a hand-out) goes
    through meanwhile instead of queueing behind the ALTER until the transaction ends.
    Once it ends the upgrade completes, and every lease is kept."""
    engine, _ = _at_0006_with_a_lease(store_url)
    upgraded: list[SqlRunStore] = []
    failed: list[BaseException] = []
    try:
        with engine.connect() as old_replica:
            old_replica.execute(sa.text(_LEASE_INSERT), {"task_id": "t2", "t": T0})

            def upgrade() -> None:
                try:
                    upgraded.append(SqlRunStore(store_url))
                except BaseException as exc:
                    failed.append(exc)

            migrating = threading.Thread(target=upgrade)
            migrating.start()
            _waiting_ddl(engine, "ALTER TABLE")
            started = time.monotonic()
            with engine.begin() as hand_out:
                hand_out.execute(sa.text("SET LOCAL lock_timeout = '3s'"))
                hand_out.execute(sa.text(_LEASE_INSERT), {"task_id": "t3", "t": T0})
            waited = time.monotonic() - started
            assert migrating.is_alive()  # still waiting for the old replica's transaction
            old_replica.commit()
        migrating.join(30)
        assert not failed, failed
        assert upgraded and not migrating.is_alive()
        assert waited < 2.0, waited
        assert _leases_and_index(engine) == (["t1", "t2", "t3"], True)
    finally:
        for store in upgraded:
            store.close()
        engine.dispose()


def test_upgrade_to_0007_after_an_interrupted_attempt_rebuilds_its_index(
    store_url: str,
) -> None:
    """An earlier attempt at 0007 added the column and died while building the index
    (``CREATE INDEX CONCURRENTLY`` leaves an INVALID index behind): the revision was not
    recorded, so it runs again, keeps the column and replaces the invalid index."""
    engine, _ = _at_0006_with_a_lease(store_url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(_LEASE_INSERT), {"task_id": "t2", "t": T0})
            conn.execute(sa.text("ALTER TABLE leases ADD COLUMN settled_at BIGINT"))
            conn.commit()
        # a unique index over duplicates fails half-way, as an interrupted build does
        interrupted = "CREATE UNIQUE INDEX CONCURRENTLY ix_leases_unsettled ON leases (queue_name)"
        with (
            engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
            pytest.raises(sa.exc.IntegrityError),
        ):
            conn.execute(sa.text(interrupted))
        SqlRunStore(store_url).close()
        assert _leases_and_index(engine) == (["t1", "t2"], True)
        with engine.connect() as conn:
            definition = conn.execute(
                sa.text("SELECT pg_get_indexdef(to_regclass('ix_leases_unsettled'))")
            ).scalar()
        assert "UNIQUE" not in definition and "settled_at IS NULL" in definition, definition
    finally:
        engine.dispose()


def test_adapter_satisfies_port(store: SqlRunStore) -> None:
    assert isinstance(store, RunStore)


def test_migration_creates_schema_matching_adapter_tables(store: SqlRunStore) -> None:
    """The migrated schema has the adapter's tables and columns, with their types and
    nullability (indexes are the migrations' alone)."""
    with store.engine.connect() as conn:
        version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diffs = compare_metadata(context, metadata)
    assert version == ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    # a column's changes come as a list of them
    changes = [c for d in diffs for c in (d if isinstance(d, list) else [d])]
    structural = [
        c
        for c in changes
        if c[0]
        in {
            "add_table",
            "remove_table",
            "add_column",
            "remove_column",
            "modify_type",
            "modify_nullable",
        }
        and not (c[0] == "remove_table" and c[1].name == "alembic_version")
    ]
    assert structural == []


def test_reopen_and_concurrent_open_are_safe(store_url: str) -> None:
    stores = race(4, lambda _: SqlRunStore(store_url))
    try:
        stores[0].create_run(run("w1"))
        assert all(s.get_run("w1") is not None for s in stores)
    finally:
        for s in stores:
            s.close()


def _named(store_url: str, name: str) -> str:
    """``store_url`` whose PostgreSQL sessions carry ``name`` (``application_name``)."""
    url = make_url(store_url)
    if url.get_backend_name() != "postgresql":
        return store_url
    return url.update_query_dict({"application_name": name}).render_as_string(hide_password=False)


def _open_connections(store_url: str, name: str) -> int:
    """The connections open to the database of ``store_url``: on SQLite this process's
    file handles on the database file, on PostgreSQL the server's sessions named
    ``name``."""
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        database = os.path.realpath(str(url.database))
        count = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                count += os.readlink(f"/proc/self/fd/{fd}") == database
            except OSError:
                continue  # closed meanwhile
        return count
    assert PG_URL
    admin = sa.create_engine(PG_URL)
    try:
        with admin.connect() as conn:
            sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = :n"
            return int(conn.execute(sa.text(sql), {"n": name}).scalar_one())
    finally:
        admin.dispose()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts file handles in /proc")
def test_close_closes_the_connections_of_every_thread(store_url: str) -> None:
    """Threads that used the store and are still alive keep no connection open once
    the store is closed."""
    name = f"stepway-{uuid.uuid4().hex[:12]}"
    store = SqlRunStore(_named(store_url, name))
    store.create_run(run("w1"))
    used = threading.Barrier(THREADS + 1)
    closed = threading.Event()

    def use(_: int) -> bool:
        found = store.get_run("w1") is not None
        used.wait()
        closed.wait()  # alive until the store is closed
        return found

    with ThreadPoolExecutor(THREADS) as pool:
        results = pool.map(use, range(THREADS))
        used.wait()
        try:
            assert _open_connections(store_url, name) >= 1
            store.close()
            store.close()  # idempotent
            # a PostgreSQL session ends a moment after its client closed it
            for _ in range(200):
                if _open_connections(store_url, name) == 0:
                    break
                time.sleep(0.05)
            assert _open_connections(store_url, name) == 0
        finally:
            closed.set()
        assert all(results)


def test_many_threads_using_the_store_at_once_all_get_through(store_url: str) -> None:
    """More threads than any connection pool holds each use the store while all of them
    are alive, and none waits for a connection another thread keeps."""
    store = SqlRunStore(store_url)
    threads = 48
    alive = threading.Barrier(threads)

    def use(i: int) -> bool:
        try:
            store.create_run(run(f"w{i}"))
            alive.wait()  # every thread has used the store and is still running
            store.upsert_task(task(f"t{i}", workflow_id=f"w{i}"), T0)
            row = store.get_task(f"t{i}")
            return row is not None and row.workflow_id == f"w{i}"
        except BaseException:
            alive.abort()  # the others stop waiting: the test fails now, not at its timeout
            raise

    try:
        with ThreadPoolExecutor(threads) as pool:
            assert all(pool.map(use, range(threads)))
        assert store.search_runs(RunQuery(size=0)).total_hits == threads
    finally:
        store.close()


# --- runs -----------------------------------------------------------------------


def test_run_roundtrip(store: SqlRunStore) -> None:
    new = run(
        "w1",
        input={"a": [1, 2, {"b": None}], "s": "é"},
        variables={"v": 1},
        correlation_id="c1",
        priority=42,
        task_to_domain={"parse_pdf": "east"},
        idempotency_key="k1",
        parent_workflow_id="p1",
        parent_task_id="pt1",
    )
    assert store.create_run(new).created
    got = store.get_run("w1")
    assert got is not None
    assert got.input == {"a": [1, 2, {"b": None}], "s": "é"}
    assert got.status is RunStatus.RUNNING
    assert got.variables == {"v": 1}
    assert got.priority == 42
    assert got.task_to_domain == {"parse_pdf": "east"}
    assert (got.parent_workflow_id, got.parent_task_id) == ("p1", "pt1")
    assert got.create_time == got.update_time == T0
    assert got.end_time is None
    dumped = got.model_dump(by_alias=True)
    assert dumped["workflowId"] == "w1" and dumped["correlationId"] == "c1"
    assert store.get_run("nope") is None


def test_run_input_can_be_an_offload_reference(store: SqlRunStore) -> None:
    store.create_run(run("w1", input_ref="payloads/w1/input.json"))
    got = store.get_run("w1")
    assert got is not None and got.input is None and got.input_ref == "payloads/w1/input.json"


def test_priority_is_bounded() -> None:
    with pytest.raises(ValidationError):
        run("w1", priority=100)
    with pytest.raises(ValidationError):
        run("w1", priority=-1)


def test_create_run_twice_is_idempotent(store: SqlRunStore) -> None:
    assert store.create_run(run("w1")).created
    again = store.create_run(run("w1", name="other"))
    assert again.workflow_id == "w1" and not again.created


def test_idempotency_key_returns_first_run(store: SqlRunStore) -> None:
    assert store.create_run(run("w1", idempotency_key="k")).created
    second = store.create_run(run("w2", idempotency_key="k"))
    assert second.workflow_id == "w1" and not second.created
    assert store.get_run("w2") is None
    # the key is unique per definition name only
    assert store.create_run(run("w3", name="other", idempotency_key="k")).created
    # runs without a key never collide
    assert store.create_run(run("w4")).created and store.create_run(run("w5")).created


def test_idempotency_key_under_concurrent_starts(store: SqlRunStore) -> None:
    results = race(THREADS, lambda i: store.create_run(run(f"w{i}", idempotency_key="same")))
    assert sum(r.created for r in results) == 1
    assert len({r.workflow_id for r in results}) == 1
    assert store.search_runs(RunQuery()).total_hits == 1


def test_run_status_is_monotonic(store: SqlRunStore) -> None:
    store.create_run(run("w1"))
    assert store.update_run("w1", RunUpdate(status=RunStatus.PAUSED), T0 + 1)
    assert store.update_run("w1", RunUpdate(status=RunStatus.RUNNING), T0 + 2)
    assert store.update_run("w1", RunUpdate(variables={"x": 1}), T0 + 3)
    assert store.update_run(
        "w1",
        RunUpdate(
            status=RunStatus.FAILED,
            reason_for_incompletion="boom",
            failed_reference_task_names=["t1"],
            output={"o": 1},
        ),
        T0 + 4,
    )
    # late / duplicate writes do not apply
    assert not store.update_run("w1", RunUpdate(status=RunStatus.RUNNING), T0 + 5)
    assert not store.update_run("w1", RunUpdate(status=RunStatus.COMPLETED), T0 + 5)
    assert not store.update_run("w1", RunUpdate(status=RunStatus.FAILED), T0 + 5)
    assert not store.update_run("w1", RunUpdate(variables={"x": 2}), T0 + 5)
    got = store.get_run("w1")
    assert got is not None
    assert got.status is RunStatus.FAILED
    assert got.variables == {"x": 1} and got.output == {"o": 1}
    assert got.reason_for_incompletion == "boom"
    assert got.failed_reference_task_names == ["t1"]
    assert got.end_time == T0 + 4 and got.update_time == T0 + 4
    assert not store.update_run("missing", RunUpdate(status=RunStatus.PAUSED), T0)


def test_concurrent_terminal_run_writes_one_wins(store: SqlRunStore) -> None:
    store.create_run(run("w1"))
    statuses = [RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.TERMINATED, RunStatus.TIMED_OUT]
    applied = race(
        THREADS,
        lambda i: store.update_run("w1", RunUpdate(status=statuses[i % 4]), T0 + i),
    )
    assert sum(applied) == 1
    got = store.get_run("w1")
    assert got is not None and got.status is statuses[applied.index(True) % 4]


def test_reopen_run(store: SqlRunStore) -> None:
    store.create_run(run("w1"))
    assert not store.reopen_run("w1", T0 + 1)  # not terminal
    store.update_run("w1", RunUpdate(status=RunStatus.FAILED, reason_for_incompletion="x"), T0 + 2)
    assert store.reopen_run("w1", T0 + 3)
    got = store.get_run("w1")
    assert got is not None
    assert got.status is RunStatus.RUNNING and got.end_time is None
    assert got.reason_for_incompletion is None


@pytest.mark.parametrize(
    ("ended", "terminated"),
    [
        (RunStatus.FAILED, True),
        (RunStatus.TIMED_OUT, True),
        (RunStatus.COMPLETED, False),
        (RunStatus.TERMINATED, False),
        (RunStatus.RUNNING, False),
    ],
)
def test_terminate_ended_takes_a_failed_or_timed_out_run_to_terminated(
    store: SqlRunStore, ended: RunStatus, terminated: bool
) -> None:
    store.create_run(run("w1"))
    if ended is not RunStatus.RUNNING:
        store.update_run("w1", RunUpdate(status=ended, reason_for_incompletion="x"), T0 + 2)
    before = store.get_run("w1")
    assert before is not None
    assert store.terminate_ended("w1", "cleaned up", T0 + 3) is terminated
    got = store.get_run("w1")
    assert got is not None
    if terminated:
        assert got.status is RunStatus.TERMINATED
        assert got.reason_for_incompletion == "cleaned up"
        assert got.end_time == before.end_time == T0 + 2
    else:
        assert (got.status, got.reason_for_incompletion) == (
            before.status,
            before.reason_for_incompletion,
        )
    assert not store.terminate_ended("missing", "r", T0 + 4)


@pytest.mark.parametrize(
    "ended",
    [
        TaskStatus.FAILED,
        TaskStatus.FAILED_WITH_TERMINAL_ERROR,
        TaskStatus.TIMED_OUT,
        TaskStatus.CANCELED,
    ],
)
def test_reopen_task_takes_an_unsuccessful_attempt_back_to_in_progress(
    store: SqlRunStore, ended: TaskStatus
) -> None:
    """A retry that resumes a SUB_WORKFLOW task in place: the same attempt IN_PROGRESS
    again, its end time, reason, offloaded output and retried flag cleared."""
    store.create_run(run("w1"))
    store.upsert_task(
        task(
            "t1",
            attempt=2,
            status=ended,
            reason_for_incompletion="child failed",
            end_time=T0 + 1,
            output_ref="outputs/t1.json",
            retried=True,
        ),
        T0,
    )
    assert not store.reopen_task("t1", 1, {"subWorkflowId": "c"}, T0 + 2)  # another attempt
    assert not store.reopen_task("nope", 2, {"subWorkflowId": "c"}, T0 + 2)
    assert store.reopen_task("t1", 2, {"subWorkflowId": "t1-2"}, T0 + 3)
    got = store.get_task("t1")
    assert got is not None
    assert (got.status, got.attempt, got.end_time, got.reason_for_incompletion) == (
        TaskStatus.IN_PROGRESS,
        2,
        None,
        None,
    )
    assert (got.output_data, got.output_ref, got.retried) == (
        {"subWorkflowId": "t1-2"},
        None,
        False,
    )
    assert got.update_time == T0 + 3


@pytest.mark.parametrize("status", [TaskStatus.COMPLETED, TaskStatus.IN_PROGRESS])
def test_reopen_task_leaves_a_task_that_did_not_fail(
    store: SqlRunStore, status: TaskStatus
) -> None:
    store.create_run(run("w1"))
    store.upsert_task(task("t1", status=status), T0)
    assert not store.reopen_task("t1", 1, {}, T0 + 1)
    got = store.get_task("t1")
    assert got is not None and got.status == status


def test_delete_run_removes_tasks_logs_and_leases(store: SqlRunStore) -> None:
    store.create_run(run("w1"))
    store.upsert_task(task("t1"), T0)
    store.append_task_log("t1", "hello", T0)
    assert store.start_task("t1", 1, "wk", lease_expires_at=T0 + 1000, now=T0) is not None
    assert store.delete_run("w1")
    assert store.get_run("w1") is None and store.get_task("t1") is None
    assert store.list_task_logs("t1") == [] and store.get_lease("t1", 1) is None
    assert not store.delete_run("w1")


def _kept(store: SqlRunStore, workflow_id: str, task_id: str, attempt: int) -> Any:
    kept = store.get_step_result(workflow_id, task_id, attempt)
    return None if kept is None else kept.result


def test_step_results_are_kept_per_attempt_replaced_and_deleted_with_their_run(
    store: SqlRunStore,
) -> None:
    """The result of a built-in step done in a work item, read back by its replays: per
    run, task and attempt, JSON as given, replaced when the work item is done again, and
    gone with its run (not with another's)."""
    store.create_run(run("w1"))
    store.create_run(run("w2"))
    envelope = {"status": "COMPLETED", "output": {"n": 1, "text": "é\u2028", "list": [1, None]}}
    store.put_step_result("w1", "t1", 1, envelope, T0)
    store.put_step_result("w1", "t1", 2, {"status": "FAILED", "reason": "boom"}, T0)
    store.put_step_result("w2", "t1", 1, {"status": "COMPLETED", "output": {}}, T0)

    assert _kept(store, "w1", "t1", 1) == envelope
    assert _kept(store, "w1", "t1", 2) == {"status": "FAILED", "reason": "boom"}
    assert _kept(store, "w1", "t1", 3) is None
    assert _kept(store, "w1", "t2", 1) is None

    again = {"status": "COMPLETED", "output": {"n": 2}}
    store.put_step_result("w1", "t1", 1, again, T0 + 1)
    assert store.get_step_result("w1", "t1", 1) == KeptStep(result=again, kept_at=T0 + 1)

    assert store.delete_run("w1")
    assert _kept(store, "w1", "t1", 1) is None
    assert _kept(store, "w1", "t1", 2) is None
    assert _kept(store, "w2", "t1", 1) == {"status": "COMPLETED", "output": {}}


def test_a_step_result_of_a_later_execution_deletes_those_of_earlier_ones(
    store: SqlRunStore,
) -> None:
    """A run continued as new replays only its current execution: keeping a result in
    execution n deletes the run's results of executions before n (not n's, not another
    run's), so a run keeps one execution's."""
    for workflow_id in ("w1", "w2"):
        store.create_run(run(workflow_id))
        store.put_step_result(workflow_id, "a", 1, {"status": "COMPLETED", "n": 0}, T0, 0)
    store.put_step_result("w1", "b", 1, {"status": "COMPLETED", "n": 1}, T0, 1)

    store.put_step_result("w1", "c", 1, {"status": "COMPLETED", "n": 2}, T0, 1)
    assert _kept(store, "w1", "a", 1) is None
    assert _kept(store, "w1", "b", 1) == {"status": "COMPLETED", "n": 1}
    assert _kept(store, "w1", "c", 1) == {"status": "COMPLETED", "n": 2}
    assert _kept(store, "w2", "a", 1) == {"status": "COMPLETED", "n": 0}

    store.put_step_result("w1", "d", 1, {"status": "COMPLETED", "n": 3}, T0, 2)
    assert _kept(store, "w1", "b", 1) is None
    assert _kept(store, "w1", "c", 1) is None
    assert _kept(store, "w1", "d", 1) == {"status": "COMPLETED", "n": 3}


def test_delete_tasks_of_a_run_all_or_some(store: SqlRunStore) -> None:
    """A restart deletes every task row of the run, a rerun those after a task."""
    store.create_run(run("w1"))
    store.create_run(run("w2"))
    for task_id, seq in (("t1", 1), ("t2", 2), ("t3", 3)):
        store.upsert_task(task(task_id, seq=seq), T0)
    store.upsert_task(task("other", workflow_id="w2"), T0)
    store.append_task_log("t3", "log", T0)
    assert store.start_task("t3", 1, "wk", lease_expires_at=T0 + 1000, now=T0) is not None
    assert store.delete_tasks("w1", ["t2", "t3", "other"]) == 2
    assert [t.task_id for t in store.list_tasks("w1")] == ["t1"]
    assert store.list_task_logs("t3") == [] and store.get_lease("t3", 1) is None
    assert store.delete_tasks("w1") == 1
    assert store.list_tasks("w1") == [] and store.get_task("other") is not None


def test_delete_tasks_of_instances_takes_every_attempt_and_nested_instance(
    store: SqlRunStore,
) -> None:
    """A DO_WHILE's keepLastN drops an iteration's instances by reference name: every
    attempt of each, the instances nested in one (``ref__*``; their logs and leases too),
    of this run only; a name that only looks alike (another case, a longer number, ``_``
    and ``%`` taken literally) stays."""
    store.create_run(run("w1"))
    store.create_run(run("w2"))
    rows = {
        "a1": "p__1",
        "b1": "q__1__1",
        "b2": "q__1__2",
        "c1": "p__2",
        "c2": "p__10",
        "c3": "P__1",
        "c4": "q__1x__1",
        "c5": "r%__1",
    }
    for task_id, ref in rows.items():
        store.upsert_task(task(task_id, reference_task_name=ref, status=TaskStatus.FAILED), T0)
    store.upsert_task(task("a2", reference_task_name="p__1", attempt=2, retried_task_id="a1"), T0)
    store.upsert_task(task("d1", workflow_id="w2", reference_task_name="p__1"), T0)
    store.append_task_log("a2", "log", T0)
    assert store.start_task("a2", 2, "wk", lease_expires_at=T0 + 1000, now=T0) is not None
    assert store.delete_tasks("w1", instances=["p__1", "q__1", "r_", "nothing"]) == 4
    assert sorted(t.task_id for t in store.list_tasks("w1")) == ["c1", "c2", "c3", "c4", "c5"]
    assert store.list_task_logs("a2") == [] and store.get_lease("a2", 2) is None
    assert store.get_task("d1") is not None


def test_delete_tasks_of_thousands_of_instances_at_once(store: SqlRunStore) -> None:
    """A loop body of thousands of tasks: its iteration's instances go in one call (each
    is a condition of its own: SQLite refuses an expression deeper than 1,000)."""
    store.create_run(run("w1"))
    for n in range(1500):
        store.upsert_task(task(f"t{n}", reference_task_name=f"x{n}__1", seq=n + 1), T0)
    store.upsert_task(task("kept", reference_task_name="x0__2", seq=2000), T0)
    assert store.delete_tasks("w1", instances=[f"x{n}__1" for n in range(1500)]) == 1500
    assert [t.task_id for t in store.list_tasks("w1")] == ["kept"]


def test_retry_fields_of_runs_and_tasks(store: SqlRunStore) -> None:
    """What a retry or restart records: the run's last retry time, generation and
    definition snapshot; a task's retriedTaskId and retried flag."""
    store.create_run(run("w1", definition_ref="definitions/abc.json", generation="g1"))
    store.upsert_task(task("t1", status=TaskStatus.FAILED, retried=True), T0)
    store.upsert_task(task("t2", attempt=2, retried_task_id="t1"), T0)
    store.update_run(
        "w1", RunUpdate(last_retried_time=T0 + 5, generation="g2", correlation_id="c2"), T0 + 5
    )
    got = store.get_run("w1")
    assert got is not None
    assert (got.definition_ref, got.generation, got.last_retried_time) == (
        "definitions/abc.json",
        "g2",
        T0 + 5,
    )
    assert got.correlation_id == "c2"
    store.upsert_task(task("t3", status=TaskStatus.TIMED_OUT), T0)
    assert store.mark_retried("t3", T0 + 6) and not store.mark_retried("nope", T0 + 6)
    first, second, third = store.list_tasks("w1")
    assert third.retried and third.status == TaskStatus.TIMED_OUT
    assert (first.retried, first.retried_task_id) == (True, None)
    assert (second.retried, second.retried_task_id) == (False, "t1")


def test_search_filters_and_paging(store: SqlRunStore) -> None:
    for i in range(25):
        store.create_run(
            run(
                f"w{i:02d}",
                name="a" if i % 2 == 0 else "b",
                correlation_id=f"c{i % 3}",
                create_time=T0 + i * 1000,
            )
        )
    for i in range(0, 25, 5):
        store.update_run(f"w{i:02d}", RunUpdate(status=RunStatus.COMPLETED), T0 + 99_000)

    everything = store.search_runs(RunQuery(size=100))
    assert everything.total_hits == 25
    assert [r.workflow_id for r in everything.results] == [f"w{i:02d}" for i in range(24, -1, -1)]

    page = store.search_runs(RunQuery(start=10, size=5))
    assert page.total_hits == 25
    assert [r.workflow_id for r in page.results] == ["w14", "w13", "w12", "w11", "w10"]
    assert store.search_runs(RunQuery(start=30, size=5)).results == []
    counted = store.search_runs(RunQuery(size=0))
    assert counted.total_hits == 25 and counted.results == []

    by_name = store.search_runs(RunQuery(name="a"))
    assert by_name.total_hits == 13 and all(r.name == "a" for r in by_name.results)

    done = store.search_runs(RunQuery(statuses=[RunStatus.COMPLETED]))
    assert {r.workflow_id for r in done.results} == {"w00", "w05", "w10", "w15", "w20"}
    both = store.search_runs(RunQuery(statuses=[RunStatus.COMPLETED, RunStatus.RUNNING]))
    assert both.total_hits == 25

    corr = store.search_runs(RunQuery(correlation_id="c1"))
    assert {r.workflow_id for r in corr.results} == {f"w{i:02d}" for i in range(1, 25, 3)}
    any_of = store.search_runs(RunQuery(name="a", correlation_ids=["c1", "c2", "nope"]))
    assert {r.workflow_id for r in any_of.results} == {
        f"w{i:02d}" for i in range(0, 25, 2) if i % 3 != 0
    }
    assert store.search_runs(RunQuery(correlation_ids=[])).total_hits == 0

    window = store.search_runs(RunQuery(create_time_from=T0 + 5000, create_time_to=T0 + 8000))
    assert [r.workflow_id for r in window.results] == ["w07", "w06", "w05"]

    # oldest first, paged and filtered as newest first is; a tie on createTime goes by
    # workflowId in the same direction
    oldest = store.search_runs(RunQuery(start=2, size=3, name="a", oldest_first=True))
    assert oldest.total_hits == 13
    assert [r.workflow_id for r in oldest.results] == ["w04", "w06", "w08"]
    store.create_run(run("w99", name="a", create_time=T0 + 4000))  # w04's createTime
    tied = store.search_runs(RunQuery(start=2, size=3, name="a", oldest_first=True))
    assert [r.workflow_id for r in tied.results] == ["w04", "w99", "w06"]
    newest = store.search_runs(RunQuery(name="a", create_time_to=T0 + 5000))
    assert [r.workflow_id for r in newest.results] == ["w99", "w04", "w02", "w00"]
    assert store.delete_run("w99")

    combined = store.search_runs(
        RunQuery(name="a", statuses=[RunStatus.COMPLETED], create_time_from=T0 + 1000)
    )
    assert [r.workflow_id for r in combined.results] == ["w20", "w10"]
    assert combined.total_hits == 2

    names = store.search_runs(RunQuery(names=["a", "b", "nope"], size=0))
    assert names.total_hits == 25
    assert store.search_runs(RunQuery(names=["nope"])).total_hits == 0
    assert store.search_runs(RunQuery(names=[])).total_hits == 0
    # free text: the run's id, its correlation id or its definition's name, with the rest
    assert [r.workflow_id for r in store.search_runs(RunQuery(free_text="w07")).results] == ["w07"]
    assert store.search_runs(RunQuery(free_text="c2")).total_hits == 8
    assert store.search_runs(RunQuery(free_text="b")).total_hits == 12
    assert (
        store.search_runs(RunQuery(free_text="w07", statuses=[RunStatus.COMPLETED])).results == []
    )


# --- tasks ----------------------------------------------------------------------


def test_failed_task_refs_name_the_failed_rows_of_a_run_once_in_order(
    store: SqlRunStore,
) -> None:
    assert store.failed_task_refs("w1") == []
    rows = [
        ("t1", "a", 1, TaskStatus.COMPLETED),
        ("t2", "b", 2, TaskStatus.FAILED),
        ("t3", "c", 3, TaskStatus.FAILED_WITH_TERMINAL_ERROR),
        ("t4", "b", 4, TaskStatus.FAILED),  # the same reference again (a loop)
        ("t5", "d", 5, TaskStatus.TIMED_OUT),
    ]
    for task_id, ref, seq, status in rows:
        assert store.upsert_task(task(task_id, reference_task_name=ref, seq=seq), T0)
        store.update_task(task_id, 1, TaskUpdate(status=status), T0 + seq)
    store.upsert_task(task("x1", workflow_id="w2", reference_task_name="z", seq=1), T0)
    store.update_task("x1", 1, TaskUpdate(status=TaskStatus.FAILED), T0 + 1)
    assert store.failed_task_refs("w1") == ["b", "c"]
    assert store.failed_task_refs("w2") == ["z"]


def test_task_state_is_the_attempt_and_status_of_the_row(store: SqlRunStore) -> None:
    assert store.task_state("t1") is None
    assert store.upsert_task(task("t1", input_data={"doc": "x" * 1000}), T0)
    assert store.task_state("t1") == (1, TaskStatus.SCHEDULED)
    store.update_task("t1", 1, TaskUpdate(status=TaskStatus.COMPLETED, end_time=T0 + 1), T0 + 1)
    assert store.task_state("t1") == (1, TaskStatus.COMPLETED)
    assert store.upsert_task(task("t2"), T0)
    store.update_task("t2", 1, TaskUpdate(status=TaskStatus.FAILED), T0 + 1)
    assert store.upsert_task(task("t2", attempt=2, retry_count=1), T0 + 2)  # a retry
    assert store.task_state("t2") == (2, TaskStatus.SCHEDULED)


def test_task_roundtrip_and_listing(store: SqlRunStore) -> None:
    assert store.upsert_task(
        task(
            "t2",
            seq=2,
            input_data={"doc": "x"},
            domain="east",
            queue_name="east-parse_pdf",
            iteration=3,
            retry_count=1,
        ),
        T0,
    )
    assert store.upsert_task(task("t1", seq=1, input_ref="payloads/w1/t1-in.json"), T0)
    store.upsert_task(task("other", workflow_id="w2"), T0)
    got = store.get_task("t2")
    assert got is not None
    assert got.input_data == {"doc": "x"} and got.status is TaskStatus.SCHEDULED
    assert (got.domain, got.queue_name, got.iteration, got.retry_count) == (
        "east",
        "east-parse_pdf",
        3,
        1,
    )
    assert got.update_time == T0 and got.attempt == 1
    assert got.model_dump(by_alias=True)["referenceTaskName"] == "ref_t2"
    assert [t.task_id for t in store.list_tasks("w1")] == ["t1", "t2"]
    t1 = store.get_task("t1")
    assert t1 is not None and t1.input_ref == "payloads/w1/t1-in.json"
    assert store.get_task("missing") is None


def test_open_tasks_of_a_type_oldest_first(store: SqlRunStore) -> None:
    """The console's HUMAN inbox: every waiting task of a type across runs."""
    store.upsert_task(task("late", workflow_id="w2", task_type="HUMAN", scheduled_time=T0 + 5), T0)
    store.upsert_task(task("early", workflow_id="w1", task_type="HUMAN", scheduled_time=T0), T0)
    store.upsert_task(task("worker", task_type="WORKER", scheduled_time=T0 - 9), T0)
    store.upsert_task(
        task("started", workflow_id="w3", task_type="HUMAN", scheduled_time=T0 + 7), T0
    )
    store.update_task("started", 1, TaskUpdate(status=TaskStatus.IN_PROGRESS), T0)
    store.upsert_task(task("done", workflow_id="w4", task_type="HUMAN", scheduled_time=T0 - 1), T0)
    store.update_task("done", 1, TaskUpdate(status=TaskStatus.COMPLETED), T0)
    assert [t.task_id for t in store.list_open_tasks("HUMAN")] == ["early", "late", "started"]
    assert [t.task_id for t in store.list_open_tasks("HUMAN", start=1, size=1)] == ["late"]
    assert store.list_open_tasks("WAIT") == []


def test_task_status_is_monotonic_within_an_attempt(store: SqlRunStore) -> None:
    assert store.upsert_task(task("t1"), T0)
    assert store.upsert_task(task("t1"), T0 + 1)  # repeated SCHEDULED write (activity retry)
    assert store.update_task(
        "t1", 1, TaskUpdate(status=TaskStatus.IN_PROGRESS, worker_id="w", start_time=T0 + 2), T0 + 2
    )
    # IN_PROGRESS never goes back to SCHEDULED for the same attempt
    assert not store.upsert_task(task("t1"), T0 + 3)
    assert not store.update_task("t1", 1, TaskUpdate(status=TaskStatus.SCHEDULED), T0 + 3)
    # progress updates while IN_PROGRESS apply
    assert store.update_task(
        "t1",
        1,
        TaskUpdate(status=TaskStatus.IN_PROGRESS, callback_after_seconds=30, output_data={"p": 1}),
        T0 + 4,
    )
    assert store.update_task(
        "t1", 1, TaskUpdate(status=TaskStatus.COMPLETED, output_data={"ok": True}), T0 + 5
    )
    # terminal is final: duplicates, other terminals, late progress, full rewrites
    assert not store.update_task("t1", 1, TaskUpdate(status=TaskStatus.COMPLETED), T0 + 6)
    assert not store.update_task("t1", 1, TaskUpdate(status=TaskStatus.FAILED), T0 + 6)
    assert not store.update_task("t1", 1, TaskUpdate(status=TaskStatus.IN_PROGRESS), T0 + 6)
    assert not store.update_task("t1", 1, TaskUpdate(output_data={"late": 1}), T0 + 6)
    assert not store.upsert_task(task("t1", status=TaskStatus.FAILED), T0 + 6)
    got = store.get_task("t1")
    assert got is not None
    assert got.status is TaskStatus.COMPLETED and got.output_data == {"ok": True}
    assert got.end_time == T0 + 5 and got.callback_after_seconds == 30
    assert got.worker_id == "w" and got.start_time == T0 + 2


def test_a_failed_optional_task_ends_completed_with_errors(store: SqlRunStore) -> None:
    assert store.upsert_task(task("t1"), T0)
    assert store.update_task(
        "t1", 1, TaskUpdate(status=TaskStatus.FAILED, reason_for_incompletion="no"), T0 + 1
    )
    # the engine's verdict on an optional task replaces the worker's FAILED, once
    assert store.update_task("t1", 1, TaskUpdate(status=TaskStatus.COMPLETED_WITH_ERRORS), T0 + 2)
    assert not store.update_task("t1", 1, TaskUpdate(status=TaskStatus.FAILED), T0 + 3)
    assert not store.update_task(
        "t1", 1, TaskUpdate(status=TaskStatus.COMPLETED_WITH_ERRORS), T0 + 3
    )
    # a success is never turned into COMPLETED_WITH_ERRORS
    assert store.upsert_task(task("t2"), T0)
    assert store.update_task("t2", 1, TaskUpdate(status=TaskStatus.COMPLETED), T0 + 1)
    assert not store.update_task(
        "t2", 1, TaskUpdate(status=TaskStatus.COMPLETED_WITH_ERRORS), T0 + 2
    )
    got = store.get_task("t1")
    assert got is not None and got.status is TaskStatus.COMPLETED_WITH_ERRORS
    assert got.reason_for_incompletion == "no"


def test_task_attempts(store: SqlRunStore) -> None:
    store.upsert_task(task("t1"), T0)
    store.update_task("t1", 1, TaskUpdate(status=TaskStatus.IN_PROGRESS), T0 + 1)
    # the result of a wrong attempt never applies
    assert not store.update_task("t1", 2, TaskUpdate(status=TaskStatus.COMPLETED), T0 + 2)
    assert store.update_task(
        "t1", 1, TaskUpdate(status=TaskStatus.FAILED, reason_for_incompletion="x"), T0 + 2
    )
    # a retry (newer attempt) replaces a failed attempt
    assert store.upsert_task(task("t1", attempt=2, retry_count=1), T0 + 3)
    got = store.get_task("t1")
    assert got is not None and (got.attempt, got.status) == (2, TaskStatus.SCHEDULED)
    assert got.reason_for_incompletion is None
    # a late write of the older attempt does not
    assert not store.upsert_task(task("t1", attempt=1, status=TaskStatus.TIMED_OUT), T0 + 4)
    assert not store.update_task("t1", 1, TaskUpdate(status=TaskStatus.TIMED_OUT), T0 + 4)
    # a newer attempt may also supersede one that is still in progress (response timeout)
    store.update_task("t1", 2, TaskUpdate(status=TaskStatus.IN_PROGRESS), T0 + 5)
    assert store.upsert_task(task("t1", attempt=3), T0 + 6)
    # but never one that succeeded
    store.update_task("t1", 3, TaskUpdate(status=TaskStatus.COMPLETED), T0 + 7)
    assert not store.upsert_task(task("t1", attempt=4), T0 + 8)
    got = store.get_task("t1")
    assert got is not None and (got.attempt, got.status) == (3, TaskStatus.COMPLETED)


def test_concurrent_task_results_one_wins(store: SqlRunStore) -> None:
    store.upsert_task(task("t1"), T0)
    statuses = [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.CANCELED]
    applied = race(
        THREADS, lambda i: store.update_task("t1", 1, TaskUpdate(status=statuses[i % 4]), T0 + i)
    )
    assert sum(applied) == 1


def test_task_logs(store: SqlRunStore) -> None:
    for i in range(5):
        store.append_task_log("t1", f"line {i}", T0 + i)
    store.append_task_log("t2", "other", T0)
    logs = store.list_task_logs("t1")
    assert [entry.log for entry in logs] == [f"line {i}" for i in range(5)]
    assert [entry.created_time for entry in logs] == [T0 + i for i in range(5)]
    assert store.list_task_logs("none") == []


def test_a_tasks_log_keeps_its_first_entries_then_says_that_later_ones_are_not_kept(
    store: SqlRunStore,
) -> None:
    limit = MAX_TASK_LOG_ENTRIES
    store.upsert_task(task("t1"), T0)
    store.append_task_log("t1", "first", T0)
    started = TaskUpdate(status=TaskStatus.IN_PROGRESS)
    lines = [f"line {i}" for i in range(limit - 2)]
    assert store.update_task("t1", 1, started, T0 + 1, logs=lines)
    store.append_task_log("t1", "last kept", T0 + 2)  # the limit's last entry
    store.append_task_log("t1", "dropped", T0 + 3)
    # an update past the limit still applies: its logs are what is not kept
    done = TaskUpdate(status=TaskStatus.COMPLETED, output_data={"ok": True})
    assert store.update_task("t1", 1, done, T0 + 4, logs=["dropped too"])
    store.append_task_log("t1", "and this", T0 + 5)
    store.append_task_log("t2", "other", T0)

    logs = [entry.log for entry in store.list_task_logs("t1")]
    assert len(logs) == limit + 1
    assert logs[:2] == ["first", "line 0"]
    assert logs[limit - 1 :] == ["last kept", TASK_LOGS_DROPPED]
    row = store.get_task("t1")
    assert row is not None and row.status == TaskStatus.COMPLETED
    assert [entry.log for entry in store.list_task_logs("t2")] == ["other"]

    # one update whose lines cross the limit keeps those up to it
    store.upsert_task(task("t3"), T0)
    many = [f"n{i}" for i in range(limit + 5)]
    assert store.update_task("t3", 1, started, T0 + 1, logs=many)
    assert [entry.log for entry in store.list_task_logs("t3")] == [
        *many[:limit],
        TASK_LOGS_DROPPED,
    ]


def test_log_lines_posted_at_once_stop_at_the_limit(store: SqlRunStore) -> None:
    """Lines posted at the same moment to a task one short of the limit: one is kept,
    the marker is written once, the rest are not kept (each post reads the count and
    appends in its own transaction; on PostgreSQL two of them must not both read
    "one left")."""
    limit = MAX_TASK_LOG_ENTRIES
    store.upsert_task(task("t1"), T0)
    started = TaskUpdate(status=TaskStatus.IN_PROGRESS)
    assert store.update_task("t1", 1, started, T0, logs=[f"l{i}" for i in range(limit - 1)])
    for attempt in range(3):  # a race may go either way once: try it a few times
        race(8, lambda i, a=attempt: store.append_task_log("t1", f"late {a}.{i}", T0 + 1))
    logs = [entry.log for entry in store.list_task_logs("t1")]
    assert len(logs) == limit + 1
    assert logs[limit - 1].startswith("late 0.")
    assert logs[limit] == TASK_LOGS_DROPPED


def test_start_task_is_the_poll_bookkeeping(store: SqlRunStore) -> None:
    store.upsert_task(task("t1"), T0)
    started = store.start_task(
        "t1", 1, "wk1", lease_expires_at=T0 + 60_000, now=T0 + 10, sequence_number=7, queue_name="q"
    )
    assert started is not None
    assert (started.status, started.worker_id, started.start_time, started.poll_count) == (
        TaskStatus.IN_PROGRESS,
        "wk1",
        T0 + 10,
        1,
    )
    lease = store.get_lease("t1")
    assert lease is not None
    assert (lease.worker_id, lease.attempt, lease.sequence_number, lease.queue_name) == (
        "wk1",
        1,
        7,
        "q",
    )
    # another worker cannot start it while the lease is live; nothing is written
    assert store.start_task("t1", 1, "wk2", lease_expires_at=T0 + 90_000, now=T0 + 20) is None
    got = store.get_task("t1")
    assert got is not None and got.worker_id == "wk1" and got.poll_count == 1
    # callbackAfterSeconds: the lease is released, the message comes back, anyone may take it
    assert store.release_lease("t1", 1, "wk1")
    again = store.start_task(
        "t1", 1, "wk2", lease_expires_at=T0 + 90_000, now=T0 + 30, holder="token:team-a"
    )
    assert again is not None and again.worker_id == "wk2" and again.poll_count == 2
    # the attempt's start stays its first hand-out (Conductor's poll sets it once)
    assert (again.start_time, again.update_time) == (T0 + 10, T0 + 30)
    # the lease belongs to the holder (the authenticated principal), the row names the worker
    held = store.get_lease("t1")
    assert held is not None and held.worker_id == "token:team-a" and not held.released
    # stale: wrong attempt, missing task, terminal task
    assert store.start_task("t1", 2, "wk3", lease_expires_at=T0 + 1, now=T0) is None
    assert store.start_task("nope", 1, "wk3", lease_expires_at=T0 + 1, now=T0) is None
    store.update_task("t1", 1, TaskUpdate(status=TaskStatus.COMPLETED), T0 + 40)
    store.expire_lease("t1", 1, T0 + 40)
    assert store.start_task("t1", 1, "wk3", lease_expires_at=T0 + 1, now=T0 + 50) is None
    assert store.get_lease("t1", 2) is None


def test_start_task_under_concurrency_hands_out_once(store: SqlRunStore) -> None:
    for n in range(5):
        store.upsert_task(task(f"t{n}"), T0)
        results = race(
            THREADS,
            lambda i, n=n: store.start_task(  # type: ignore[misc]
                f"t{n}", 1, f"wk{i}", lease_expires_at=T0 + 60_000, now=T0
            ),
        )
        winners = [r for r in results if r is not None]
        assert len(winners) == 1
        got = store.get_task(f"t{n}")
        assert got is not None and got.worker_id == winners[0].worker_id and got.poll_count == 1


def test_hand_out_takes_a_slot_only_under_a_concurrency_limit(store: SqlRunStore) -> None:
    for n in range(4):
        store.upsert_task(task(f"t{n}", task_def_name="pdf"), T0)
    # no limit: handed out, no slot counted, the lease names none
    free = store.hand_out_task(
        "t0", 1, "wk", lease_expires_at=T0 + 60_000, now=T0, limits=TaskLimits(task_type="pdf")
    )
    assert free.task is not None and free.task.status == TaskStatus.IN_PROGRESS
    lease = store.get_lease("t0", 1)
    assert lease is not None and lease.slot is None
    assert store.concurrency_in_use("pdf") == 0
    # a limit of 2: two slots, then refused with nothing written
    limits = TaskLimits(task_type="pdf", concurrency_limit=2)
    for n in (1, 2):
        out = store.hand_out_task(
            f"t{n}", 1, "wk", lease_expires_at=T0 + 60_000, now=T0, sequence_number=n, limits=limits
        )
        assert out.task is not None and not out.limited
    assert store.concurrency_in_use("pdf") == 2
    refused = store.hand_out_task(
        "t3", 1, "wk", lease_expires_at=T0 + 60_000, now=T0, limits=limits
    )
    assert refused == HandOut(limited=True)
    row = store.get_task("t3")
    assert row is not None and row.status == TaskStatus.SCHEDULED and row.poll_count == 0
    assert store.get_lease("t3", 1) is None
    # a stale task is not limited: it is stale (the caller drops its message)
    assert store.hand_out_task("t9", 1, "wk", lease_expires_at=T0, now=T0, limits=limits) == (
        HandOut()
    )
    # releasing a lease frees the slot it holds, once
    lease = store.get_lease("t1", 1)
    assert lease is not None and lease.slot == "pdf"
    assert store.release_lease("t1", 1, "wk")
    assert not store.release_lease("t1", 1, "wk")
    assert store.concurrency_in_use("pdf") == 1
    assert store.release_lease("t0", 1)  # held no slot
    assert store.concurrency_in_use("pdf") == 1


def test_hand_out_takes_a_rate_token_or_nothing(store: SqlRunStore) -> None:
    for n in range(3):
        store.upsert_task(task(f"t{n}", task_def_name="pdf"), T0)
    limits = TaskLimits(
        task_type="pdf", concurrency_limit=5, rate_per_frequency=2, rate_frequency_seconds=60
    )
    for n in (0, 1):
        assert store.hand_out_task(
            f"t{n}", 1, "wk", lease_expires_at=T0 + 1000, now=T0, limits=limits
        ).task
    # the third is refused by the rate; the slot it would have taken is not kept
    assert store.hand_out_task(
        "t2", 1, "wk", lease_expires_at=T0 + 1000, now=T0, limits=limits
    ).limited
    assert store.concurrency_in_use("pdf") == 2
    assert store.hand_out_task(
        "t2", 1, "wk", lease_expires_at=T0 + 61_000, now=T0 + 60_000, limits=limits
    ).task


def test_hand_out_under_threads_never_exceeds_the_limit(store: SqlRunStore) -> None:
    for n in range(THREADS):
        store.upsert_task(task(f"t{n}", task_def_name="pdf"), T0)
    limits = TaskLimits(task_type="pdf", concurrency_limit=3)
    results = race(
        THREADS,
        lambda i: store.hand_out_task(
            f"t{i}", 1, f"wk{i}", lease_expires_at=T0 + 60_000, now=T0, limits=limits
        ),
    )
    assert sum(r.task is not None for r in results) == 3
    assert sum(r.limited for r in results) == THREADS - 3
    assert store.concurrency_in_use("pdf") == 3


def test_task_with_lease_is_the_current_attempts(store: SqlRunStore) -> None:
    assert store.get_task_with_lease("t1") == (None, None)
    store.upsert_task(task("t1"), T0)
    row, lease = store.get_task_with_lease("t1")
    assert row is not None and row.status == TaskStatus.SCHEDULED and lease is None
    store.start_task("t1", 1, "wk1", lease_expires_at=T0 + 100, now=T0, sequence_number=3)
    row, lease = store.get_task_with_lease("t1")
    assert row is not None and row.status == TaskStatus.IN_PROGRESS and row.worker_id == "wk1"
    assert lease == store.get_lease("t1", 1) and lease is not None and lease.sequence_number == 3
    store.upsert_task(task("t1", attempt=2), T0 + 1)
    row, lease = store.get_task_with_lease("t1")
    assert row is not None and row.attempt == 2 and lease is None


def test_finish_task_writes_the_result_and_releases_the_lease(store: SqlRunStore) -> None:
    store.upsert_task(task("t1", task_def_name="pdf"), T0)
    limits = TaskLimits(task_type="pdf", concurrency_limit=1)
    assert store.hand_out_task("t1", 1, "wk1", lease_expires_at=T0 + 100, now=T0, limits=limits)
    done = TaskUpdate(status=TaskStatus.COMPLETED, output_data={"a": 1}, worker_id="wk1")
    # another holder's name: the result applies, the lease of wk1 stays
    assert store.finish_task("t1", 1, done, T0 + 5, holder="wk2")
    lease = store.get_lease("t1", 1)
    assert lease is not None and not lease.released
    assert store.concurrency_in_use("pdf") == 1
    store.upsert_task(task("t2", task_def_name="pdf"), T0)
    store.release_lease("t1", 1)
    assert store.hand_out_task("t2", 1, "wk1", lease_expires_at=T0 + 100, now=T0, limits=limits)
    assert store.finish_task("t2", 1, done, T0 + 6, holder="wk1")
    lease = store.get_lease("t2", 1)
    assert lease is not None and lease.released
    assert store.concurrency_in_use("pdf") == 0
    row = store.get_task("t2")
    assert row is not None and row.status == TaskStatus.COMPLETED and row.output_data == {"a": 1}
    # a write that does not apply releases nothing
    store.upsert_task(task("t3"), T0)
    store.start_task("t3", 1, "wk1", lease_expires_at=T0 + 100, now=T0)
    assert not store.finish_task("t3", 2, done, T0 + 7, holder="wk1")
    lease = store.get_lease("t3", 1)
    assert lease is not None and not lease.released


def test_give_back_task_makes_a_held_attempt_scheduled_again(store: SqlRunStore) -> None:
    """A worker's IN_PROGRESS with callbackAfterSeconds: SCHEDULED again, with its output
    and logs, the lease (and concurrency slot) released; only from IN_PROGRESS at that
    attempt, so a row that ended or was never handed out is left as it is, and the
    engine's late record of SCHEDULED still cannot undo a hand-out."""
    store.upsert_task(task("t1", task_def_name="pdf"), T0)
    limits = TaskLimits(task_type="pdf", concurrency_limit=1)
    assert store.hand_out_task("t1", 1, "wk1", lease_expires_at=T0 + 100, now=T0, limits=limits)
    back = TaskUpdate(output_data={"page": 1}, callback_after_seconds=30)
    assert not store.give_back_task("t1", 2, back, T0 + 1, holder="wk1")
    assert store.give_back_task("t1", 1, back, T0 + 2, holder="wk1", logs=["page 1 done"])
    row, lease = store.get_task_with_lease("t1")
    assert row is not None and row.status == TaskStatus.SCHEDULED
    assert (row.output_data, row.callback_after_seconds, row.update_time) == (
        {"page": 1},
        30,
        T0 + 2,
    )
    assert lease is not None and lease.released
    assert store.concurrency_in_use("pdf") == 0
    assert [entry.log for entry in store.list_task_logs("t1")] == ["page 1 done"]
    # not held: nothing to give back
    assert not store.give_back_task("t1", 1, back, T0 + 3, holder="wk1")
    # handed out again, then ended: a give-back applies to neither an ended row nor a
    # never-handed-out one
    assert store.hand_out_task("t1", 1, "wk2", lease_expires_at=T0 + 200, now=T0 + 4, limits=limits)
    row = store.get_task("t1")
    assert row is not None and (row.status, row.worker_id) == (TaskStatus.IN_PROGRESS, "wk2")
    done = TaskUpdate(status=TaskStatus.COMPLETED, worker_id="wk2")
    assert store.finish_task("t1", 1, done, T0 + 5, holder="wk2")
    assert not store.give_back_task("t1", 1, back, T0 + 6, holder="wk2")
    store.upsert_task(task("t2"), T0)
    assert not store.give_back_task("t2", 1, back, T0 + 6, holder="wk1")
    # the monotonic rule stands for every other write: SCHEDULED does not undo a hand-out
    store.start_task("t2", 1, "wk1", lease_expires_at=T0 + 100, now=T0 + 7)
    assert not store.update_task("t2", 1, TaskUpdate(status=TaskStatus.SCHEDULED), T0 + 8)
    row = store.get_task("t2")
    assert row is not None and row.status == TaskStatus.IN_PROGRESS


def test_logs_come_with_the_update_that_applied_and_only_then(store: SqlRunStore) -> None:
    store.upsert_task(task("t1"), T0)
    store.start_task("t1", 1, "wk1", lease_expires_at=T0 + 100, now=T0)
    progress = TaskUpdate(status=TaskStatus.IN_PROGRESS, output_data={"page": 1})
    assert store.update_task("t1", 1, progress, T0 + 1, logs=["opened the PDF"])
    assert not store.update_task("t1", 2, progress, T0 + 2, logs=["not this attempt"])
    done = TaskUpdate(status=TaskStatus.COMPLETED, output_data={"pages": 3}, worker_id="wk1")
    assert not store.finish_task("t1", 2, done, T0 + 3, holder="wk1", logs=["nor this"])
    assert store.finish_task("t1", 1, done, T0 + 4, holder="wk1", logs=["page 2", "page 3"])
    # a repeated result of a task that ended applies nothing and adds no line
    assert not store.finish_task("t1", 1, done, T0 + 5, holder="wk1", logs=["page 2"])
    logs = store.list_task_logs("t1")
    assert [(entry.log, entry.created_time) for entry in logs] == [
        ("opened the PDF", T0 + 1),
        ("page 2", T0 + 4),
        ("page 3", T0 + 4),
    ]


def test_extend_lease_keeps_its_slot(store: SqlRunStore) -> None:
    store.upsert_task(task("t1", task_def_name="pdf"), T0)
    limits = TaskLimits(task_type="pdf", concurrency_limit=1)
    assert store.hand_out_task("t1", 1, "wk1", lease_expires_at=T0 + 100, now=T0, limits=limits)
    assert not store.extend_lease("t1", 1, "wk2", expires_at=T0 + 500, now=T0 + 50)
    assert store.extend_lease("t1", 1, "wk1", expires_at=T0 + 500, now=T0 + 50)
    lease = store.get_lease("t1", 1)
    assert lease is not None and (lease.expires_at, lease.acquired_at) == (T0 + 500, T0 + 50)
    assert lease.slot == "pdf" and store.concurrency_in_use("pdf") == 1
    assert store.release_lease("t1", 1, "wk1")
    assert not store.extend_lease("t1", 1, "wk1", expires_at=T0 + 900, now=T0 + 60)
    assert store.concurrency_in_use("pdf") == 0


def test_a_batch_is_one_transaction(store: SqlRunStore, store_url: str) -> None:
    other = SqlRunStore(store_url, migrate=False)
    try:
        with store.batch():
            store.upsert_task(task("t1"), T0)
            with store.batch():  # joins the enclosing batch
                store.update_task("t1", 1, TaskUpdate(status=TaskStatus.IN_PROGRESS), T0 + 1)
            row = store.get_task("t1")  # the batch reads its own writes
            assert row is not None and row.status == TaskStatus.IN_PROGRESS
            # a hand-out that finds the task stale inside a batch writes nothing
            assert store.hand_out_task("t1", 2, "wk", lease_expires_at=T0, now=T0).task is None
            # another store sees nothing of it yet (PostgreSQL; SQLite readers see the
            # last commit)
            assert other.get_task("t1") is None
        row = other.get_task("t1")
        assert row is not None and row.status == TaskStatus.IN_PROGRESS and row.poll_count == 0
        # a batch that raises writes nothing
        with pytest.raises(RuntimeError), store.batch():
            store.upsert_task(task("t2"), T0)
            raise RuntimeError("boom")
        assert store.get_task("t2") is None and other.get_task("t2") is None
    finally:
        other.close()


def test_a_hand_out_refused_in_a_batch_rolls_back_only_its_own_writes(
    store: SqlRunStore,
) -> None:
    """A hand-out marks the task started and takes a lease before a limit refuses it:
    inside a batch those writes are undone and the batch's other writes commit."""
    limits = TaskLimits(task_type="pdf", concurrency_limit=1)
    store.upsert_task(task("t0", task_def_name="pdf"), T0)
    assert store.hand_out_task("t0", 1, "wk", lease_expires_at=T0 + 60, now=T0, limits=limits).task
    with store.batch():
        store.upsert_task(task("t1", task_def_name="pdf"), T0 + 1)
        refused = store.hand_out_task(
            "t1", 1, "wk", lease_expires_at=T0 + 60, now=T0 + 2, limits=limits
        )
        assert refused == HandOut(limited=True)
        row = store.get_task("t1")  # inside the batch: the refused hand-out left nothing
        assert row is not None and row.status == TaskStatus.SCHEDULED and row.poll_count == 0
        store.update_task("t1", 1, TaskUpdate(callback_after_seconds=5), T0 + 3)
    row = store.get_task("t1")
    assert row is not None and row.status == TaskStatus.SCHEDULED and row.poll_count == 0
    assert row.callback_after_seconds == 5  # the batch's own writes committed
    assert store.get_lease("t1", 1) is None and store.concurrency_in_use("pdf") == 1


# --- pending starts ----------------------------------------------------------------


def start_of(workflow_id: str, **kw: Any) -> dict[str, Any]:
    """An orchestration input as the start path writes it (a RunInput in camelCase)."""
    return {"workflowId": workflow_id, "name": "wf", "version": 1, "input": kw}


def test_a_created_run_gets_its_pending_start(store: SqlRunStore) -> None:
    start = start_of("w1", text="héllo ✓", nested={"list": [1, 2.5, None, True]}, big="x" * 300_000)
    assert store.create_run(run("w1"), start=start).created
    assert store.pending_starts() == [
        PendingStart(workflow_id="w1", run_input=start, created_at=T0)
    ]
    assert store.has_pending_start("w1")
    # a run created without a start has none
    assert store.create_run(run("w2")).created
    assert not store.has_pending_start("w2") and not store.has_pending_start("missing")
    assert [p.workflow_id for p in store.pending_starts()] == ["w1"]


def test_a_pending_start_holds_its_json_as_the_run_input_does(store: SqlRunStore) -> None:
    """Nested objects, any Unicode text, integers past 64 bits and floats come back
    equal, and of their type, from the pending start and from the run's own input. A
    float written with an exponent whose value is whole (``6.02e23``) comes back as the
    same JSON number; PostgreSQL's JSONB keeps the number, not its spelling, so Python
    reads it there as an int."""
    value = {
        "nested": {"a": {"b": [1, {"c": None}, [True, False, {}], []]}},
        "text": ["héllo ✓", "\U0001f600 \u4e2d\u6587", 'quote " back \\ slash', "tab\tline\n"],
        "ints": [0, -1, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 + 7, -(10**30)],
        "floats": [0.1, -2.5, 1.5e-7, 3.141592653589793, 1e15 + 0.5, 1.0],
        "exponent": 6.02e23,
    }
    start = start_of("w1", **value)
    assert store.create_run(run("w1", input=value), start=start).created
    (pending,) = store.pending_starts()
    stored = store.get_run("w1")
    assert stored is not None
    for got in (pending.run_input["input"], stored.input):
        assert {k: v for k, v in got.items() if k != "exponent"} == {
            k: v for k, v in value.items() if k != "exponent"
        }
        assert [type(x) for x in got["ints"]] == [int] * len(value["ints"])
        assert [type(x) for x in got["floats"]] == [float] * len(value["floats"])
        assert Decimal(repr(got["exponent"])) == Decimal("6.02e23")
    assert pending.run_input == {**start, "input": {**value, "exponent": stored.input["exponent"]}}


def test_a_start_holding_a_lone_surrogate_is_stored_whole_or_not_at_all(
    store: SqlRunStore,
) -> None:
    """JSON text can spell a UTF-16 surrogate on its own (``"\\ud800"``); the API refuses
    such a body (control_plane/api/routing.py). Given one anyway, SQLite keeps it as JSON
    text does (escaped) and reads it back; PostgreSQL's JSONB cannot hold it and refuses
    it, whether in the run's input or only in its pending start, and then nothing of
    the start is written: never a run without its pending start."""
    odd = "a\ud800b"
    cases = {"both": (run("w1", input={"s": odd}), start_of("w1", s=odd))}
    cases["start"] = (run("w2", input={"s": "plain"}), start_of("w2", s=odd, n=2))
    for new_run, start in cases.values():
        if store.dialect == "sqlite":
            assert store.create_run(new_run, start=start).created
            stored = store.get_run(new_run.workflow_id)
            assert stored is not None and stored.input == new_run.input
        else:
            with pytest.raises(RunStoreRefused) as refused:
                store.create_run(new_run, start=start)
            assert odd not in str(refused.value)
            assert store.get_run(new_run.workflow_id) is None
    expected = [start for _, start in cases.values()] if store.dialect == "sqlite" else []
    assert [p.run_input for p in store.pending_starts()] == expected
    assert store.create_run(run("w3"), start=start_of("w3")).created  # the store goes on


def test_a_stored_run_can_be_given_a_pending_start(store: SqlRunStore) -> None:
    """``add_pending_start``: for a run whose scheduling ran out of time (the API keeps
    trying it); none for a run that is not there."""
    assert store.create_run(run("w1")).created
    assert store.add_pending_start("w1", start_of("w1", n=1), T0 + 7)
    assert store.pending_starts() == [
        PendingStart(workflow_id="w1", run_input=start_of("w1", n=1), created_at=T0 + 7)
    ]
    # given again, it replaces the first
    assert store.add_pending_start("w1", start_of("w1", n=2), T0 + 9)
    assert [p.run_input for p in store.pending_starts()] == [start_of("w1", n=2)]
    assert not store.add_pending_start("missing", start_of("missing"), T0)
    assert not store.has_pending_start("missing")
    # deleted with its run, as a pending start made with the run is
    store.delete_run("w1")
    assert store.pending_starts() == []


def test_a_run_that_existed_gets_no_pending_start(store: SqlRunStore) -> None:
    first = start_of("w1", n=1)
    assert store.create_run(run("w1", idempotency_key="k"), start=first).created
    # the same workflowId
    again = store.create_run(run("w1", create_time=T0 + 5), start=start_of("w1", n=2))
    assert not again.created
    # the same name and idempotency key, another id
    keyed = store.create_run(run("w2", idempotency_key="k"), start=start_of("w2"))
    assert keyed.workflow_id == "w1" and not keyed.created
    assert store.pending_starts() == [
        PendingStart(workflow_id="w1", run_input=first, created_at=T0)
    ]
    assert not store.has_pending_start("w2")


def test_concurrent_starts_with_one_key_leave_one_pending_start(store: SqlRunStore) -> None:
    results = race(
        THREADS,
        lambda i: store.create_run(run(f"w{i}", idempotency_key="same"), start=start_of(f"w{i}")),
    )
    created = [r.workflow_id for r in results if r.created]
    assert len(created) == 1
    pending = store.pending_starts()
    assert [p.workflow_id for p in pending] == created
    assert pending[0].run_input == start_of(created[0])


def test_starts_in_a_batch_are_pending_together_or_not_at_all(
    store: SqlRunStore, store_url: str
) -> None:
    other = SqlRunStore(store_url, migrate=False)
    try:
        with store.batch():
            for i in range(3):
                assert store.create_run(run(f"w{i}"), start=start_of(f"w{i}")).created
            assert store.has_pending_start("w2")  # the batch reads its own writes
            assert not other.has_pending_start("w0")  # committed at its end only
        assert [p.workflow_id for p in other.pending_starts()] == ["w0", "w1", "w2"]
        # a batch that raises after two starts leaves neither run nor pending start
        with pytest.raises(RuntimeError), store.batch():
            store.create_run(run("w3"), start=start_of("w3"))
            store.create_run(run("w4"), start=start_of("w4"))
            raise RuntimeError("boom")
        for workflow_id in ("w3", "w4"):
            assert store.get_run(workflow_id) is None
            assert not store.has_pending_start(workflow_id)
        assert len(other.pending_starts()) == 3
    finally:
        other.close()


def test_on_sqlite_a_start_is_one_more_statement_of_the_same_transaction(
    tmp_path: Path,
) -> None:
    """What a start costs the SQLite writer: creating a run with its pending start is
    one transaction, one statement more than without; a batch of starts is one
    transaction. (SQLite only: PostgreSQL's BEGIN is no statement to count.)"""
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    def cost(block: Callable[[], Any]) -> tuple[int, int]:
        seen.clear()
        block()
        return sum(s.startswith("BEGIN") for s in seen), len(seen)

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        plain = cost(lambda: store.create_run(run("w1")))
        started = cost(lambda: store.create_run(run("w2"), start=start_of("w2")))

        def batch() -> None:
            with store.batch():
                for i in range(3, 6):
                    store.create_run(run(f"w{i}"), start=start_of(f"w{i}"))

        batched = cost(batch)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
        store.close()
    assert plain[0] == started[0] == batched[0] == 1
    assert started[1] == plain[1] + 1
    assert batched[1] == plain[1] + 5  # two statements per start, one transaction


def test_delete_pending_starts_deletes_only_those_given(store: SqlRunStore) -> None:
    for i in range(5):
        store.create_run(run(f"w{i}"), start=start_of(f"w{i}"))
    assert store.delete_pending_starts([]) == 0
    assert store.delete_pending_starts(["w1", "w3", "missing", "w1"]) == 2
    assert [p.workflow_id for p in store.pending_starts()] == ["w0", "w2", "w4"]
    assert store.delete_pending_starts(["w1"]) == 0  # already gone
    # the runs stay: only their pending starts go
    assert store.get_run("w1") is not None and store.get_run("w3") is not None


def test_delete_pending_starts_of_a_large_batch(store: SqlRunStore) -> None:
    with store.batch():
        for i in range(300):
            store.create_run(run(f"w{i:03}"), start=start_of(f"w{i:03}"))
    gone = [f"w{i:03}" for i in range(300) if i % 7 != 0]
    assert store.delete_pending_starts(gone) == len(gone)
    left = [p.workflow_id for p in store.pending_starts(limit=1000)]
    assert left == [f"w{i:03}" for i in range(0, 300, 7)]


def test_pending_starts_oldest_first_and_limited(store: SqlRunStore) -> None:
    for workflow_id, created in [("b", T0 + 2), ("c", T0 + 1), ("a", T0 + 2), ("d", T0)]:
        store.create_run(run(workflow_id, create_time=created), start=start_of(workflow_id))
    assert [p.workflow_id for p in store.pending_starts()] == ["d", "c", "a", "b"]
    assert [p.created_at for p in store.pending_starts()] == [T0, T0 + 1, T0 + 2, T0 + 2]
    assert [p.workflow_id for p in store.pending_starts(limit=2)] == ["d", "c"]
    assert store.pending_starts(limit=0) == []


def test_delete_run_removes_its_pending_start(store: SqlRunStore) -> None:
    store.create_run(run("w1"), start=start_of("w1"))
    store.create_run(run("w2"), start=start_of("w2"))
    assert store.delete_run("w1")
    assert not store.has_pending_start("w1")
    assert [p.workflow_id for p in store.pending_starts()] == ["w2"]
    # a run created again under the id gets the new start
    assert store.create_run(run("w1", create_time=T0 + 9), start=start_of("w1", n=2)).created
    got = {p.workflow_id: p for p in store.pending_starts()}
    assert got["w1"].run_input == start_of("w1", n=2) and got["w1"].created_at == T0 + 9


# --- watches ---------------------------------------------------------------------


def test_a_watch_wakes_after_a_commit_to_its_run(store: SqlRunStore) -> None:
    store.create_run(run("w1"))
    store.create_run(run("w2"))
    with store.watch("w1") as watch:
        assert not watch.wait(0)  # nothing written since the watch began
        store.upsert_task(task("t1", workflow_id="w2"), T0)
        store.update_run("w2", RunUpdate(variables={"x": 1}), T0)
        assert not watch.wait(0)  # another run's writes
        store.upsert_task(task("t1b"), T0)  # a first task row
        assert watch.wait(0)
        assert not watch.wait(0)  # one wake per change
        store.update_task("t1b", 1, TaskUpdate(status=TaskStatus.IN_PROGRESS), T0 + 1)
        assert watch.wait(0)
        assert store.hand_out_task("t1b", 1, "wk", lease_expires_at=T0 + 9, now=T0 + 2).task
        assert watch.wait(0)
        store.update_run("w1", RunUpdate(status=RunStatus.TERMINATED), T0 + 3)
        assert watch.wait(0)


def test_a_watch_wakes_once_a_batch_committed_never_for_a_rollback(
    store: SqlRunStore,
) -> None:
    store.create_run(run("w1"))
    with store.watch("w1") as watch:
        with store.batch():
            store.upsert_task(task("t1"), T0)
            assert not watch.wait(0)  # not committed yet
        assert watch.wait(0)
        with pytest.raises(RuntimeError), store.batch():
            store.upsert_task(task("t2"), T0)
            raise RuntimeError("boom")
        assert not watch.wait(0)


def test_a_watch_wakes_a_reader_waiting_in_another_thread(store: SqlRunStore) -> None:
    store.create_run(run("w1"))
    with store.watch("w1") as watch:
        writer = threading.Thread(target=lambda: store.upsert_task(task("t1"), T0))
        writer.start()
        assert watch.wait(30)
        writer.join()
    assert [r.task_id for r in store.list_tasks("w1")] == ["t1"]


# --- definitions ---------------------------------------------------------------


def test_definitions(store: SqlRunStore) -> None:
    store.put_definition("wf", 1, {"name": "wf", "version": 1, "tasks": []}, T0)
    store.put_definition("wf", 3, {"name": "wf", "version": 3}, T0 + 1)
    store.put_definition("wf", 2, {"name": "wf", "version": 2}, T0 + 2)
    store.put_definition("other", 1, {"name": "other"}, T0)
    latest = store.get_definition("wf")
    assert latest is not None and latest.version == 3 and latest.definition["version"] == 3
    v1 = store.get_definition("wf", 1)
    assert v1 is not None and v1.definition == {"name": "wf", "version": 1, "tasks": []}
    store.put_definition("wf", 1, {"name": "wf", "version": 1, "x": 1}, T0 + 5)
    v1 = store.get_definition("wf", 1)
    assert v1 is not None and v1.definition["x"] == 1
    assert (v1.create_time, v1.update_time) == (T0, T0 + 5)
    assert [(d.name, d.version) for d in store.list_definitions()] == [
        ("other", 1),
        ("wf", 1),
        ("wf", 2),
        ("wf", 3),
    ]
    assert [d.version for d in store.list_definitions("wf")] == [1, 2, 3]
    assert [(d.name, d.version, d.create_time) for d in store.definition_versions()] == [
        ("other", 1, T0),
        ("wf", 1, T0),  # replaced at T0 + 5: created at T0
        ("wf", 2, T0 + 2),
        ("wf", 3, T0 + 1),
    ]
    assert store.delete_definition("wf", 3)
    assert not store.delete_definition("wf", 3)
    latest = store.get_definition("wf")
    assert latest is not None and latest.version == 2
    assert store.get_definition("missing") is None and store.get_definition("wf", 9) is None


def test_definition_stamp_names_the_registration_get_definition_returns(
    store: SqlRunStore,
) -> None:
    store.put_definition("wf", 1, {"name": "wf", "version": 1}, T0)
    store.put_definition("wf", 2, {"name": "wf", "version": 2}, T0 + 1)
    assert store.definition_stamp("wf") == (2, T0 + 1)
    assert store.definition_stamp("wf", 1) == (1, T0)
    store.put_definition("wf", 1, {"name": "wf", "version": 1, "x": 1}, T0 + 7)
    assert store.definition_stamp("wf", 1) == (1, T0 + 7)  # an overwrite moves the stamp
    assert store.definition_stamp("wf") == (2, T0 + 1)
    assert store.definition_stamp("missing") is None
    assert store.definition_stamp("wf", 9) is None


def test_task_definitions(store: SqlRunStore) -> None:
    store.put_task_def("parse_pdf", {"name": "parse_pdf", "retryCount": 2}, T0)
    store.put_task_def("a_task", {"name": "a_task"}, T0)
    store.put_task_def("parse_pdf", {"name": "parse_pdf", "retryCount": 5}, T0 + 1)
    got = store.get_task_def("parse_pdf")
    assert got is not None and got.definition["retryCount"] == 5
    assert (got.create_time, got.update_time) == (T0, T0 + 1)
    assert [t.name for t in store.list_task_defs()] == ["a_task", "parse_pdf"]
    assert store.delete_task_def("a_task") and not store.delete_task_def("a_task")
    assert store.get_task_def("a_task") is None


def test_instructions_are_versioned(store: SqlRunStore) -> None:
    store.put_instruction("triage", 1, "be brief", T0)
    store.put_instruction("triage", 2, "be briefer", T0 + 1)
    latest = store.get_instruction("triage")
    assert latest is not None and (latest.version, latest.text) == (2, "be briefer")
    v1 = store.get_instruction("triage", 1)
    assert v1 is not None and v1.text == "be brief"
    store.put_instruction("triage", 1, "replaced", T0 + 2)
    v1 = store.get_instruction("triage", 1)
    assert v1 is not None and v1.text == "replaced"
    assert store.get_instruction("none") is None


# --- poll data -----------------------------------------------------------------


def test_poll_data(store: SqlRunStore) -> None:
    store.record_poll("parse_pdf", None, "wk1", T0)
    store.record_poll("parse_pdf", None, "wk1", T0 + 5)
    store.record_poll("parse_pdf", None, "wk1", T0 + 2)  # late write never moves time back
    store.record_poll("parse_pdf", "east", "wk2", T0 + 3)
    store.record_poll("extract_excel", None, "wk3", T0 + 4)
    pdf = store.get_poll_data("parse_pdf")
    assert [(p.domain, p.worker_id, p.last_poll_time) for p in pdf] == [
        (None, "wk1", T0 + 5),
        ("east", "wk2", T0 + 3),
    ]
    assert [(p.task_type, p.worker_id) for p in store.get_all_poll_data()] == [
        ("extract_excel", "wk3"),
        ("parse_pdf", "wk1"),
        ("parse_pdf", "wk2"),
    ]
    assert store.get_poll_data("nothing") == []


# --- leases ----------------------------------------------------------------------


def test_lease_lifecycle(store: SqlRunStore) -> None:
    store.upsert_task(task("t1"), T0)
    assert store.acquire_lease(
        "t1", 1, "wk1", expires_at=T0 + 100, now=T0, sequence_number=42, queue_name="parse_pdf"
    )
    assert not store.acquire_lease("t1", 1, "wk2", expires_at=T0 + 200, now=T0 + 50)
    assert not store.acquire_lease("t1", 1, "wk1", expires_at=T0 + 200, now=T0 + 50)
    assert store.is_lease_holder("t1", "wk1")
    assert store.is_lease_holder("t1", "wk1", attempt=1, now=T0 + 99)
    assert not store.is_lease_holder("t1", "wk1", now=T0 + 100)  # expired
    assert not store.is_lease_holder("t1", "wk1", attempt=2)
    assert not store.is_lease_holder("t1", "wk2")
    # an expired lease can be taken over; the old holder no longer holds it
    assert store.acquire_lease("t1", 1, "wk2", expires_at=T0 + 300, now=T0 + 100)
    assert store.is_lease_holder("t1", "wk2") and not store.is_lease_holder("t1", "wk1")
    lease = store.get_lease("t1", 1)
    assert lease is not None
    assert (lease.worker_id, lease.expires_at, lease.acquired_at) == ("wk2", T0 + 300, T0 + 100)
    # release: only by the holder (when named), then free for anyone
    assert not store.release_lease("t1", 1, "wk1")
    assert store.release_lease("t1", 1, "wk2")
    assert not store.release_lease("t1", 1, "wk2")
    assert not store.is_lease_holder("t1", "wk2")
    assert store.acquire_lease("t1", 1, "wk3", expires_at=T0 + 400, now=T0 + 150)
    # expire: makes it available at once
    assert store.expire_lease("t1", 1, T0 + 160)
    assert store.acquire_lease("t1", 1, "wk4", expires_at=T0 + 500, now=T0 + 160)


def test_lease_holder_is_about_the_current_attempt(store: SqlRunStore) -> None:
    store.upsert_task(task("t1"), T0)
    assert store.acquire_lease("t1", 1, "wk1", expires_at=T0 + 10_000, now=T0)
    store.update_task("t1", 1, TaskUpdate(status=TaskStatus.TIMED_OUT), T0 + 1)
    assert store.is_lease_holder("t1", "wk1")  # still attempt 1
    store.upsert_task(task("t1", attempt=2), T0 + 2)
    assert not store.is_lease_holder("t1", "wk1")  # stale attempt
    assert store.get_lease("t1") is None  # no lease yet for the current attempt
    lease1 = store.get_lease("t1", 1)
    assert lease1 is not None and lease1.worker_id == "wk1"
    assert store.acquire_lease("t1", 2, "wk2", expires_at=T0 + 10_000, now=T0 + 3)
    current = store.get_lease("t1")
    assert current is not None and (current.attempt, current.worker_id) == (2, "wk2")
    assert store.is_lease_holder("t1", "wk2", attempt=2)
    assert not store.is_lease_holder("missing", "wk2")


def test_lease_acquire_is_atomic(store: SqlRunStore) -> None:
    for n in range(10):
        results = race(
            THREADS,
            lambda i, n=n: store.acquire_lease(  # type: ignore[misc]
                f"t{n}", 1, f"wk{i}", expires_at=T0 + 1000, now=T0
            ),
        )
        assert sum(results) == 1
        lease = store.get_lease(f"t{n}", 1)
        assert lease is not None and lease.worker_id == f"wk{results.index(True)}"


def test_lease_takeover_after_expiry_is_atomic(store: SqlRunStore) -> None:
    assert store.acquire_lease("t1", 1, "old", expires_at=T0 + 10, now=T0)
    results = race(
        THREADS,
        lambda i: store.acquire_lease("t1", 1, f"wk{i}", expires_at=T0 + 1000, now=T0 + 20),
    )
    assert sum(results) == 1


def _handed_out(
    store: SqlRunStore,
    task_id: str,
    *,
    workflow_id: str = "w1",
    attempt: int = 1,
    sequence_number: int | None = 7,
    now: int = T0,
) -> None:
    """The row of an attempt handed out by the Task API at ``now``: IN_PROGRESS, with a
    lease naming its deferred message ``sequence_number`` on queue ``parse_pdf``."""
    store.upsert_task(task(task_id, workflow_id=workflow_id, attempt=attempt), now)
    handed = store.hand_out_task(
        task_id,
        attempt,
        "wk",
        lease_expires_at=now + 60_000,
        now=now,
        sequence_number=sequence_number,
        queue_name="parse_pdf",
    )
    assert handed.task is not None


def _ended(
    store: SqlRunStore, task_id: str, status: TaskStatus, now: int, attempt: int = 1
) -> None:
    applied = store.finish_task(
        task_id,
        attempt,
        TaskUpdate(status=status, reason_for_incompletion=f"{task_id} {status.value}"),
        now,
        holder="wk",
    )
    assert applied


def test_unsettled_attempts_are_the_ended_ones_whose_message_may_be_deferred(
    store: SqlRunStore,
) -> None:
    """What the sweep of deferred messages is given: attempts that are over (and whose
    end is decided), with a message not marked settled; never one still live, nor a
    failure the engine has not decided on (a retry may come)."""
    store.create_run(run("w1"))  # running
    store.create_run(run("w2"))
    store.update_run("w2", RunUpdate(status=RunStatus.FAILED), T0 + 1)
    t = T0 + 10
    ended = {
        "done": TaskStatus.COMPLETED,
        "optional": TaskStatus.FAILED,  # then the engine's verdict, below
        "canceled": TaskStatus.CANCELED,
        "retried": TaskStatus.FAILED,
        "undecided": TaskStatus.FAILED,  # of the running run w1, not retried (yet)
        "timed_out": TaskStatus.TIMED_OUT,  # of w1 too
    }
    for n, (task_id, status) in enumerate(ended.items()):
        _handed_out(store, task_id, sequence_number=n + 1, now=t + n)
        _ended(store, task_id, status, t + 20)
    optional = TaskUpdate(status=TaskStatus.COMPLETED_WITH_ERRORS)
    assert store.update_task("optional", 1, optional, t + 20)
    assert store.mark_retried("retried", t + 20)
    # a failure of a run that is over (FAILED), and one of a run that is gone
    _handed_out(store, "final", workflow_id="w2", sequence_number=20, now=t + 30)
    _ended(store, "final", TaskStatus.FAILED_WITH_TERMINAL_ERROR, t + 40)
    _handed_out(store, "orphan", workflow_id="gone", sequence_number=21, now=t + 31)
    _ended(store, "orphan", TaskStatus.FAILED, t + 40)
    # replaced by a later attempt of the same row
    _handed_out(store, "replaced", sequence_number=22, now=t + 32)
    store.upsert_task(task("replaced", attempt=2), t + 40)
    # live: handed out; asked for a callback (its lease released, its message requeued)
    _handed_out(store, "live", sequence_number=23, now=t + 33)
    _handed_out(store, "callback", sequence_number=24, now=t + 34)
    callback = TaskUpdate(status=TaskStatus.IN_PROGRESS, callback_after_seconds=30)
    assert store.finish_task("callback", 1, callback, t + 40, holder="wk")
    # no deferred message: posted before any poll (the lease names none)
    store.upsert_task(task("unpolled"), t)
    assert store.start_task("unpolled", 1, "wk", lease_expires_at=t + 60_000, now=t + 35)
    _ended(store, "unpolled", TaskStatus.COMPLETED, t + 40)
    # settled already
    _handed_out(store, "settled", sequence_number=25, now=t + 36)
    _ended(store, "settled", TaskStatus.COMPLETED, t + 40)
    assert store.mark_settled("settled", 1, 25, t + 41)

    listed = store.unsettled_attempts(t + 50)
    assert [(e.lease.task_id, e.lease.sequence_number) for e in listed] == [
        ("done", 1),
        ("optional", 2),
        ("canceled", 3),
        ("retried", 4),
        ("final", 20),
        ("orphan", 21),
        ("replaced", 22),
    ]
    by_id = {e.lease.task_id: e for e in listed}
    assert (by_id["retried"].status, by_id["retried"].retried) == (TaskStatus.FAILED, True)
    assert by_id["final"].status == TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert by_id["final"].reason_for_incompletion == "final FAILED_WITH_TERMINAL_ERROR"
    assert (by_id["replaced"].lease.attempt, by_id["replaced"].row_attempt) == (1, 2)
    assert by_id["done"].lease.queue_name == "parse_pdf"

    # the engine decides: the run ends (the failures of w1 are final now)
    store.update_run("w1", RunUpdate(status=RunStatus.FAILED), t + 60)
    later = [e.lease.task_id for e in store.unsettled_attempts(t + 60)]
    assert later == [
        "done", "optional", "canceled", "retried", "undecided", "timed_out",
        "final", "orphan", "replaced",
    ]  # fmt: skip
    # a live attempt never is, however old
    assert "live" not in later and "callback" not in later


def test_unsettled_attempts_wait_out_the_grace_and_come_in_batches(store: SqlRunStore) -> None:
    """Only attempts whose lease was taken and whose row was last written at ``before`` or
    earlier; in lease order, ``limit`` at a time, each batch after the last one's key."""
    for n in range(5):
        _handed_out(store, f"t{n}", sequence_number=n, now=T0 + n)
        _ended(store, f"t{n}", TaskStatus.COMPLETED, T0 + 100 + n)
    assert store.unsettled_attempts(T0 + 99) == []  # none ended yet at that time
    assert [e.lease.task_id for e in store.unsettled_attempts(T0 + 102)] == ["t0", "t1", "t2"]
    first = store.unsettled_attempts(T0 + 200, limit=2)
    assert [e.lease.task_id for e in first] == ["t0", "t1"]
    second = store.unsettled_attempts(T0 + 200, limit=2, after=first[-1].key)
    assert [e.lease.task_id for e in second] == ["t2", "t3"]
    third = store.unsettled_attempts(T0 + 200, limit=2, after=second[-1].key)
    assert [e.lease.task_id for e in third] == ["t4"]
    assert store.unsettled_attempts(T0 + 200, limit=2, after=third[-1].key) == []
    assert store.unsettled_attempts(T0 + 200, limit=0) == []


def test_mark_settled_records_the_message_the_lease_names_once(store: SqlRunStore) -> None:
    _handed_out(store, "t1", sequence_number=7)
    assert not store.mark_settled("t1", 1, 8, T0 + 5)  # another message
    assert not store.mark_settled("t1", 2, 7, T0 + 5)  # another attempt
    assert store.mark_settled("t1", 1, 7, T0 + 5)
    assert not store.mark_settled("t1", 1, 7, T0 + 9)  # once: the first time stays
    lease = store.get_lease("t1", 1)
    assert lease is not None and lease.settled_at == T0 + 5
    _, current = store.get_task_with_lease("t1")
    assert current is not None and current.settled_at == T0 + 5
    # a hand-out that takes the lease again has a new message, not settled
    assert store.release_lease("t1", 1)
    again = store.hand_out_task(
        "t1", 1, "wk2", lease_expires_at=T0 + 90_000, now=T0 + 10, sequence_number=9,
        queue_name="parse_pdf",
    )  # fmt: skip
    assert again.task is not None
    lease = store.get_lease("t1", 1)
    assert lease is not None and (lease.sequence_number, lease.settled_at) == (9, None)


def test_marks_made_later_are_never_listed_and_are_written_by_close(store_url: str) -> None:
    """``mark_settled_later`` (the Task API's results): such a mark is not in a
    transaction of its own, yet the sweep's next query does not list its attempt, and a
    store closed with marks still kept writes them."""
    first = SqlRunStore(store_url)
    try:
        for n, task_id in enumerate(("a", "b", "c")):
            _handed_out(first, task_id, sequence_number=n + 1, now=T0 + n)
            _ended(first, task_id, TaskStatus.COMPLETED, T0 + 10)
        first.mark_settled_later("a", 1, 1, T0 + 11)
        first.mark_settled_later("b", 1, 99, T0 + 11)  # another message: no mark
        assert [e.lease.task_id for e in first.unsettled_attempts(T0 + 20)] == ["b", "c"]
        first.mark_settled_later("c", 1, 3, T0 + 12)
    finally:
        first.close()
    reopened = SqlRunStore(store_url)
    try:
        settled = {t: getattr(reopened.get_lease(t, 1), "settled_at", "?") for t in "abc"}
        assert settled == {"a": T0 + 11, "b": None, "c": T0 + 12}
        # in a batch, the mark is written with the batch
        _handed_out(reopened, "d", sequence_number=4, now=T0 + 30)
        with reopened.batch():
            reopened.mark_settled_later("d", 1, 4, T0 + 31)
        lease = reopened.get_lease("d", 1)
        assert lease is not None and lease.settled_at == T0 + 31
    finally:
        reopened.close()


def test_unsettled_attempts_read_only_the_index_of_unsettled_leases(store: SqlRunStore) -> None:
    """The query the sweep makes every round, planned by the database: a range of the
    partial index of the leases not marked settled, the task and run rows by their keys
    (however many settled leases the store keeps)."""
    _handed_out(store, "t1")
    _ended(store, "t1", TaskStatus.COMPLETED, T0 + 1)
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if "FROM leases JOIN tasks" in statement:
            # SQLite's statements run on the driver's cursor with a list of values
            values = tuple(parameters) if isinstance(parameters, list) else parameters
            seen.append((statement, values))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        first = store.unsettled_attempts(T0 + 10, limit=1)
        store.unsettled_attempts(T0 + 10, limit=1, after=first[-1].key)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert len(seen) == 2
    for statement, parameters in seen:
        with store.engine.connect() as conn:
            if store.dialect == "postgresql":
                conn.exec_driver_sql("SET enable_seqscan = off")
                prefix = "EXPLAIN "
            else:
                prefix = "EXPLAIN QUERY PLAN "
            plan = " ".join(
                str(row[-1]) for row in conn.exec_driver_sql(prefix + statement, parameters)
            )
        assert "ix_leases_unsettled" in plan, plan
        assert "SCAN leases" not in plan and "Seq Scan on leases" not in plan, plan


# --- limits -----------------------------------------------------------------------


def test_concurrency_limit_counts(store: SqlRunStore) -> None:
    assert [store.try_acquire_concurrency("a", 3) for _ in range(4)] == [True, True, True, False]
    assert store.concurrency_in_use("a") == 3
    assert store.try_acquire_concurrency("b", 1)  # per type
    store.release_concurrency("a")
    assert store.try_acquire_concurrency("a", 3)
    assert not store.try_acquire_concurrency("a", 3)
    assert not store.try_acquire_concurrency("a", 2)  # a lowered limit is honoured
    for _ in range(10):
        store.release_concurrency("a")
    assert store.concurrency_in_use("a") == 0  # never below zero
    assert all(store.try_acquire_concurrency("c", 0) for _ in range(20))  # 0 = unlimited
    assert store.concurrency_in_use("c") == 20
    assert store.concurrency_in_use("never") == 0


def test_concurrency_limit_never_exceeded_under_threads(store: SqlRunStore) -> None:
    limit = 3
    lock = threading.Lock()
    holding = 0
    peak = 0
    grants = 0

    def worker(_: int) -> None:
        nonlocal holding, peak, grants
        for _ in range(15):
            if store.try_acquire_concurrency("parse_pdf", limit):
                with lock:
                    holding += 1
                    grants += 1
                    peak = max(peak, holding)
                time.sleep(0.002)
                with lock:
                    holding -= 1
                store.release_concurrency("parse_pdf")

    race(THREADS, worker)
    assert 1 <= peak <= limit
    assert grants >= limit
    assert store.concurrency_in_use("parse_pdf") == 0


def test_concurrency_acquire_burst_grants_exactly_the_limit(store: SqlRunStore) -> None:
    results = race(THREADS, lambda _: store.try_acquire_concurrency("x", 5))
    assert sum(results) == 5
    assert store.concurrency_in_use("x") == 5


def test_rate_limit_fixed_window(store: SqlRunStore) -> None:
    w0 = T0 - T0 % 60_000  # windows are aligned to the epoch
    now = w0 + 5_000
    granted = race(
        THREADS, lambda _: sum(store.try_acquire_rate("r", 5, 60, now) for _ in range(4))
    )
    assert sum(granted) == 5
    assert not store.try_acquire_rate("r", 5, 60, now + 50_000)  # same window
    assert store.try_acquire_rate("other", 5, 60, now)  # per type
    # next window: fresh budget
    later = w0 + 60_000
    assert [store.try_acquire_rate("r", 5, 60, later) for _ in range(6)] == [True] * 5 + [False]
    # a caller with a lagging clock counts against the current window
    assert not store.try_acquire_rate("r", 5, 60, now)
    # unlimited
    assert all(store.try_acquire_rate("r", 0, 60, later) for _ in range(10))


def test_rate_limit_never_exceeded_across_windows(store: SqlRunStore) -> None:
    per, freq = 3, 1
    ticks = [T0 + ms for ms in range(0, 4000, 250)]  # 4 windows, 4 ticks each
    grants: dict[int, int] = {}
    lock = threading.Lock()
    tick = threading.Barrier(THREADS)

    def worker(_: int) -> None:
        for now in ticks:
            tick.wait()  # every thread on the same clock tick
            if store.try_acquire_rate("r", per, freq, now):
                with lock:
                    grants[now // 1000] = grants.get(now // 1000, 0) + 1

    race(THREADS, worker)
    assert grants == {T0 // 1000 + w: per for w in range(4)}


# --- outages ---------------------------------------------------------------------


def _waiting_briefly(store_url: str) -> str:
    """``store_url`` whose store waits at most 0.2 s for a lock another connection holds
    (SQLite: the busy timeout; PostgreSQL: ``lock_timeout``)."""
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        url = url.update_query_dict({"timeout": "0.2"})
    else:
        options = str(url.query.get("options") or "")
        url = url.update_query_dict({"options": f"{options} -clock_timeout=200".strip()})
    return url.render_as_string(hide_password=False)


@contextmanager
def _write_locked(store_url: str) -> Iterator[None]:
    """Another connection holds the lock every write of runs needs (SQLite: the file's,
    by ``BEGIN EXCLUSIVE``; PostgreSQL: the ``runs`` table's)."""
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        lock = sqlite3.connect(str(url.database), isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            lock.execute("COMMIT")
            lock.close()
        return
    engine = sa.create_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE"))
            yield
    finally:
        engine.dispose()


def test_a_write_meeting_a_locked_database_raises_unavailable_and_writes_nothing(
    store_url: str,
) -> None:
    store = SqlRunStore(_waiting_briefly(store_url))
    try:
        store.create_run(run("before"))
        with _write_locked(store_url):
            with pytest.raises(RunStoreUnavailable) as caught:
                store.create_run(run("w1", input={"card": "4111-1111"}))
            with pytest.raises(RunStoreUnavailable), store.batch():
                store.create_run(run("w2"), start={"workflowId": "w2"})
        assert str(caught.value).startswith("run store unavailable: ")
        assert caught.value.reason in (
            "database is locked",  # SQLite
            "a lock of the database was not available in time",  # PostgreSQL
        )
        # the driver's error, not SQLAlchemy's (whose message holds the parameters)
        cause = caught.value.__cause__
        assert cause is not None and not isinstance(cause, sa.exc.SQLAlchemyError)
        assert "4111" not in str(caught.value) + caught.value.detail + str(cause)
        assert store.get_run("w1") is None and store.get_run("w2") is None
        assert store.pending_starts() == []
        # the lock is gone: the same calls succeed
        assert store.create_run(run("w1")).created
        with store.batch():
            assert store.create_run(run("w2"), start={"workflowId": "w2"}).created
        assert store.get_run("before") is not None
    finally:
        store.close()


def test_an_integrity_error_is_no_outage(store: SqlRunStore) -> None:
    """A write the database refuses is refused, not an outage, and writes nothing."""
    with pytest.raises(RunStoreRefused, match=r"(?i)not.null"):
        store.append_task_log("t1", None, T0)  # type: ignore[arg-type]  # NOT NULL
    with pytest.raises(RunStoreRefused), store.batch():
        store.append_task_log("t1", "kept?", T0)
        store.append_task_log("t1", None, T0)  # type: ignore[arg-type]
    assert store.list_task_logs("t1") == []


def test_a_refused_write_does_not_quote_its_values(store: SqlRunStore) -> None:
    """An error's message reaches logs, error bodies and task reasons: it names what the
    database refused, never the values it carried nor the row PostgreSQL quotes (runs'
    inputs and outputs); neither does an error it is chained to."""
    secret = "a-payload-7f3c9e"
    with pytest.raises(RunStoreRefused) as raised:
        store.append_task_log(secret, None, T0)  # type: ignore[arg-type]  # NOT NULL
    assert secret not in str(raised.value) and "task_logs" in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
