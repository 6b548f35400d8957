"""SQL adapter of the run store port: SQLite (embedded) and PostgreSQL (Azure).

``SqlRunStore(url)`` accepts ``sqlite:///path/to/file.db`` and
``postgresql+psycopg://...``. Opening it applies the Alembic migrations in
``engine/adapters/run_store_migrations`` (``upgrade head``), the same history for both databases.

Concurrency
-----------
* SQLite runs in WAL mode with a busy timeout (a writer waits for another
  process's write lock with short sleeps of its own: ``engine/adapters/sqlite_busy.py``);
  every write transaction starts with ``BEGIN IMMEDIATE`` (the driver's own
  transaction handling is switched off), so writers across threads and processes
  are serialised and a read-then-write inside one transaction is atomic. Reads use
  a plain ``BEGIN``. Each thread keeps one connection, and a transaction is
  ``BEGIN`` / ``COMMIT`` on its driver connection, not a SQLAlchemy pool checkout
  and transaction (``engine/adapters/sqlite_transactions.py``).
* PostgreSQL connections open within ``PG_CONNECT_TIMEOUT_SECONDS`` and wait for a
  lock at most ``PG_LOCK_TIMEOUT_SECONDS`` (unless the URL or the server says
  otherwise): past either, the call is an outage, not a thread held for good.
* PostgreSQL runs at READ COMMITTED; every atomic operation is a single
  statement (``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` or a conditional
  ``UPDATE``), whose row lock makes concurrent callers queue and re-check the
  condition against the committed row.
* Monotonic status rules are in the WHERE clauses, so a write that is not
  allowed changes nothing and the method returns False.

Every public method is one transaction; most are one statement.

Outages
-------
Every statement runs inside ``_begin`` (a write transaction or a batch) or ``_read``.
There, a database error that is an outage (``engine/adapters/database_outages.py``: a
lock held past the busy timeout, a connection refused or lost ...) becomes the port's
``RunStoreUnavailable``, chained to the driver's error rather than SQLAlchemy's (whose
message holds the statement's parameters). Every other error is raised as it is.

Statements
----------
The statements of the hot paths (task rows, hand-out, leases, poll data, run rows)
are built once per store and per shape (``_stmt``) with bind parameters, so a call
costs the execution, not the building of a statement and its cache key. On SQLite
they are also compiled once per set of parameter names and run on the driver's cursor
(``_exec``, ``_Prepared``): SQLAlchemy's per-call work (parameter processing, result
metadata) cost more than SQLite's own. Their status lists are written into the SQL
(``_one_of``) so that no parameter list is expanded per call. PostgreSQL runs them
through SQLAlchemy.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, NoReturn

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import RowMapping, make_url

from engine.adapters.database_outages import outage_of, refusal_of
from engine.adapters.run_watches import RunWatches
from engine.adapters.sqlite_transactions import SqliteTransactions, sqlite_engine
from engine.language.definitions import RunStatus, TaskStatus
from engine.ports.run_store import (
    MAX_TASK_LOG_ENTRIES,
    RUN_ACTIVE,
    RUN_TERMINAL,
    TASK_LOGS_DROPPED,
    TASK_SUCCEEDED,
    CreateRunResult,
    DefinitionRecord,
    DefinitionVersion,
    EndedAttempt,
    HandOut,
    InstructionRecord,
    KeptStep,
    Lease,
    NewRun,
    PendingStart,
    PollData,
    RunQuery,
    RunRecord,
    RunStoreRefused,
    RunStoreUnavailable,
    RunUpdate,
    RunWatch,
    SearchResult,
    TaskDefRecord,
    TaskLimits,
    TaskLog,
    TaskRecord,
    TaskUpdate,
)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "run_store_migrations"

#: how long a connection to PostgreSQL may take to open (libpq's ``connect_timeout``),
#: unless the URL says otherwise: a server that does not answer (a dropped network path,
#: a host that accepts and stays silent) is an outage after this long, not a thread held
#: for the operating system's TCP timeouts (minutes)
PG_CONNECT_TIMEOUT_SECONDS = 10

#: how long a statement may wait for a row or table lock on PostgreSQL (its
#: ``lock_timeout``), unless the URL's ``options`` or the server (a role's or the
#: database's setting) sets one: a transaction left open elsewhere (a stuck process, an
#: operator's session) fails the calls that wait for it as unavailable after this long,
#: instead of holding their threads (or the Task API's event loop) for good
PG_LOCK_TIMEOUT_SECONDS = 10

# --- table metadata (must match run_store_migrations/; the contract suite checks it) ---


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


_ID = sa.String(255)
metadata = sa.MetaData()

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("workflow_id", _ID, primary_key=True),
    sa.Column("name", _ID, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("input", _json()),
    sa.Column("input_ref", sa.Text),
    sa.Column("output", _json()),
    sa.Column("output_ref", sa.Text),
    sa.Column("variables", _json()),
    sa.Column("correlation_id", _ID),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("task_to_domain", _json()),
    sa.Column("idempotency_key", _ID),
    sa.Column("parent_workflow_id", _ID),
    sa.Column("parent_task_id", _ID),
    sa.Column("reason_for_incompletion", sa.Text),
    sa.Column("failed_reference_task_names", _json()),
    sa.Column("create_time", sa.BigInteger, nullable=False),
    sa.Column("update_time", sa.BigInteger, nullable=False),
    sa.Column("end_time", sa.BigInteger),
    sa.Column("last_retried_time", sa.BigInteger),
    sa.Column("definition_ref", sa.Text),
    sa.Column("generation", sa.String(64)),
)

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("task_id", _ID, primary_key=True),
    sa.Column("workflow_id", _ID, nullable=False),
    sa.Column("reference_task_name", _ID, nullable=False),
    sa.Column("task_type", _ID, nullable=False),
    sa.Column("task_def_name", _ID),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("retry_count", sa.Integer, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("input_data", _json()),
    sa.Column("input_ref", sa.Text),
    sa.Column("output_data", _json()),
    sa.Column("output_ref", sa.Text),
    sa.Column("reason_for_incompletion", sa.Text),
    sa.Column("scheduled_time", sa.BigInteger),
    sa.Column("start_time", sa.BigInteger),
    sa.Column("end_time", sa.BigInteger),
    sa.Column("update_time", sa.BigInteger),
    sa.Column("worker_id", _ID),
    sa.Column("poll_count", sa.Integer, nullable=False),
    sa.Column("callback_after_seconds", sa.Integer, nullable=False),
    sa.Column("domain", _ID),
    sa.Column("queue_name", _ID),
    sa.Column("iteration", sa.Integer, nullable=False),
    sa.Column("retried_task_id", _ID),
    sa.Column("retried", sa.Boolean),
)

task_logs = sa.Table(
    "task_logs",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("task_id", _ID, nullable=False),
    sa.Column("log", sa.Text, nullable=False),
    sa.Column("created_time", sa.BigInteger, nullable=False),
)

definitions = sa.Table(
    "definitions",
    metadata,
    sa.Column("name", _ID, primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("definition", _json(), nullable=False),
    sa.Column("create_time", sa.BigInteger, nullable=False),
    sa.Column("update_time", sa.BigInteger, nullable=False),
)

task_defs = sa.Table(
    "task_defs",
    metadata,
    sa.Column("name", _ID, primary_key=True),
    sa.Column("definition", _json(), nullable=False),
    sa.Column("create_time", sa.BigInteger, nullable=False),
    sa.Column("update_time", sa.BigInteger, nullable=False),
)

instructions = sa.Table(
    "instructions",
    metadata,
    sa.Column("name", _ID, primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("create_time", sa.BigInteger, nullable=False),
)

poll_data = sa.Table(
    "poll_data",
    metadata,
    sa.Column("task_type", _ID, primary_key=True),
    sa.Column("domain", _ID, primary_key=True),
    sa.Column("worker_id", _ID, primary_key=True),
    sa.Column("last_poll_time", sa.BigInteger, nullable=False),
)

leases = sa.Table(
    "leases",
    metadata,
    sa.Column("task_id", _ID, primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("worker_id", _ID, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("acquired_at", sa.BigInteger, nullable=False),
    sa.Column("sequence_number", sa.BigInteger),
    sa.Column("queue_name", _ID),
    sa.Column("released", sa.Boolean, nullable=False),
    sa.Column("slot", _ID),
    sa.Column("settled_at", sa.BigInteger),
)

concurrency_counters = sa.Table(
    "concurrency_counters",
    metadata,
    sa.Column("task_type", _ID, primary_key=True),
    sa.Column("in_use", sa.Integer, nullable=False),
)

rate_windows = sa.Table(
    "rate_windows",
    metadata,
    sa.Column("task_type", _ID, primary_key=True),
    sa.Column("window_start", sa.BigInteger, nullable=False),
    sa.Column("granted", sa.Integer, nullable=False),
)

#: the orchestration input of a run whose start was answered, until the orchestration is
#: scheduled (``create_run`` with ``start``)
run_starts = sa.Table(
    "run_starts",
    metadata,
    sa.Column("workflow_id", _ID, primary_key=True),
    sa.Column("run_input", _json(), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

step_results = sa.Table(
    "step_results",
    metadata,
    sa.Column("workflow_id", _ID, primary_key=True),
    sa.Column("task_id", _ID, primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("execution", sa.Integer, nullable=False),
    sa.Column("result", _json(), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

_NO_DOMAIN = ""

#: ``delete_pending_starts`` deletes at most this many ids per statement; a statement is
#: prepared per power of two up to it (ids padded by repeating one), so a few shapes serve
#: every batch size
_DELETE_CHUNK = 128

#: settled messages marked by ``mark_settled_later`` are written together at most this
#: long after the first of them (one transaction, not one a result)
_MARKS_DELAY_SECONDS = 0.1

_log = logging.getLogger(__name__)


#: the first key of the PostgreSQL advisory lock that serialises the log appends of one
#: task (the second is the hash of its id): each reads the count of its task's entries
#: before it inserts, and two that read "one left" at once would both append
_PG_TASK_LOG_LOCK = 0x5357_4C47  # "SWLG"

#: the errors ``_raise_as_port_error`` sorts: SQLAlchemy's, and the SQLite driver's (statements
#: run on its cursor, ``_Prepared``, and BEGIN / COMMIT, ``sqlite_transactions.py``)
_DATABASE_ERRORS = (sa.exc.SQLAlchemyError, sqlite3.Error)


def _raise_as_port_error(exc: BaseException) -> NoReturn:
    """Raise :class:`RunStoreUnavailable` when the database error ``exc`` is an outage
    (``engine/adapters/database_outages.py``), chained to the driver's error (not to
    SQLAlchemy's, whose message holds the statement's parameters); else
    :class:`RunStoreRefused` naming the error without the values it quotes."""
    outage = outage_of(exc)
    if outage is not None:
        raise RunStoreUnavailable(outage.reason, outage.detail) from outage.cause
    # the driver's and SQLAlchemy's messages quote the statement's values or the row
    raise RunStoreRefused(refusal_of(exc)) from None


class _Rollback(Exception):
    """Raised inside a transaction to roll it back without an error."""


class _Limited(_Rollback):
    """A limit refused a hand-out: roll back what it wrote."""


def _b(name: str) -> Any:
    return sa.bindparam(name)


_LEASE_LABELS = [c.label(f"lease_{c.name}") for c in leases.c]
#: the column names of a task row and of a lease (with its label in a join), in order
_TASK_NAMES = tuple(c.name for c in tasks.c)
_LEASE_NAMES = tuple((c.name, f"lease_{c.name}") for c in leases.c)

#: the JSON columns of every table, by name (a result column of that name is JSON)
_JSON_COLUMNS = frozenset(
    c.name for t in metadata.tables.values() for c in t.c if isinstance(c.type, sa.JSON)
)


def _one_of(column: Any, values: list[str], *, negate: bool = False) -> Any:
    """``column IN ('a', 'b')`` with the (constant) values written into the statement,
    so that executing it expands no parameter list."""
    literals: list[Any] = [sa.literal_column("'" + v.replace("'", "''") + "'") for v in values]
    return column.not_in(literals) if negate else column.in_(literals)


class _Rows:
    """The rows of a statement as dicts, and the count of rows it changed."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: list[dict[str, Any]], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def first(self) -> dict[str, Any] | None:
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        return next(iter(self.rows[0].values())) if self.rows else None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)


