"""Wake-ups between processes that share one SQLite queue file.

A long poll waits on an in-process signal that a send in the same process sets
(``engine/adapters/queue_sqlite.py``). A send in another process (the engine's dispatch,
when the Task API runs in ``stepway serve`` apart from ``stepway engine``) used to be
noticed only by the receiver's idle re-reads, 20 ms growing to 250 ms apart: that much
latency on every WORKER step of the split shape.

The doorbell closes that gap without a broker:

* A process that waits on the file binds a UDP socket on the loopback interface (an
  ephemeral port) and registers it in the file's ``sbq_doorbells`` table, refreshing its
  row every :data:`HEARTBEAT_SECONDS`. A thread of its own reads the socket; each
  datagram names a queue (empty: every queue) and wakes that queue's longest-waiting
  receiver of the process, exactly as a local send does.
* A send rings every other registered port: one ``sendto`` per listening process, no
  transaction (the ports are re-read at most every :data:`PORTS_TTL_SECONDS`).

A doorbell is a hint, never the truth: the queue rows are. A lost or spurious datagram
costs at most one idle re-read (the receivers keep re-reading as before, so a process
registered a moment ago, or a datagram dropped under load, delays a message by at most
that interval). Rows of processes that stopped without deregistering are ignored after
:data:`STALE_SECONDS` and deleted by the next heartbeat of any process. Only the
loopback interface is used; anyone on the machine who can write the file can ring, and a
ring can only make a receiver look again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable

__all__ = ["HEARTBEAT_SECONDS", "PORTS_TTL_SECONDS", "STALE_SECONDS", "Doorbell"]

log = logging.getLogger(__name__)

#: how often a listening process refreshes its row
HEARTBEAT_SECONDS = 5.0
#: a row not refreshed for this long is a process that is gone
STALE_SECONDS = 3 * HEARTBEAT_SECONDS
#: how long a ringing process keeps the list of ports before reading it again
PORTS_TTL_SECONDS = 1.0

_LOOPBACK = "127.0.0.1"
_MAX_DATAGRAM = 2048

SCHEMA = """
CREATE TABLE IF NOT EXISTS sbq_doorbells (
    port     INTEGER PRIMARY KEY,
    pid      INTEGER NOT NULL,
    seen_at  REAL NOT NULL
)
"""


class Doorbell:
    """The doorbell of one process on one queue file. ``on_ring(queue)`` is called from
    the listening thread for each ring another process sends (``queue`` None: every
    queue). Listening starts on the first :meth:`listen`; :meth:`ring` works without it.
    ``write_lock`` is the lock this process's writers of the file take (its own writes,
    the heartbeat, queue up behind them rather than in SQLite's busy handler). The table
    is :data:`SCHEMA`, created with the queue's own tables.
    """

    def __init__(
        self,
        path: str,
        on_ring: Callable[[str | None], None],
        *,
        write_lock: threading.Lock,
        busy_timeout_seconds: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = path
        self._write_lock = write_lock
        self._on_ring = on_ring
        self._busy_timeout = busy_timeout_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None
        self._sock: socket.socket | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ports: tuple[int, ...] = ()
        self._ports_read_at = float("-inf")
        self._broken = False

    # -- the file ------------------------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        """This doorbell's own connection (used under ``self._lock`` only)."""
        if self._con is None:
            con = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            con.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
            self._con = con
        return self._con

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((_LOOPBACK, 0))
            self._sock = sock
            self._port = sock.getsockname()[1]
        return self._sock

    def _heartbeat(self) -> None:
        now = self._clock()
        with self._lock, self._write_lock:
            con = self._db()
            con.execute(
                "INSERT OR REPLACE INTO sbq_doorbells (port, pid, seen_at) VALUES (?, ?, ?)",
                (self._port, os.getpid(), now),
            )
            con.execute("DELETE FROM sbq_doorbells WHERE seen_at < ?", (now - STALE_SECONDS,))

    # -- listening -----------------------------------------------------------------------

    @property
    def port(self) -> int | None:
        """The loopback port this process listens on (None: not listening)."""
        return self._port if self._thread is not None else None

    def listen(self) -> None:
        """Start listening (once; idempotent). A failure to bind or register leaves the
        process on its idle re-reads, logged once."""
        if self._thread is not None or self._broken or self._stop.is_set():
            return
        with self._lock:
            if self._thread is not None or self._broken or self._stop.is_set():
                return  # listening already, cannot, or closed
            try:
                self._socket().settimeout(HEARTBEAT_SECONDS)
            except OSError as exc:
                self._give_up("bind a loopback socket", exc)
                return
            thread = threading.Thread(
                target=self._serve, name=f"queue-doorbell-{self._port}", daemon=True
            )
            self._thread = thread
        try:
            self._heartbeat()
        except sqlite3.Error as exc:
            self._give_up("register in the queue file", exc)
            return
        thread.start()

    def _give_up(self, what: str, exc: BaseException) -> None:
        self._broken = True
        log.warning(
            "queue doorbell: could not %s (%s); long polls notice sends of other "
            "processes by re-reading the queue",
            what,
            exc,
        )

    def _serve(self) -> None:
        sock = self._sock
        assert sock is not None
        next_beat = time.monotonic() + HEARTBEAT_SECONDS
        while not self._stop.is_set():
            try:
                data = sock.recv(_MAX_DATAGRAM)
            except TimeoutError:
                data = None
            except OSError:
                if self._stop.is_set():
                    return
                data = None
            if data is not None and not self._stop.is_set():
                try:
                    self._on_ring(data.decode("utf-8") if data else None)
                except UnicodeDecodeError:
                    self._on_ring(None)  # not ours to parse: look at every queue
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + HEARTBEAT_SECONDS
                with contextlib.suppress(sqlite3.Error):
                    self._heartbeat()

    # -- ringing -------------------------------------------------------------------------

    def _other_ports(self) -> tuple[int, ...]:
        now = self._clock()
        if now - self._ports_read_at < PORTS_TTL_SECONDS:
            return self._ports
        with self._lock:
            rows = self._db().execute(
                "SELECT port FROM sbq_doorbells WHERE seen_at >= ?", (now - STALE_SECONDS,)
            )
            ports = [port for (port,) in rows]
        own = self._port if self._thread is not None else None
        self._ports = tuple(port for port in ports if port != own)
        self._ports_read_at = now
        return self._ports

    def ring(self, queue: str | None) -> None:
        """Tell every other listening process that ``queue`` (None: any queue) may have
        a message to receive. Never raises: a doorbell that cannot ring leaves the
        others on their idle re-reads."""
        if self._broken or self._stop.is_set():
            return
        try:
            ports = self._other_ports()
            if not ports:
                return
            payload = b"" if queue is None else queue.encode("utf-8")
            sock = self._sock or self._send_socket()
            for port in ports:
                with contextlib.suppress(OSError):  # gone, or its buffer is full
                    sock.sendto(payload, (_LOOPBACK, port))
        except (OSError, sqlite3.Error) as exc:
            self._give_up("ring the other processes", exc)

    def _send_socket(self) -> socket.socket:
        with self._lock:
            return self._socket()

    # -- stopping ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening and deregister (the row would go stale otherwise)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and self._sock is not None and self._port is not None:
            with contextlib.suppress(OSError):  # wake the listening thread to stop it
                self._sock.sendto(b"", (_LOOPBACK, self._port))
            if thread is not threading.current_thread():
                thread.join(timeout=2 * HEARTBEAT_SECONDS)
        with self._lock, self._write_lock:
            if thread is not None and self._con is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._con.execute("DELETE FROM sbq_doorbells WHERE port = ?", (self._port,))
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.close()
            if self._con is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._con.close()
            self._sock = self._con = None
