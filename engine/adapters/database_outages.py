"""Which database errors mean "unavailable right now", and in what words.

The run store (SQLite or PostgreSQL through SQLAlchemy, ``run_store_sql.py``) and the
SQLite task queue (``queue_sqlite.py``) turn these errors into their port's
``RunStoreUnavailable`` and ``QueueUnavailable`` where their transactions begin and end.
An error is an outage when the same call can succeed later with no change to data or
code: a lock held past the busy timeout, a connection refused or lost, a server shutting
down, starting up or out of resources, a lock or deadlock conflict, a disk that failed
or filled. Integrity errors, SQL errors, a missing table or a value too large are not:
they are left as the database raised them.

The words are fixed phrases, never the driver's message: SQLAlchemy's message holds the
statement and its parameters (user data), PostgreSQL's the server's address and user.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import sqlalchemy as sa

__all__ = ["Outage", "is_sqlite_busy", "outage_of", "refusal_of"]

_CONNECTION_LOST = "the connection to the database was lost"

#: SQLite's primary result codes (https://sqlite.org/rescode.html) that are outages
_SQLITE = {
    sqlite3.SQLITE_BUSY: "database is locked",  # the busy timeout ran out
    6: "a table of the database is locked",  # SQLITE_LOCKED
    10: "disk I/O error",  # SQLITE_IOERR
    13: "database or disk is full",  # SQLITE_FULL
    14: "cannot open the database file",  # SQLITE_CANTOPEN
    15: "database locking protocol error",  # SQLITE_PROTOCOL
}

#: PostgreSQL SQLSTATE codes and classes (two characters) that are outages
#: (https://www.postgresql.org/docs/current/errcodes-appendix.html)
_POSTGRES = {
    "08": "cannot connect to the database",  # connection exception
    "40001": "the transaction conflicted with another (serialization failure)",
    "40P01": "the transaction conflicted with another (deadlock)",
    "53": "the database is out of resources",  # disk full, out of memory, too many connections
    "55P03": "a lock of the database was not available in time",
    "57014": "a statement was cancelled (statement timeout)",
    "57P01": "the database is shutting down",  # admin shutdown
    "57P02": "the database is restarting",  # crash shutdown
    "57P03": "the database is not accepting connections yet",  # cannot connect now
    "57P05": _CONNECTION_LOST,  # idle session timeout
    "58": "the database had a system error",  # I/O error
}


@dataclass(frozen=True)
class Outage:
    #: what is unavailable, safe to show a caller
    reason: str
    #: the driver's error class and code, for the server's log
    detail: str
    #: the driver's own error (never SQLAlchemy's wrapper, whose message holds the
    #: statement's parameters): the cause to chain the port's error to
    cause: BaseException


def outage_of(exc: BaseException) -> Outage | None:
    """The outage ``exc`` reports, or None when it is not one."""
    if isinstance(exc, sa.exc.DBAPIError):
        orig = exc.orig if isinstance(exc.orig, BaseException) else exc
        if exc.connection_invalidated:
            return Outage(_CONNECTION_LOST, _name(orig), orig)
        return _driver_outage(orig)
    if isinstance(exc, sa.exc.DisconnectionError):
        return Outage(_CONNECTION_LOST, _name(exc), exc)
    if isinstance(exc, sa.exc.TimeoutError):  # no connection of the pool free in time
        return Outage("no connection to the database was free in time", _name(exc), exc)
    return _driver_outage(exc)


def is_sqlite_busy(exc: BaseException) -> bool:
    """``exc`` is SQLite's "database is locked" (SQLITE_BUSY, any extended code): a lock
    another connection holds, met with no busy timeout left."""
    return isinstance(exc, sqlite3.OperationalError) and _sqlite_code(exc) == sqlite3.SQLITE_BUSY


def _sqlite_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``exc`` (its extended code's low byte)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _driver_outage(exc: BaseException) -> Outage | None:
    if isinstance(exc, sqlite3.Error):
        code = _sqlite_code(exc)
        reason = _SQLITE.get(code) if code is not None else None
        if reason is None:
            return None
        return Outage(reason, f"{_name(exc)} {getattr(exc, 'sqlite_errorname', code)}", exc)
    return _postgres_outage(exc)


def _postgres_outage(exc: BaseException) -> Outage | None:
    if not type(exc).__module__.startswith("psycopg"):
        return None  # not PostgreSQL's driver: nothing to import
    import psycopg

    if isinstance(exc, psycopg.InterfaceError):  # "the connection is closed"
        return Outage(_CONNECTION_LOST, _name(exc), exc)
    if not isinstance(exc, psycopg.OperationalError):
        return None
    sqlstate = exc.sqlstate
    if sqlstate is None:  # refused, reset, timed out: libpq's, not the server's
        return Outage("cannot connect to the database", f"{_name(exc)} (no SQLSTATE)", exc)
    reason = _POSTGRES.get(sqlstate) or _POSTGRES.get(sqlstate[:2])
    if reason is None:
        return None
    return Outage(reason, f"{_name(exc)} SQLSTATE {sqlstate}", exc)


def _name(exc: BaseException) -> str:
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


def refusal_of(exc: BaseException) -> str:
    """What the database said when it refused a call, without the values: the driver's
    error class, its code (SQLSTATE, or SQLite's error name) and the primary message.
    PostgreSQL's ``DETAIL`` (which quotes the failing row) and SQLAlchemy's statement and
    parameters are left out."""
    orig: BaseException = exc
    if isinstance(exc, sa.exc.DBAPIError) and isinstance(exc.orig, BaseException):
        orig = exc.orig
    primary = getattr(getattr(orig, "diag", None), "message_primary", None)
    if isinstance(primary, str) and primary:
        return f"{type(orig).__name__} (SQLSTATE {getattr(orig, 'sqlstate', None)}): {primary}"
    first = str(orig).splitlines()[0] if str(orig) else ""
    if isinstance(orig, sqlite3.Error):
        name = getattr(orig, "sqlite_errorname", None)
        return (
            f"{type(orig).__name__} ({name}): {first}"
            if name
            else f"{type(orig).__name__}: {first}"
        )
    if isinstance(orig, sa.exc.DBAPIError) or type(orig).__module__.startswith("psycopg"):
        return type(orig).__name__  # its message may quote the statement's values
    return f"{type(orig).__name__}: {first}"
