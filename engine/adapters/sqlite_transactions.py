"""Transactions of the SQLite run store, each on its thread's own connection.

Going through SQLAlchemy, a transaction costs a pool checkout and checkin, a
``Connection`` and a ``Transaction`` object and their events: more than the statements
of a short transaction themselves. Here each thread keeps one connection of the engine
for as long as it lives, and a transaction is ``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` on
that connection's driver (``sqlite3``) connection:

* The engine has no pool (``NullPool``, see ``sqlite_engine``): a thread never waits for
  a pool slot, however many threads use the store.
* A write transaction opens with ``BEGIN IMMEDIATE``, a read with a plain ``BEGIN``.
  Waiting for the write lock that another process holds is short sleeps of our own,
  not SQLite's busy handler (``engine/adapters/sqlite_busy.py``). Listeners of the
  engine's ``before_cursor_execute`` event see these statements (and
  ``SAVEPOINT``, ``RELEASE``, ``ROLLBACK TO``) as they see every statement.
* A SQLAlchemy Core statement executed inside makes the connection begin a transaction
  of its own (autobegin); the engine's ``begin`` hook sees the driver already inside
  the store's transaction and issues nothing, and the store's commit or rollback ends
  SQLAlchemy's transaction with it.
* A thread's connection is closed when the thread ends (the thread's value of the
  ``threading.local`` is dropped) or by ``close()``; a connection inside a transaction
  at ``close()`` is closed by its thread when that transaction ends.
* A transaction opened while this thread's connection is already inside one (a read
  inside a write of the same thread), or after ``close()``, runs on a connection of its
  own, closed at its end.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from engine.adapters.sqlite_busy import BusyWait

SQLITE_BUSY_TIMEOUT_MS = 30_000

BEGIN_WRITE = "BEGIN IMMEDIATE"
BEGIN_READ = "BEGIN"
_SAVEPOINT = "stepway_partial"


def sqlite_engine(url: URL, **engine_kwargs: Any) -> Engine:
    """An engine for a SQLite file: WAL, a busy timeout, no pool, no implicit BEGIN of
    the driver; a transaction SQLAlchemy begins by itself (a caller of ``engine``)
    opens with ``BEGIN IMMEDIATE``. The busy timeout is the URL's ``timeout`` (seconds,
    the driver's parameter: ``sqlite:///runs.db?timeout=5``), else
    ``SQLITE_BUSY_TIMEOUT_MS``."""
    busy_timeout_ms = busy_timeout_of(url)
    engine_kwargs.setdefault("poolclass", NullPool)
    engine = sa.create_engine(url, **engine_kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves (pysqlite's implicit BEGIN is deferred).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        driver = conn.connection.driver_connection
        if driver.in_transaction:  # type: ignore[union-attr]
            return  # inside a transaction the store opened on the driver
        _driver_sql(conn, driver, BEGIN_WRITE)

    return engine


def busy_timeout_of(url: URL) -> int:
    """The busy timeout in ms of a SQLite URL (its ``timeout`` in seconds, else
    ``SQLITE_BUSY_TIMEOUT_MS``)."""
    raw = url.query.get("timeout")
    if raw is None:
        return SQLITE_BUSY_TIMEOUT_MS
    text = raw if isinstance(raw, str) else raw[-1]
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"timeout of the SQLite URL: expected seconds, got {text!r}") from None
    if not seconds >= 0:
        raise ValueError(f"timeout of the SQLite URL: must be at least 0, got {text!r}")
    return int(seconds * 1000)


def _driver_sql(conn: Connection, driver: Any, sql: str) -> None:
    """Run ``sql`` on the driver connection; the engine's ``before_cursor_execute``
    listeners see it."""
    if conn.engine.dispatch.before_cursor_execute:
        cursor = driver.cursor()
        try:
            conn.dispatch.before_cursor_execute(conn, cursor, sql, (), None, False)
            cursor.execute(sql)
        finally:
            cursor.close()
    else:
        driver.execute(sql)


class _Held:
    """A connection and its driver connection; ``lock`` is held by the thread using it
    for a transaction, and by ``close`` while it closes it."""

    __slots__ = ("__weakref__", "busy", "closed", "conn", "driver", "lock")

    def __init__(self, conn: Connection, busy_timeout_ms: int) -> None:
        self.conn = conn
        driver: Any = conn.connection.driver_connection
        self.driver = driver
        self.busy = BusyWait(driver, busy_timeout_ms)
        self.lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            # not contextlib.suppress: at exit __del__ may find that module gone
            try:  # noqa: SIM105
                self.conn.close()
            except Exception:
                pass  # closing what may be broken

    def __del__(self) -> None:
        # the thread that held it ended (or the store was dropped unclosed)
        self.close()


class _Transaction:
    """``with``: one transaction on this thread's connection (or one of its own)."""

    __slots__ = ("_begin", "_held", "_own", "_owner")

    def __init__(self, owner: SqliteTransactions, begin: str) -> None:
        self._owner = owner
        self._begin = begin

    def __enter__(self) -> Connection:
        owner = self._owner
        held = owner._hold()
        own = held is None
        if held is None:
            held = _Held(owner.engine.connect(), owner.busy_timeout_ms)
            held.lock.acquire()
        try:
            if self._begin == BEGIN_WRITE:
                conn, driver = held.conn, held.driver
                held.busy.retrying(lambda: _driver_sql(conn, driver, BEGIN_WRITE))
            else:
                held.busy.before_read()
                _driver_sql(held.conn, held.driver, self._begin)
        except BaseException:
            owner._release(held, own)
            raise
        self._held, self._own = held, own
        return held.conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        held, owner = self._held, self._owner
        try:
            if exc_type is None:
                try:
                    conn = held.conn
                    if conn.in_transaction():  # SQLAlchemy began one too: it commits
                        conn.commit()
                    else:
                        held.driver.commit()
                except BaseException:
                    owner._rollback(held)
                    raise
            else:
                owner._rollback(held)
        finally:
            owner._release(held, self._own)


