"""Waiting for a SQLite file's write lock: short sleeps, not SQLite's busy handler.

SQLite's own busy handler (``PRAGMA busy_timeout``) sleeps 1, 2, 5, 10, 15, 20, 25,
25, 25, 50, 50 and then 100 ms between tries. The stores' write transactions hold the
lock for tens of microseconds, so a writer that finds it taken by another process (two
``stepway serve`` processes, or ``serve`` and ``engine`` apart, on one data directory)
slept tens of times longer than the lock was held, and in the Task API's event loop
every request of that process waited with it: two Task API processes on one data
directory handed out fewer tasks than one (docs/benchmarks.md).

:class:`BusyWait` opens a write transaction (``BEGIN IMMEDIATE``) with the
connection's busy timeout at 0 and, while the lock is taken, tries again after a
sleep that starts at 50 microseconds and grows to at most 2 ms, until the connection's
busy timeout has passed; then it raises SQLite's own error (``SQLITE_BUSY``, "database
is locked"), as the busy handler would have. A one-statement read (the queue's
``read_row``, on every receive) is tried again the same way; a read transaction (whose
snapshot in WAL mode can meet a lock only in rare moments such as a recovery) keeps
SQLite's busy handler: the timeout is set back before it begins, so a connection
that only writes and reads single statements sets it once.
Inside one process the writers of a file already queue on a ``threading.Lock`` of
their store, so these waits are for other processes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from engine.adapters.database_outages import is_sqlite_busy

__all__ = ["BusyWait"]

T = TypeVar("T")

#: the first sleep between two tries of ``BEGIN IMMEDIATE``, and the longest
FIRST_SLEEP_SECONDS = 50e-6
LONGEST_SLEEP_SECONDS = 2e-3


class BusyWait:
    """The busy handling of one driver connection (see the module doc). Not thread
    safe: a connection is used by one thread at a time."""

    __slots__ = ("_driver", "_no_wait", "_timeout_ms")

    def __init__(self, driver: sqlite3.Connection, timeout_ms: int) -> None:
        self._driver = driver
        self._timeout_ms = timeout_ms
        self._no_wait = False  # the connection's busy timeout is 0 now

    def retrying(self, call: Callable[[], T]) -> T:
        """``call()`` with the connection's busy timeout at 0, tried again after short
        sleeps while it meets a lock, until the busy timeout has passed. Only for a
        call that can be tried again as a whole: a ``BEGIN IMMEDIATE``, or one
        statement outside a transaction."""
        if not self._no_wait:
            self._driver.execute("PRAGMA busy_timeout = 0")
            self._no_wait = True
        deadline: float | None = None
        sleep = FIRST_SLEEP_SECONDS
        while True:
            try:
                return call()
            except sqlite3.OperationalError as exc:
                if not is_sqlite_busy(exc):
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._timeout_ms / 1000
                if now >= deadline:
                    raise
            time.sleep(sleep)
            sleep = min(sleep * 2, LONGEST_SLEEP_SECONDS)

    def before_read(self) -> None:
        """Give reads SQLite's busy handler back (a no-op when they have it)."""
        if self._no_wait:
            self._driver.execute(f"PRAGMA busy_timeout = {self._timeout_ms}")
            self._no_wait = False