class _Prepared:
    """A statement compiled once for SQLite, run as its SQL text with the parameters
    in order: no per-call compilation, cache key or parameter processing by
    SQLAlchemy."""

    __slots__ = ("columns", "constants", "order", "processors", "sql")

    def __init__(self, stmt: Any, dialect: Any, keys: list[str]) -> None:
        #: the result's column names and its JSON columns (index, name), known once the
        #: statement has run (its SQL text fixes them)
        self.columns: tuple[list[str], list[tuple[int, str]]] | None = None
        compiled = stmt.compile(dialect=dialect, column_keys=keys)
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("a statement with expanding parameters cannot be prepared")
        self.sql: str = compiled.string
        self.order: list[str] = list(compiled.positiontup or [])
        self.constants: dict[str, Any] = {}
        self.processors: dict[str, Callable[[Any], Any]] = {}
        for name in self.order:
            bind = compiled.binds[name]
            if name not in keys:
                self.constants[name] = bind.effective_value
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                self.processors[name] = processor

    def args(self, params: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        processors, constants = self.processors, self.constants
        for name in self.order:
            value = params[name] if name in params else constants[name]
            processor = processors.get(name)
            out.append(value if processor is None else processor(value))
        return out


# --- statuses allowed before a write (the monotonic rules) ---------------------


def _task_from_statuses(new: TaskStatus) -> list[str]:
    """Statuses of the same attempt from which a write of ``new`` may apply."""
    if new is TaskStatus.SCHEDULED:
        return [TaskStatus.SCHEDULED.value]
    if new is TaskStatus.COMPLETED_WITH_ERRORS:
        # the engine's verdict on an optional task whose worker reported a failure
        return [
            TaskStatus.SCHEDULED.value,
            TaskStatus.IN_PROGRESS.value,
            TaskStatus.FAILED.value,
            TaskStatus.FAILED_WITH_TERMINAL_ERROR.value,
            TaskStatus.TIMED_OUT.value,
        ]
    return [TaskStatus.SCHEDULED.value, TaskStatus.IN_PROGRESS.value]


def _values(statuses: frozenset[RunStatus] | frozenset[TaskStatus]) -> list[str]:
    return sorted(s.value for s in statuses)


# Alembic's ``context`` proxy is module-global, so in-process upgrades take turns.
# Across processes the database serialises them (BEGIN IMMEDIATE on SQLite, an
# advisory lock in env.py on PostgreSQL).
_MIGRATION_LOCK = threading.Lock()


def upgrade_to_head(engine: Engine) -> None:
    """Apply the Alembic migrations (``upgrade head``): on SQLite in one transaction, on
    PostgreSQL each in a transaction of its own under a session-level lock, so that a
    migration may build an index without stopping the table's writers (env.py in
    engine/adapters/run_store_migrations)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with _MIGRATION_LOCK:
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
            return
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")


def _default_lock_timeout(engine: Engine, seconds: float) -> None:
    """Each new connection of ``engine`` (PostgreSQL) gets ``lock_timeout`` = ``seconds``
    unless the server already gives it one (its default is 0: wait without end)."""

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        autocommit = dbapi_conn.autocommit
        dbapi_conn.autocommit = True
        try:
            dbapi_conn.execute(
                "SELECT set_config('lock_timeout', %s, false)"
                " WHERE current_setting('lock_timeout') = '0'",
                (f"{int(seconds * 1000)}ms",),
            )
        finally:
            dbapi_conn.autocommit = autocommit


#: task instances one statement of ``delete_tasks`` deletes at most
_INSTANCES_PER_STATEMENT = 200


class SqlRunStore:
    """Run store on SQLite or PostgreSQL through SQLAlchemy Core."""

    def __init__(self, url: str, *, migrate: bool = True, **engine_kwargs: Any) -> None:
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        # an error's message names the statement but not its parameters, which hold
        # runs' inputs and outputs (logs, error bodies and task reasons quote it)
        engine_kwargs.setdefault("hide_parameters", True)
        if self.dialect == "sqlite":
            database = parsed.database
            if not database or database == ":memory:":
                raise ValueError("SqlRunStore needs a SQLite file (sqlite:///path), not :memory:")
            Path(database).parent.mkdir(parents=True, exist_ok=True)
            self._engine = sqlite_engine(parsed, **engine_kwargs)
            self._sqlite: SqliteTransactions | None = SqliteTransactions(self._engine)
            self._insert: Any = sqlite_insert
        elif self.dialect == "postgresql":
            engine_kwargs.setdefault("pool_pre_ping", True)
            if "connect_timeout" not in parsed.query:
                connect_args = dict(engine_kwargs.get("connect_args") or {})
                connect_args.setdefault("connect_timeout", PG_CONNECT_TIMEOUT_SECONDS)
                engine_kwargs["connect_args"] = connect_args
            self._engine = sa.create_engine(parsed, **engine_kwargs)
            if "lock_timeout" not in str(parsed.query.get("options", "")):
                _default_lock_timeout(self._engine, PG_LOCK_TIMEOUT_SECONDS)
            self._sqlite = None
            self._insert = pg_insert
        else:
            raise ValueError(f"unsupported run store database: {self.dialect}")
        # SQLite has one writer at a time: the threads of this process take turns on a
        # lock instead of in SQLite's busy handler, whose sleeps (1 ms growing to 100 ms)
        # leave the file idle while writers wait. Other processes' writers are waited for
        # with short sleeps (engine/adapters/sqlite_busy.py). PostgreSQL needs no such lock.
        self._write_lock: threading.Lock | None = (
            threading.Lock() if self.dialect == "sqlite" else None
        )
        self._stmts: dict[Hashable, Any] = {}
        self._prepared: dict[Hashable, _Prepared | None] = {}
        self._json_loads: Callable[[Any], Any] | None = (
            _json().dialect_impl(self._engine.dialect).result_processor(self._engine.dialect, None)
            if self.dialect == "sqlite"
            else None
        )
        # the connection of this thread's batch (see ``batch``)
        self._batch = threading.local()
        # settled messages not recorded yet (``mark_settled_later``), and when they are due
        self._marks: list[tuple[str, int, int, int]] = []
        self._marks_due = 0.0
        self._marks_lock = threading.Lock()
        self._closed = threading.Event()
        self._watches = RunWatches()
        if migrate:
            upgrade_to_head(self._engine)

    @property
    def engine(self) -> Engine:
        return self._engine

    def close(self) -> None:
        if not self._closed.is_set():
            self.flush_marks()
            self._closed.set()
            if self._sqlite is not None:
                self._sqlite.close()
            self._engine.dispose()

    # --- plumbing -------------------------------------------------------------

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        """A write transaction; once it committed, the readers watching the runs it
        touched are woken (``watch``). A database error raises the port's
        :class:`RunStoreUnavailable` or :class:`RunStoreRefused` (``_raise_as_port_error``)."""
        try:
            if self._sqlite is None:
                with self._engine.begin() as conn:
                    yield conn
            else:
                assert self._write_lock is not None
                with self._write_lock, self._sqlite.write() as conn:
                    yield conn
        except _DATABASE_ERRORS as exc:
            self._watches.discarded()
            _raise_as_port_error(exc)
        except BaseException:
            self._watches.discarded()
            raise
        self._watches.committed()

    def watch(self, workflow_id: str) -> AbstractContextManager[RunWatch]:
        return self._watches.watch(workflow_id)

    def _write(self, *, partial: bool = False) -> AbstractContextManager[Connection]:
        """A write transaction, or this thread's batch (``partial``: a method that may
        roll back after a write gets a savepoint in a batch)."""
        batch: Connection | None = getattr(self._batch, "conn", None)
        if batch is None:
            return self._begin()
        if not partial:
            return nullcontext(batch)
        if self._sqlite is not None:
            return self._sqlite.savepoint(batch)
        return self._savepoint(batch)

    @staticmethod
    @contextmanager
    def _savepoint(conn: Connection) -> Iterator[Connection]:
        with conn.begin_nested():
            yield conn

    @contextmanager
    def batch(self) -> Iterator[None]:
        if getattr(self._batch, "conn", None) is not None:
            yield  # part of the enclosing batch
            return
        with self._begin() as conn:
            self._batch.conn = conn
            try:
                yield
            finally:
                self._batch.conn = None

    def _read(self) -> AbstractContextManager[Connection]:
        """A read transaction, or this thread's batch (whose reads see its writes)."""
        batch: Connection | None = getattr(self._batch, "conn", None)
        if batch is not None:
            return nullcontext(batch)
        if self._sqlite is not None:
            return self._read_on_sqlite(self._sqlite)
        return self._read_through_sqlalchemy()

    @staticmethod
    @contextmanager
    def _read_on_sqlite(sqlite: SqliteTransactions) -> Iterator[Connection]:
        try:
            with sqlite.read() as conn:
                yield conn
        except _DATABASE_ERRORS as exc:
            _raise_as_port_error(exc)

    @contextmanager
    def _read_through_sqlalchemy(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn, conn.begin():
                yield conn
        except _DATABASE_ERRORS as exc:
            _raise_as_port_error(exc)

    def _stmt(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The statement ``build`` makes, built once per key (see the module doc)."""
        stmt = self._stmts.get(key)
        if stmt is None:
            stmt = self._stmts[key] = build()
        return stmt

    def _exec(
        self, conn: Connection, key: Hashable, build: Callable[[], Any], params: dict[str, Any]
    ) -> _Rows:
        """Run the statement ``build`` makes (built once per key) with ``params``. On
        SQLite it is compiled once per set of parameter names and run as SQL text
        (``_Prepared``), its JSON result columns decoded here."""
        stmt = self._stmt(key, build)
        loads = self._json_loads
        if loads is None:
            result = conn.execute(stmt, params)
            rows = [dict(r._mapping) for r in result] if result.returns_rows else []
            return _Rows(rows, result.rowcount)
        pkey = (key, tuple(params))
        prepared = self._prepared.get(pkey, False)
        if prepared is False:
            try:
                prepared = _Prepared(stmt, self._engine.dialect, list(params))
            except ValueError:
                prepared = None
            self._prepared[pkey] = prepared
        if prepared is None:
            result = conn.execute(stmt, params)
            rows = [dict(r._mapping) for r in result] if result.returns_rows else []
            return _Rows(rows, result.rowcount)
        assert isinstance(prepared, _Prepared)
        return self._run_prepared(conn, prepared, params, loads)

    @staticmethod
    def _run_prepared(
        conn: Connection,
        prepared: _Prepared,
        params: dict[str, Any],
        loads: Callable[[Any], Any],
    ) -> _Rows:
        """Run on the driver's own cursor (SQLAlchemy's result would rebuild its column
        metadata from the cursor on every call); listeners of the engine's
        ``before_cursor_execute`` event still see the statement."""
        args = prepared.args(params)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            if conn.engine.dispatch.before_cursor_execute:
                conn.dispatch.before_cursor_execute(conn, cursor, prepared.sql, args, None, False)
            cursor.execute(prepared.sql, args)
            description = cursor.description
            if description is None:
                return _Rows([], cursor.rowcount)
            columns = prepared.columns
            if columns is None:
                names = [d[0] for d in description]
                columns = prepared.columns = (
                    names,
                    [(i, k) for i, k in enumerate(names) if k in _JSON_COLUMNS],
                )
            keys, json_at = columns
            out: list[dict[str, Any]] = []
            for values in cursor.fetchall():
                row = dict(zip(keys, values, strict=True))
                for i, k in json_at:
                    row[k] = loads(values[i])
                out.append(row)
            return _Rows(out, cursor.rowcount)
        finally:
            cursor.close()

    # --- conversions ----------------------------------------------------------

    @staticmethod
    def _run(row: Mapping[Any, Any]) -> RunRecord:
        data = dict(row)
        data["variables"] = data["variables"] or {}
        data["task_to_domain"] = data["task_to_domain"] or {}
        data["failed_reference_task_names"] = data["failed_reference_task_names"] or []
        return RunRecord.model_validate(data)

    @staticmethod
    def _task(row: Mapping[Any, Any]) -> TaskRecord:
        data = dict(row)
        data["retried"] = bool(data.get("retried"))
        return TaskRecord.model_validate(data)

    @staticmethod
    def _lease(row: Mapping[Any, Any]) -> Lease:
        data = dict(row)
        data["released"] = bool(data["released"])
        return Lease.model_validate(data)

    # --- runs -----------------------------------------------------------------

    def create_run(self, run: NewRun, start: dict[str, Any] | None = None) -> CreateRunResult:
        values = run.model_dump()
        values["status"] = run.status.value
        values["update_time"] = run.create_time

        def build() -> Any:
            return self._insert(runs).on_conflict_do_nothing().returning(runs.c.workflow_id)

        with self._write() as conn:
            self._watches.touched(run.workflow_id)
            if self._exec(conn, "create_run", build, values).first() is not None:
                if start is not None:
                    self._put_pending_start(conn, run.workflow_id, start, run.create_time)
                return CreateRunResult(workflow_id=run.workflow_id, created=True)
            if run.idempotency_key is not None:
                existing = conn.execute(
                    sa.select(runs.c.workflow_id).where(
                        runs.c.name == run.name, runs.c.idempotency_key == run.idempotency_key
                    )
                ).scalar()
                if existing is not None:
                    return CreateRunResult(workflow_id=existing, created=False)
            return CreateRunResult(workflow_id=run.workflow_id, created=False)

    def _put_pending_start(
        self, conn: Connection, workflow_id: str, start: dict[str, Any], created_at: int
    ) -> None:
        """The pending start of a run this transaction created or found. None is expected
        (a run's pending start is deleted with the run); one left over is replaced."""

        def build() -> Any:
            ins = self._insert(run_starts)
            return ins.on_conflict_do_update(
                index_elements=[run_starts.c.workflow_id],
                set_={"run_input": ins.excluded.run_input, "created_at": ins.excluded.created_at},
            )

        values = {
            "workflow_id": workflow_id,
            "run_input": start,
            "created_at": created_at,
        }
        self._exec(conn, "put_pending_start", build, values)

    def add_pending_start(self, workflow_id: str, start: dict[str, Any], now: int) -> bool:
        exists = sa.select(sa.literal(1)).select_from(runs).where(runs.c.workflow_id == workflow_id)
        with self._write() as conn:
            if conn.execute(exists).first() is None:
                return False
            self._put_pending_start(conn, workflow_id, start, now)
            return True

    def pending_starts(self, limit: int = 100) -> list[PendingStart]:
        if limit <= 0:
            return []

        def build() -> Any:
            return (
                sa.select(run_starts)
                .order_by(run_starts.c.created_at, run_starts.c.workflow_id)
                .limit(sa.bindparam("b_limit", type_=sa.Integer))
            )

        with self._read() as conn:
            rows = self._exec(conn, "pending_starts", build, {"b_limit": limit}).rows
        return [
            PendingStart(
                workflow_id=r["workflow_id"],
                run_input=r["run_input"],
                created_at=int(r["created_at"]),
            )
            for r in rows
        ]

    def has_pending_start(self, workflow_id: str) -> bool:
        stmt = (
            sa.select(sa.literal(1))
            .select_from(run_starts)
            .where(run_starts.c.workflow_id == workflow_id)
        )
        with self._read() as conn:
            return conn.execute(stmt).first() is not None

    def delete_pending_starts(self, workflow_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(workflow_ids))
        if not ids:
            return 0
        deleted = 0
        with self._write() as conn:
            for at in range(0, len(ids), _DELETE_CHUNK):
                deleted += self._delete_pending_starts(conn, ids[at : at + _DELETE_CHUNK])
        return deleted

    def _delete_pending_starts(self, conn: Connection, ids: list[str]) -> int:
        """One statement for up to ``_DELETE_CHUNK`` ids, of the next power-of-two shape
        (the extra places repeat the first id: deleting a row twice deletes it once)."""
        size = 1 << (len(ids) - 1).bit_length()

        def build() -> Any:
            return sa.delete(run_starts).where(
                run_starts.c.workflow_id.in_([_b(f"b_id{i}") for i in range(size)])
            )

        params = {f"b_id{i}": ids[i] if i < len(ids) else ids[0] for i in range(size)}
        return int(self._exec(conn, ("delete_pending_starts", size), build, params).rowcount)

    def get_run(self, workflow_id: str) -> RunRecord | None:
        def build() -> Any:
            return sa.select(runs).where(runs.c.workflow_id == _b("b_workflow_id"))

        with self._read() as conn:
            row = self._exec(conn, "get_run", build, {"b_workflow_id": workflow_id}).first()
        return None if row is None else self._run(row)

    def update_run(self, workflow_id: str, update: RunUpdate, now: int) -> bool:
        values: dict[str, Any] = update.model_dump(exclude_unset=True)
        values["update_time"] = now
        status = update.status if "status" in values else None
        if status is not None:
            values["status"] = status.value
            if status.is_terminal and values.get("end_time") is None:
                values["end_time"] = now
        elif "status" in values:
            del values["status"]

        def build() -> Any:
            return (
                sa.update(runs)
                .where(
                    runs.c.workflow_id == _b("b_workflow_id"),
                    _one_of(runs.c.status, _values(RUN_ACTIVE)),
                )
                .values({k: _b(f"v_{k}") for k in values})
            )

        params = {f"v_{k}": v for k, v in values.items()}
        params["b_workflow_id"] = workflow_id
        with self._write() as conn:
            self._watches.touched(workflow_id)
            return (
                self._exec(conn, ("update_run", tuple(sorted(values))), build, params).rowcount == 1
            )

    def reopen_run(self, workflow_id: str, now: int) -> bool:
        stmt = (
            sa.update(runs)
            .where(runs.c.workflow_id == workflow_id, runs.c.status.in_(_values(RUN_TERMINAL)))
            .values(
                status=RunStatus.RUNNING.value,
                end_time=None,
                reason_for_incompletion=None,
                failed_reference_task_names=None,
                update_time=now,
            )
        )
        with self._write() as conn:
            self._watches.touched(workflow_id)
            return conn.execute(stmt).rowcount == 1

    def terminate_ended(self, workflow_id: str, reason: str, now: int) -> bool:
        stmt = (
            sa.update(runs)
            .where(
                runs.c.workflow_id == workflow_id,
                runs.c.status.in_([RunStatus.FAILED.value, RunStatus.TIMED_OUT.value]),
            )
            .values(
                status=RunStatus.TERMINATED.value,
                reason_for_incompletion=reason,
                update_time=now,
            )
        )
        with self._write() as conn:
            self._watches.touched(workflow_id)
            return conn.execute(stmt).rowcount == 1

    def reopen_task(self, task_id: str, attempt: int, output: dict[str, Any], now: int) -> bool:
        ended = [
            TaskStatus.FAILED.value,
            TaskStatus.FAILED_WITH_TERMINAL_ERROR.value,
            TaskStatus.TIMED_OUT.value,
            TaskStatus.CANCELED.value,
        ]
        stmt = (
            sa.update(tasks)
            .where(
                tasks.c.task_id == task_id,
                tasks.c.attempt == attempt,
                tasks.c.status.in_(ended),
            )
            .values(
                status=TaskStatus.IN_PROGRESS.value,
                end_time=None,
                reason_for_incompletion=None,
                output_data=output,
                output_ref=None,
                retried=False,
                update_time=now,
            )
            .returning(tasks.c.workflow_id)
        )
        with self._write() as conn:
            found = conn.execute(stmt).first()
            if found is None:
                return False
            self._watches.touched(found[0])
            return True

    def mark_retried(self, task_id: str, now: int) -> bool:
        def build() -> Any:
            return (
                sa.update(tasks)
                .where(tasks.c.task_id == _b("b_task_id"))
                .values(retried=True, update_time=_b("v_now"))
            )

        with self._write() as conn:
            params = {"b_task_id": task_id, "v_now": now}
            return self._exec(conn, "mark_retried", build, params).rowcount == 1

    def delete_tasks(
        self,
        workflow_id: str,
        task_ids: list[str] | None = None,
        *,
        instances: list[str] | None = None,
    ) -> int:
        base = [tasks.c.workflow_id == workflow_id]
        if task_ids is not None:
            base.append(tasks.c.task_id.in_(task_ids))
        # instances in groups: one OR per instance, and SQLite refuses an expression
        # deeper than 1,000 (a loop body of that many tasks)
        groups: list[list[str] | None] = (
            [None]
            if instances is None
            else [
                instances[i : i + _INSTANCES_PER_STATEMENT]
                for i in range(0, len(instances), _INSTANCES_PER_STATEMENT)
            ]
            or [[]]
        )
        deleted = 0
        with self._write() as conn:
            self._watches.touched(workflow_id)
            for group in groups:
                which = list(base)
                if group is not None:
                    ref = tasks.c.reference_task_name
                    # a prefix compared as text, not LIKE (case-insensitive in SQLite,
                    # and ``_`` and ``%`` in a ref would be wildcards)
                    which.append(
                        sa.or_(
                            ref.in_(group),
                            *(sa.func.substr(ref, 1, len(i) + 2) == i + "__" for i in group),
                        )
                    )
                rows = sa.select(tasks.c.task_id).where(*which)
                conn.execute(sa.delete(task_logs).where(task_logs.c.task_id.in_(rows)))
                conn.execute(sa.delete(leases).where(leases.c.task_id.in_(rows)))
                deleted += int(conn.execute(sa.delete(tasks).where(*which)).rowcount)
        return deleted

    def delete_run(self, workflow_id: str) -> bool:
        task_ids = sa.select(tasks.c.task_id).where(tasks.c.workflow_id == workflow_id)
        with self._write() as conn:
            self._watches.touched(workflow_id)
            conn.execute(sa.delete(task_logs).where(task_logs.c.task_id.in_(task_ids)))
            conn.execute(sa.delete(leases).where(leases.c.task_id.in_(task_ids)))
            conn.execute(sa.delete(tasks).where(tasks.c.workflow_id == workflow_id))
            conn.execute(sa.delete(run_starts).where(run_starts.c.workflow_id == workflow_id))
            conn.execute(sa.delete(step_results).where(step_results.c.workflow_id == workflow_id))
            return (
                conn.execute(sa.delete(runs).where(runs.c.workflow_id == workflow_id)).rowcount == 1
            )

    def put_step_result(
        self,
        workflow_id: str,
        task_id: str,
        attempt: int,
        result: dict[str, Any],
        now: int,
        execution: int = 0,
    ) -> None:
        def earlier() -> Any:
            return sa.delete(step_results).where(
                step_results.c.workflow_id == _b("b_workflow_id"),
                step_results.c.execution < sa.bindparam("b_execution", type_=sa.Integer),
            )

        def build() -> Any:
            ins = self._insert(step_results)
            return ins.on_conflict_do_update(
                index_elements=[
                    step_results.c.workflow_id,
                    step_results.c.task_id,
                    step_results.c.attempt,
                ],
                set_={"result": ins.excluded.result, "created_at": ins.excluded.created_at},
            )

        values = {
            "workflow_id": workflow_id,
            "task_id": task_id,
            "attempt": attempt,
            "execution": execution,
            "result": result,
            "created_at": now,
        }
        with self._write() as conn:
            if execution > 0:  # the first execution has no earlier one
                self._exec(
                    conn,
                    "delete_earlier_step_results",
                    earlier,
                    {"b_workflow_id": workflow_id, "b_execution": execution},
                )
            self._exec(conn, "put_step_result", build, values)

    def get_step_result(self, workflow_id: str, task_id: str, attempt: int) -> KeptStep | None:
        def build() -> Any:
            return sa.select(step_results.c.result, step_results.c.created_at).where(
                step_results.c.workflow_id == _b("b_workflow_id"),
                step_results.c.task_id == _b("b_task_id"),
                step_results.c.attempt == sa.bindparam("b_attempt", type_=sa.Integer),
            )

        params = {"b_workflow_id": workflow_id, "b_task_id": task_id, "b_attempt": attempt}
        with self._read() as conn:
            row = self._exec(conn, "get_step_result", build, params).first()
        if row is None or not isinstance(row["result"], dict):
            return None
        return KeptStep(result=row["result"], kept_at=int(row["created_at"]))

    def search_runs(self, query: RunQuery) -> SearchResult:
        conds: list[sa.ColumnElement[bool]] = []
        if query.name is not None:
            conds.append(runs.c.name == query.name)
        if query.names is not None:
            conds.append(runs.c.name.in_(query.names))
        if query.free_text is not None:
            conds.append(
                sa.or_(
                    runs.c.workflow_id == query.free_text,
                    runs.c.correlation_id == query.free_text,
                    runs.c.name == query.free_text,
                )
            )
        if query.statuses:
            conds.append(runs.c.status.in_([s.value for s in query.statuses]))
        if query.correlation_id is not None:
            conds.append(runs.c.correlation_id == query.correlation_id)
        if query.correlation_ids is not None:
            conds.append(runs.c.correlation_id.in_(query.correlation_ids))
        if query.create_time_from is not None:
            conds.append(runs.c.create_time >= query.create_time_from)
        if query.create_time_to is not None:
            conds.append(runs.c.create_time < query.create_time_to)
        where = sa.and_(sa.true(), *conds)
        count_stmt = sa.select(sa.func.count()).select_from(runs).where(where)
        order = (
            (runs.c.create_time.asc(), runs.c.workflow_id.asc())
            if query.oldest_first
            else (runs.c.create_time.desc(), runs.c.workflow_id.desc())
        )
        page_stmt = (
            sa.select(runs).where(where).order_by(*order).offset(query.start).limit(query.size)
        )
        with self._read() as conn:
            total = conn.execute(count_stmt).scalar_one()
            rows = conn.execute(page_stmt).all() if query.size > 0 else []
        return SearchResult(total_hits=total, results=[self._run(r._mapping) for r in rows])

    # --- tasks ----------------------------------------------------------------

    def upsert_task(self, task: TaskRecord, now: int) -> bool:
        with self._write() as conn:
            return self._upsert_task(conn, task, now)

    def _upsert_task(self, conn: Connection, task: TaskRecord, now: int) -> bool:
        self._watches.touched(task.workflow_id)
        values = task.model_dump()
        values["status"] = task.status.value
        values["update_time"] = now

        def build() -> Any:
            ins = self._insert(tasks)
            ex = ins.excluded
            same_attempt = sa.and_(
                tasks.c.attempt == ex.attempt,
                _one_of(tasks.c.status, _task_from_statuses(task.status)),
            )
            newer_attempt = sa.and_(
                tasks.c.attempt < ex.attempt,
                _one_of(tasks.c.status, _values(TASK_SUCCEEDED), negate=True),
            )
            return ins.on_conflict_do_update(
                index_elements=[tasks.c.task_id],
                set_={c.name: ex[c.name] for c in tasks.c if c.name != "task_id"},
                where=sa.or_(same_attempt, newer_attempt),
            ).returning(tasks.c.task_id)

        return self._exec(conn, ("upsert_task", task.status), build, values).first() is not None

    def update_task(
        self,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        *,
        logs: Sequence[str] = (),
    ) -> bool:
        with self._write() as conn:
            applied = self._update_task(conn, task_id, attempt, update, now)
            if applied:
                self._append_logs(conn, task_id, logs, now)
            return applied

    def _update_task(
        self,
        conn: Connection,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        *,
        given_back: bool = False,
    ) -> bool:
        """``given_back``: the write of :meth:`give_back_task`, SCHEDULED from
        IN_PROGRESS (the one transition back the monotonic rules allow)."""
        values: dict[str, Any] = update.model_dump(exclude_unset=True)
        values["update_time"] = now
        status = update.status if "status" in values else None
        if given_back:
            values["status"] = TaskStatus.SCHEDULED.value
            allowed = [TaskStatus.IN_PROGRESS.value]
        elif status is not None:
            values["status"] = status.value
            allowed = _task_from_statuses(status)
            if status.is_terminal and values.get("end_time") is None:
                values["end_time"] = now
        else:
            values.pop("status", None)
            allowed = [TaskStatus.SCHEDULED.value, TaskStatus.IN_PROGRESS.value]
        if values.get("callback_after_seconds") is None:
            values.pop("callback_after_seconds", None)

        def build() -> Any:
            return (
                sa.update(tasks)
                .where(
                    tasks.c.task_id == _b("b_task_id"),
                    tasks.c.attempt == _b("b_attempt"),
                    _one_of(tasks.c.status, allowed),
                )
                .values({k: _b(f"v_{k}") for k in values})
                .returning(tasks.c.workflow_id)
            )

        params = {f"v_{k}": v for k, v in values.items()}
        params["b_task_id"], params["b_attempt"] = task_id, attempt
        key = ("update_task", tuple(sorted(values)), tuple(allowed))
        row = self._exec(conn, key, build, params).first()
        if row is None:
            return False
        self._watches.touched(row["workflow_id"])
        return True

    def finish_task(
        self,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        *,
        holder: str,
        logs: Sequence[str] = (),
    ) -> bool:
        return self._update_releasing(task_id, attempt, update, now, holder, logs)

    def give_back_task(
        self,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        *,
        holder: str,
        logs: Sequence[str] = (),
    ) -> bool:
        return self._update_releasing(task_id, attempt, update, now, holder, logs, True)

    def _update_releasing(
        self,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        holder: str,
        logs: Sequence[str],
        given_back: bool = False,
    ) -> bool:
        """The update with its logs and, when it applied, the release of ``holder``'s
        lease, in one transaction."""
        with self._write() as conn:
            applied = self._update_task(conn, task_id, attempt, update, now, given_back=given_back)
            if applied:
                self._append_logs(conn, task_id, logs, now)
                self._release_lease(conn, task_id, attempt, holder)
            return applied

    def start_task(
        self,
        task_id: str,
        attempt: int,
        worker_id: str,
        *,
        lease_expires_at: int,
        now: int,
        sequence_number: int | None = None,
        queue_name: str | None = None,
        holder: str | None = None,
    ) -> TaskRecord | None:
        return self.hand_out_task(
            task_id,
            attempt,
            worker_id,
            lease_expires_at=lease_expires_at,
            now=now,
            sequence_number=sequence_number,
            queue_name=queue_name,
            holder=holder,
        ).task

    def hand_out_task(
        self,
        task_id: str,
        attempt: int,
        worker_id: str,
        *,
        lease_expires_at: int,
        now: int,
        sequence_number: int | None = None,
        queue_name: str | None = None,
        holder: str | None = None,
        limits: TaskLimits | None = None,
    ) -> HandOut:
        # The task row first: its row lock orders concurrent starts of one task. The
        # counters last: their row is the hottest, held for the least time.
        def mark() -> Any:
            return (
                sa.update(tasks)
                .where(
                    tasks.c.task_id == _b("b_task_id"),
                    tasks.c.attempt == _b("b_attempt"),
                    _one_of(
                        tasks.c.status, [TaskStatus.SCHEDULED.value, TaskStatus.IN_PROGRESS.value]
                    ),
                )
                .values(
                    status=TaskStatus.IN_PROGRESS.value,
                    worker_id=_b("v_worker_id"),
                    # the attempt's first hand-out: one handed out again (after a
                    # callback, or a lease that ran out) keeps it, as Conductor's poll
                    # sets startTime only once (ExecutionService.poll)
                    start_time=sa.func.coalesce(tasks.c.start_time, _b("v_now")),
                    poll_count=tasks.c.poll_count + 1,
                    update_time=_b("v_now"),
                )
                .returning(*tasks.c)
            )

        params = {
            "b_task_id": task_id,
            "b_attempt": attempt,
            "v_worker_id": worker_id,
            "v_now": now,
        }
        slot = limits.task_type if limits is not None and limits.concurrency_limit > 0 else None
        try:
            with self._write(partial=True) as conn:
                row = self._exec(conn, "mark_started", mark, params).first()
                if row is None:
                    raise _Rollback
                self._watches.touched(row["workflow_id"])
                if not self._acquire_lease(
                    conn,
                    task_id,
                    attempt,
                    holder or worker_id,
                    lease_expires_at,
                    now,
                    sequence_number,
                    queue_name,
                    slot,
                ):
                    raise _Rollback
                if limits is not None:
                    if slot is not None and not self._take_slot(
                        conn, slot, limits.concurrency_limit
                    ):
                        raise _Limited
                    if not self._take_rate(
                        conn,
                        limits.task_type,
                        limits.rate_per_frequency,
                        limits.rate_frequency_seconds,
                        now,
                    ):
                        raise _Limited
                return HandOut(task=self._task(row))
        except _Limited:
            return HandOut(limited=True)
        except _Rollback:
            return HandOut()

    def get_task(self, task_id: str) -> TaskRecord | None:
        def build() -> Any:
            return sa.select(tasks).where(tasks.c.task_id == _b("b_task_id"))

        with self._read() as conn:
            row = self._exec(conn, "get_task", build, {"b_task_id": task_id}).first()
        return None if row is None else self._task(row)

    def task_state(self, task_id: str) -> tuple[int, TaskStatus] | None:
        def build() -> Any:
            return sa.select(tasks.c.attempt, tasks.c.status).where(
                tasks.c.task_id == _b("b_task_id")
            )

        with self._read() as conn:
            row = self._exec(conn, "task_state", build, {"b_task_id": task_id}).first()
        return None if row is None else (int(row["attempt"]), TaskStatus(row["status"]))

    def get_task_with_lease(self, task_id: str) -> tuple[TaskRecord | None, Lease | None]:
        def build() -> Any:
            return (
                sa.select(tasks, *_LEASE_LABELS)
                .select_from(
                    tasks.outerjoin(
                        leases,
                        sa.and_(
                            leases.c.task_id == tasks.c.task_id, leases.c.attempt == tasks.c.attempt
                        ),
                    )
                )
                .where(tasks.c.task_id == _b("b_task_id"))
            )

        with self._read() as conn:
            data = self._exec(conn, "get_task_with_lease", build, {"b_task_id": task_id}).first()
        if data is None:
            return None, None
        task = self._task({name: data[name] for name in _TASK_NAMES})
        if data["lease_task_id"] is None:
            return task, None
        lease = self._lease({name: data[label] for name, label in _LEASE_NAMES})
        return task, lease

    def list_tasks(self, workflow_id: str) -> list[TaskRecord]:
        def build() -> Any:
            return (
                sa.select(tasks)
                .where(tasks.c.workflow_id == _b("b_workflow_id"))
                .order_by(tasks.c.seq, tasks.c.task_id)
            )

        with self._read() as conn:
            rows = self._exec(conn, "list_tasks", build, {"b_workflow_id": workflow_id})
        return [self._task(r) for r in rows]

    def failed_task_refs(self, workflow_id: str) -> list[str]:
        def build() -> Any:
            return (
                sa.select(tasks.c.reference_task_name)
                .where(
                    tasks.c.workflow_id == _b("b_workflow_id"),
                    _one_of(
                        tasks.c.status,
                        [TaskStatus.FAILED.value, TaskStatus.FAILED_WITH_TERMINAL_ERROR.value],
                    ),
                )
                .order_by(tasks.c.seq, tasks.c.task_id)
            )

        with self._read() as conn:
            rows = self._exec(conn, "failed_task_refs", build, {"b_workflow_id": workflow_id})
        return list(dict.fromkeys(str(r["reference_task_name"]) for r in rows))

    def list_open_tasks(
        self, task_type: str, *, start: int = 0, size: int = 100
    ) -> list[TaskRecord]:
        # ix_tasks_type_status serves the filter; the open rows of one type are few
        stmt = (
            sa.select(tasks)
            .where(
                tasks.c.task_type == task_type,
                tasks.c.status.in_([TaskStatus.SCHEDULED.value, TaskStatus.IN_PROGRESS.value]),
            )
            .order_by(tasks.c.scheduled_time, tasks.c.task_id)
            .offset(start)
            .limit(size)
        )
        with self._read() as conn:
            return [self._task(r._mapping) for r in conn.execute(stmt)]

    def append_task_log(self, task_id: str, log: str, now: int) -> None:
        with self._write() as conn:
            self._append_logs(conn, task_id, [log], now)

    def _append_logs(self, conn: Connection, task_id: str, logs: Sequence[str], now: int) -> None:
        """Append ``logs`` up to ``MAX_TASK_LOG_ENTRIES`` entries of the task, then the
        ``TASK_LOGS_DROPPED`` entry once (the port's ``append_task_log``)."""
        if not logs:
            return
        if self.dialect == "postgresql":  # SQLite has one writer at a time
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock(:k, hashtext(:task_id))"),
                {"k": _PG_TASK_LOG_LOCK, "task_id": task_id},
            )

        def count() -> Any:
            return (
                sa.select(sa.func.count())
                .select_from(task_logs)
                .where(task_logs.c.task_id == _b("b_task_id"))
            )

        def dropped_said() -> Any:
            return (
                sa.select(task_logs.c.id)
                .where(task_logs.c.task_id == _b("b_task_id"), task_logs.c.log == _b("b_log"))
                .limit(1)
            )

        held = int(self._exec(conn, "count_task_logs", count, {"b_task_id": task_id}).scalar())
        kept = list(logs[: max(0, MAX_TASK_LOG_ENTRIES - held)])
        if len(kept) < len(logs):
            said = {"b_task_id": task_id, "b_log": TASK_LOGS_DROPPED}
            if self._exec(conn, "task_logs_dropped", dropped_said, said).first() is None:
                kept.append(TASK_LOGS_DROPPED)  # the first append past the limit
        for log in kept:
            params = {"task_id": task_id, "log": log, "created_time": now}
            self._exec(conn, "append_task_log", lambda: sa.insert(task_logs), params)

    def list_task_logs(self, task_id: str) -> list[TaskLog]:
        stmt = (
            sa.select(task_logs.c.task_id, task_logs.c.log, task_logs.c.created_time)
            .where(task_logs.c.task_id == task_id)
            .order_by(task_logs.c.id)
        )
        with self._read() as conn:
            return [TaskLog.model_validate(dict(r._mapping)) for r in conn.execute(stmt)]

    # --- definitions ----------------------------------------------------------

    def put_definition(self, name: str, version: int, definition: dict[str, Any], now: int) -> None:
        ins = self._insert(definitions).values(
            name=name, version=version, definition=definition, create_time=now, update_time=now
        )
        stmt = ins.on_conflict_do_update(
            index_elements=[definitions.c.name, definitions.c.version],
            set_={"definition": ins.excluded.definition, "update_time": ins.excluded.update_time},
        )
        with self._write() as conn:
            conn.execute(stmt)

    def _versioned(
        self, table: sa.Table, name: str, version: int | None, *columns: sa.Column[Any]
    ) -> dict[str, Any] | None:
        """The row of ``name`` at ``version``, or its latest version when None (only
        ``columns`` of it, when given)."""

        def build() -> Any:
            stmt = sa.select(*(columns or (table,))).where(table.c.name == _b("b_name"))
            if version is None:
                return stmt.order_by(table.c.version.desc()).limit(1)
            return stmt.where(table.c.version == _b("b_version"))

        params: dict[str, Any] = {"b_name": name}
        if version is not None:
            params["b_version"] = version
        key = ("versioned", table.name, version is None, *(c.name for c in columns))
        with self._read() as conn:
            return self._exec(conn, key, build, params).first()

    def get_definition(self, name: str, version: int | None = None) -> DefinitionRecord | None:
        row = self._versioned(definitions, name, version)
        return None if row is None else DefinitionRecord.model_validate(dict(row))

    def definition_stamp(self, name: str, version: int | None = None) -> tuple[int, int] | None:
        t = definitions
        row = self._versioned(t, name, version, t.c.version, t.c.update_time)
        return None if row is None else (int(row["version"]), int(row["update_time"]))

    def list_definitions(self, name: str | None = None) -> list[DefinitionRecord]:
        stmt = sa.select(definitions).order_by(definitions.c.name, definitions.c.version)
        if name is not None:
            stmt = stmt.where(definitions.c.name == name)
        with self._read() as conn:
            return [DefinitionRecord.model_validate(dict(r._mapping)) for r in conn.execute(stmt)]

    def definition_versions(self) -> list[DefinitionVersion]:
        stmt = sa.select(
            definitions.c.name, definitions.c.version, definitions.c.create_time
        ).order_by(definitions.c.name, definitions.c.version)
        with self._read() as conn:
            return [
                DefinitionVersion(name=name, version=version, create_time=created)
                for name, version, created in conn.execute(stmt)
            ]

    def delete_definition(self, name: str, version: int) -> bool:
        stmt = sa.delete(definitions).where(
            definitions.c.name == name, definitions.c.version == version
        )
        with self._write() as conn:
            return conn.execute(stmt).rowcount == 1

    def put_task_def(self, name: str, definition: dict[str, Any], now: int) -> None:
        ins = self._insert(task_defs).values(
            name=name, definition=definition, create_time=now, update_time=now
        )
        stmt = ins.on_conflict_do_update(
            index_elements=[task_defs.c.name],
            set_={"definition": ins.excluded.definition, "update_time": ins.excluded.update_time},
        )
        with self._write() as conn:
            conn.execute(stmt)

    def get_task_def(self, name: str) -> TaskDefRecord | None:
        def build() -> Any:
            return sa.select(task_defs).where(task_defs.c.name == _b("b_name"))

        with self._read() as conn:
            row = self._exec(conn, "get_task_def", build, {"b_name": name}).first()
        return None if row is None else TaskDefRecord.model_validate(row)

    def list_task_defs(self) -> list[TaskDefRecord]:
        with self._read() as conn:
            rows = conn.execute(sa.select(task_defs).order_by(task_defs.c.name))
            return [TaskDefRecord.model_validate(dict(r._mapping)) for r in rows]

    def delete_task_def(self, name: str) -> bool:
        with self._write() as conn:
            return conn.execute(sa.delete(task_defs).where(task_defs.c.name == name)).rowcount == 1

    def put_instruction(self, name: str, version: int, text: str, now: int) -> None:
        ins = self._insert(instructions).values(
            name=name, version=version, text=text, create_time=now
        )
        stmt = ins.on_conflict_do_update(
            index_elements=[instructions.c.name, instructions.c.version],
            set_={"text": ins.excluded.text},
        )
        with self._write() as conn:
            conn.execute(stmt)

    def get_instruction(self, name: str, version: int | None = None) -> InstructionRecord | None:
        row = self._versioned(instructions, name, version)
        return None if row is None else InstructionRecord.model_validate(dict(row))

    # --- poll data ------------------------------------------------------------

    def record_poll(self, task_type: str, domain: str | None, worker_id: str, now: int) -> None:
        def build() -> Any:
            ins = self._insert(poll_data)
            newer = ins.excluded.last_poll_time
            return ins.on_conflict_do_update(
                index_elements=[poll_data.c.task_type, poll_data.c.domain, poll_data.c.worker_id],
                set_={
                    "last_poll_time": sa.case(
                        (poll_data.c.last_poll_time < newer, newer),
                        else_=poll_data.c.last_poll_time,
                    )
                },
            )

        values = {
            "task_type": task_type,
            "domain": domain or _NO_DOMAIN,
            "worker_id": worker_id,
            "last_poll_time": now,
        }
        with self._write() as conn:
            self._exec(conn, "record_poll", build, values)

    @staticmethod
    def _poll(row: RowMapping) -> PollData:
        data = dict(row)
        data["domain"] = data["domain"] or None
        return PollData.model_validate(data)

    def get_poll_data(self, task_type: str) -> list[PollData]:
        stmt = (
            sa.select(poll_data)
            .where(poll_data.c.task_type == task_type)
            .order_by(poll_data.c.domain, poll_data.c.worker_id)
        )
        with self._read() as conn:
            return [self._poll(r._mapping) for r in conn.execute(stmt)]

    def get_all_poll_data(self) -> list[PollData]:
        stmt = sa.select(poll_data).order_by(
            poll_data.c.task_type, poll_data.c.domain, poll_data.c.worker_id
        )
        with self._read() as conn:
            return [self._poll(r._mapping) for r in conn.execute(stmt)]

    # --- leases ---------------------------------------------------------------

    def _acquire_lease(
        self,
        conn: Connection,
        task_id: str,
        attempt: int,
        worker_id: str,
        expires_at: int,
        now: int,
        sequence_number: int | None,
        queue_name: str | None,
        slot: str | None = None,
    ) -> bool:
        def build() -> Any:
            ins = self._insert(leases)
            ex = ins.excluded
            return ins.on_conflict_do_update(
                index_elements=[leases.c.task_id, leases.c.attempt],
                set_={
                    "worker_id": ex.worker_id,
                    "expires_at": ex.expires_at,
                    "acquired_at": ex.acquired_at,
                    "sequence_number": ex.sequence_number,
                    "queue_name": ex.queue_name,
                    "released": ex.released,
                    "slot": ex.slot,
                    "settled_at": ex.settled_at,
                },
                where=sa.or_(leases.c.released == sa.true(), leases.c.expires_at <= _b("b_now")),
            ).returning(leases.c.task_id)

        values = {
            "task_id": task_id,
            "attempt": attempt,
            "worker_id": worker_id,
            "expires_at": expires_at,
            "acquired_at": now,
            "sequence_number": sequence_number,
            "queue_name": queue_name,
            "released": False,
            "slot": slot,
            "settled_at": None,  # a new hand-out's message is not settled
            "b_now": now,
        }
        return self._exec(conn, "acquire_lease", build, values).first() is not None

    def acquire_lease(
        self,
        task_id: str,
        attempt: int,
        worker_id: str,
        *,
        expires_at: int,
        now: int,
        sequence_number: int | None = None,
        queue_name: str | None = None,
    ) -> bool:
        with self._write() as conn:
            return self._acquire_lease(
                conn, task_id, attempt, worker_id, expires_at, now, sequence_number, queue_name
            )

    def get_lease(self, task_id: str, attempt: int | None = None) -> Lease | None:
        def current() -> Any:
            return (
                sa.select(leases)
                .join(
                    tasks,
                    sa.and_(
                        tasks.c.task_id == leases.c.task_id, tasks.c.attempt == leases.c.attempt
                    ),
                )
                .where(leases.c.task_id == _b("b_task_id"))
            )

        def of_attempt() -> Any:
            return sa.select(leases).where(
                leases.c.task_id == _b("b_task_id"), leases.c.attempt == _b("b_attempt")
            )

        with self._read() as conn:
            if attempt is None:
                rows = self._exec(conn, "get_current_lease", current, {"b_task_id": task_id})
            else:
                params = {"b_task_id": task_id, "b_attempt": attempt}
                rows = self._exec(conn, "get_lease", of_attempt, params)
            row = rows.first()
        return None if row is None else self._lease(row)

    def is_lease_holder(
        self, task_id: str, worker_id: str, *, attempt: int | None = None, now: int | None = None
    ) -> bool:
        stmt = (
            sa.select(sa.literal(1))
            .select_from(leases)
            .join(
                tasks,
                sa.and_(tasks.c.task_id == leases.c.task_id, tasks.c.attempt == leases.c.attempt),
            )
            .where(
                leases.c.task_id == task_id,
                leases.c.worker_id == worker_id,
                leases.c.released == sa.false(),
            )
        )
        if attempt is not None:
            stmt = stmt.where(leases.c.attempt == attempt)
        if now is not None:
            stmt = stmt.where(leases.c.expires_at > now)
        with self._read() as conn:
            return conn.execute(stmt).first() is not None

    def release_lease(self, task_id: str, attempt: int, worker_id: str | None = None) -> bool:
        with self._write() as conn:
            return self._release_lease(conn, task_id, attempt, worker_id)

    def _release_lease(
        self, conn: Connection, task_id: str, attempt: int, worker_id: str | None
    ) -> bool:
        def build() -> Any:
            stmt = sa.update(leases).where(
                leases.c.task_id == _b("b_task_id"),
                leases.c.attempt == _b("b_attempt"),
                leases.c.released == sa.false(),
            )
            if worker_id is not None:
                stmt = stmt.where(leases.c.worker_id == _b("b_worker_id"))
            return stmt.values(released=True).returning(leases.c.slot)

        params = {"b_task_id": task_id, "b_attempt": attempt, "b_worker_id": worker_id}
        if worker_id is None:
            del params["b_worker_id"]
        row = self._exec(conn, ("release_lease", worker_id is not None), build, params).first()
        if row is None:
            return False
        if row["slot"] is not None:
            self._release_slot(conn, row["slot"])
        return True

    def extend_lease(
        self, task_id: str, attempt: int, worker_id: str, *, expires_at: int, now: int
    ) -> bool:
        def build() -> Any:
            return (
                sa.update(leases)
                .where(
                    leases.c.task_id == _b("b_task_id"),
                    leases.c.attempt == _b("b_attempt"),
                    leases.c.worker_id == _b("b_worker_id"),
                    leases.c.released == sa.false(),
                )
                .values(expires_at=_b("v_expires_at"), acquired_at=_b("v_now"))
            )

        params = {
            "b_task_id": task_id,
            "b_attempt": attempt,
            "b_worker_id": worker_id,
            "v_expires_at": expires_at,
            "v_now": now,
        }
        with self._write() as conn:
            return self._exec(conn, "extend_lease", build, params).rowcount == 1

    def expire_lease(self, task_id: str, attempt: int, now: int) -> bool:
        def build() -> Any:
            return (
                sa.update(leases)
                .where(
                    leases.c.task_id == _b("b_task_id"),
                    leases.c.attempt == _b("b_attempt"),
                    leases.c.expires_at > _b("b_now"),
                )
                .values(expires_at=_b("b_now"))
            )

        params = {"b_task_id": task_id, "b_attempt": attempt, "b_now": now}
        with self._write() as conn:
            return self._exec(conn, "expire_lease", build, params).rowcount == 1

    def mark_settled(self, task_id: str, attempt: int, sequence_number: int, now: int) -> bool:
        def build() -> Any:
            return (
                sa.update(leases)
                .where(
                    leases.c.task_id == _b("b_task_id"),
                    leases.c.attempt == _b("b_attempt"),
                    leases.c.sequence_number == _b("b_sequence_number"),
                    leases.c.settled_at.is_(None),
                )
                .values(settled_at=_b("v_now"))
            )

        params = {
            "b_task_id": task_id,
            "b_attempt": attempt,
            "b_sequence_number": sequence_number,
            "v_now": now,
        }
        with self._write() as conn:
            return self._exec(conn, "mark_settled", build, params).rowcount == 1

    def mark_settled_later(
        self, task_id: str, attempt: int, sequence_number: int, now: int
    ) -> None:
        """As :meth:`mark_settled`, in this thread's batch when it is in one; otherwise
        kept with the other marks of the last ``_MARKS_DELAY_SECONDS`` and written with
        them in one transaction (by the call that finds them due, by
        :meth:`unsettled_attempts` or :meth:`close`). A mark is only ever a shortcut for
        the sweep (a lease not marked makes it ask the queue, which answers that the
        message is settled): one lost with the process, or refused by a store outage,
        costs that question, so a result pays for no transaction of its own here."""
        if getattr(self._batch, "conn", None) is not None:
            self.mark_settled(task_id, attempt, sequence_number, now)
            return
        with self._marks_lock:
            if not self._marks:
                self._marks_due = time.monotonic() + _MARKS_DELAY_SECONDS
            self._marks.append((task_id, attempt, sequence_number, now))
            due = time.monotonic() >= self._marks_due
        if due:
            self.flush_marks()

    def flush_marks(self) -> None:
        """Write the marks kept by :meth:`mark_settled_later`, in one transaction; a
        store that refuses them drops them (logged)."""
        with self._marks_lock:
            marks, self._marks = self._marks, []
        if not marks:
            return
        try:
            with self.batch():
                for task_id, attempt, sequence_number, now in marks:
                    self.mark_settled(task_id, attempt, sequence_number, now)
        except (RunStoreUnavailable, RunStoreRefused) as exc:
            _log.info(
                "%d settled message(s) not recorded (the sweep asks again): %s", len(marks), exc
            )

    def unsettled_attempts(
        self, before: int, *, limit: int = 100, after: tuple[int, str, int] | None = None
    ) -> list[EndedAttempt]:
        if limit <= 0:
            return []

        def build() -> Any:
            return self._unsettled_statement(after is not None)

        self.flush_marks()  # what this process knows is settled is not listed
        params: dict[str, Any] = {"b_before": before, "b_limit": limit}
        if after is not None:
            params["b_after_at"], params["b_after_task"], params["b_after_attempt"] = after
        with self._read() as conn:
            rows = self._exec(conn, ("unsettled_attempts", after is not None), build, params)
        return [
            EndedAttempt(
                lease=self._lease({c.name: r[c.name] for c in leases.c}),
                row_attempt=int(r["row_attempt"]),
                status=TaskStatus(r["row_status"]),
                retried=bool(r["row_retried"]),
                reason_for_incompletion=r["row_reason"],
            )
            for r in rows
        ]

    @staticmethod
    def _unsettled_statement(paged: bool) -> Any:
        """The statement of ``unsettled_attempts``. Its first two conditions are those of
        the partial index ``ix_leases_unsettled`` (run_store_migrations 0007), written
        alike so that both databases use it: the scan reads only the leases not marked
        settled, in the index's order, and joins each to its task row and run row by
        their keys."""
        at_attempt = tasks.c.attempt == leases.c.attempt
        failed = [
            TaskStatus.FAILED.value,
            TaskStatus.FAILED_WITH_TERMINAL_ERROR.value,
            TaskStatus.TIMED_OUT.value,
        ]
        ended = [
            TaskStatus.COMPLETED.value,
            TaskStatus.COMPLETED_WITH_ERRORS.value,
            TaskStatus.SKIPPED.value,
            TaskStatus.CANCELED.value,
        ]
        no_retry_to_come = sa.or_(
            tasks.c.retried == sa.true(),
            runs.c.workflow_id.is_(None),
            _one_of(runs.c.status, _values(RUN_TERMINAL)),
        )
        over = sa.or_(
            tasks.c.attempt > leases.c.attempt,
            sa.and_(at_attempt, _one_of(tasks.c.status, ended)),
            sa.and_(at_attempt, _one_of(tasks.c.status, failed), no_retry_to_come),
        )
        stmt = (
            sa.select(
                *leases.c,
                tasks.c.attempt.label("row_attempt"),
                tasks.c.status.label("row_status"),
                tasks.c.retried.label("row_retried"),
                tasks.c.reason_for_incompletion.label("row_reason"),
            )
            .select_from(
                leases.join(tasks, tasks.c.task_id == leases.c.task_id).outerjoin(
                    runs, runs.c.workflow_id == tasks.c.workflow_id
                )
            )
            .where(
                leases.c.settled_at.is_(None),
                leases.c.sequence_number.is_not(None),
                leases.c.queue_name.is_not(None),
                leases.c.acquired_at <= _b("b_before"),
                sa.func.coalesce(tasks.c.update_time, 0) <= _b("b_before"),
                over,
            )
            .order_by(leases.c.acquired_at, leases.c.task_id, leases.c.attempt)
            .limit(sa.bindparam("b_limit", type_=sa.Integer))
        )
        if paged:
            stmt = stmt.where(
                sa.tuple_(leases.c.acquired_at, leases.c.task_id, leases.c.attempt)
                > sa.tuple_(_b("b_after_at"), _b("b_after_task"), _b("b_after_attempt"))
            )
        return stmt

    # --- limits ---------------------------------------------------------------

    def _take_slot(self, conn: Connection, task_type: str, limit: int) -> bool:
        def build() -> Any:
            ins = self._insert(concurrency_counters)
            return ins.on_conflict_do_update(
                index_elements=[concurrency_counters.c.task_type],
                set_={"in_use": concurrency_counters.c.in_use + 1},
                where=(concurrency_counters.c.in_use < _b("b_limit")) if limit > 0 else sa.true(),
            ).returning(concurrency_counters.c.in_use)

        params: dict[str, Any] = {"task_type": task_type, "in_use": 1}
        if limit > 0:
            params["b_limit"] = limit
        return self._exec(conn, ("take_slot", limit > 0), build, params).first() is not None

    def _release_slot(self, conn: Connection, task_type: str) -> None:
        def build() -> Any:
            return (
                sa.update(concurrency_counters)
                .where(
                    concurrency_counters.c.task_type == _b("b_task_type"),
                    concurrency_counters.c.in_use > 0,
                )
                .values(in_use=concurrency_counters.c.in_use - 1)
            )

        self._exec(conn, "release_slot", build, {"b_task_type": task_type})

    def try_acquire_concurrency(self, task_type: str, limit: int) -> bool:
        with self._write() as conn:
            return self._take_slot(conn, task_type, limit)

    def release_concurrency(self, task_type: str) -> None:
        with self._write() as conn:
            self._release_slot(conn, task_type)

    def concurrency_in_use(self, task_type: str) -> int:
        def build() -> Any:
            return sa.select(concurrency_counters.c.in_use).where(
                concurrency_counters.c.task_type == _b("b_task_type")
            )

        with self._read() as conn:
            value = self._exec(
                conn, "concurrency_in_use", build, {"b_task_type": task_type}
            ).scalar()
        return int(value or 0)

    def _take_rate(
        self, conn: Connection, task_type: str, per_frequency: int, frequency_seconds: int, now: int
    ) -> bool:
        if per_frequency <= 0 or frequency_seconds <= 0:
            return True

        def build() -> Any:
            ins = self._insert(rate_windows)
            ex = ins.excluded
            newer = rate_windows.c.window_start < ex.window_start
            return ins.on_conflict_do_update(
                index_elements=[rate_windows.c.task_type],
                set_={
                    "window_start": sa.case(
                        (newer, ex.window_start), else_=rate_windows.c.window_start
                    ),
                    "granted": sa.case((newer, 1), else_=rate_windows.c.granted + 1),
                },
                # A caller whose clock lags (older window) counts against the current window.
                where=sa.or_(newer, rate_windows.c.granted < _b("b_per")),
            ).returning(rate_windows.c.task_type)

        window_ms = frequency_seconds * 1000
        params = {
            "task_type": task_type,
            "window_start": now - now % window_ms,
            "granted": 1,
            "b_per": per_frequency,
        }
        return self._exec(conn, "take_rate", build, params).first() is not None

    def try_acquire_rate(
        self, task_type: str, per_frequency: int, frequency_seconds: int, now: int
    ) -> bool:
        if per_frequency <= 0 or frequency_seconds <= 0:
            return True
        with self._write() as conn:
            return self._take_rate(conn, task_type, per_frequency, frequency_seconds, now)