class SqliteTransactions:
    """Transactions on one connection per thread of ``engine`` (see the module doc)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.busy_timeout_ms = busy_timeout_of(engine.url)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._closed = False

    def write(self) -> _Transaction:
        """A write transaction (``BEGIN IMMEDIATE``)."""
        return _Transaction(self, BEGIN_WRITE)

    def read(self) -> _Transaction:
        """A read transaction (``BEGIN``: one snapshot from its first read)."""
        return _Transaction(self, BEGIN_READ)

    @contextlib.contextmanager
    def savepoint(self, conn: Connection) -> Iterator[Connection]:
        """A savepoint inside the transaction of ``conn``: an exception rolls back
        what the block wrote, and only that."""
        driver = conn.connection.driver_connection
        _driver_sql(conn, driver, f"SAVEPOINT {_SAVEPOINT}")
        try:
            yield conn
        except BaseException:
            _driver_sql(conn, driver, f"ROLLBACK TO {_SAVEPOINT}")
            _driver_sql(conn, driver, f"RELEASE {_SAVEPOINT}")
            raise
        _driver_sql(conn, driver, f"RELEASE {_SAVEPOINT}")

    def close(self) -> None:
        """Close every thread's connection (one inside a transaction: when it ends).
        Transactions after this each run on a connection of their own."""
        self._closed = True
        with self._lock:
            every = list(self._all)
        for held in every:
            if held.lock.acquire(blocking=False):
                try:
                    held.close()
                finally:
                    held.lock.release()
            # else its thread is inside a transaction and closes it at the end

    # --- plumbing -------------------------------------------------------------

    def _hold(self) -> _Held | None:
        """This thread's connection, locked; None when it is in use by this thread
        already or the store is closed."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            if self._closed:
                return None
            held = _Held(self.engine.connect(), self.busy_timeout_ms)
            with self._lock:
                self._all.add(held)
            self._local.held = held
        if not held.lock.acquire(blocking=False):
            return None  # this thread is inside a transaction on it (or close() is closing it)
        if held.closed or self._closed:
            held.close()
            held.lock.release()
            self._local.held = None
            return None
        return held

    def _release(self, held: _Held, own: bool) -> None:
        if own or self._closed:
            held.close()
        held.lock.release()

    def _rollback(self, held: _Held) -> None:
        try:
            conn = held.conn
            if conn.in_transaction():
                conn.rollback()
            else:
                held.driver.rollback()
        except Exception:
            # the connection is unusable: the thread gets a new one next time
            held.close()
            if getattr(self._local, "held", None) is held:
                self._local.held = None
