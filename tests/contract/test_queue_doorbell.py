"""Long polls of one process are woken by sends of another on the same SQLite queue
file (``engine/adapters/queue_doorbell.py``), as ``stepway serve`` and ``stepway engine``
run apart: the Task API's held poll answers when the engine's dispatch sends, not when
its next idle re-read comes round."""

from __future__ import annotations

import queue
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from engine.adapters.queue_doorbell import STALE_SECONDS, Doorbell
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.ports.queue import QueueSettings

REPO_ROOT = Path(__file__).resolve().parents[2]

# A process of its own: says "ready", waits for "send", sends one message, says "sent".
_SENDER = textwrap.dedent(
    """
    import sys
    from engine.adapters.queue_sqlite import SqliteTaskQueue
    q = SqliteTaskQueue(sys.argv[1])
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "send":
            q.send(sys.argv[2], {"from": "child"}, "child-1")
            print("sent", flush=True)
        elif line.strip() == "stop":
            break
    q.close()
    """
)


def _bell(path: Path, rings: queue.Queue[str | None]) -> Doorbell:
    SqliteQueueProvisioner(path).close()  # the file and its tables
    return Doorbell(str(path), rings.put, write_lock=threading.Lock())


def test_a_ring_reaches_every_other_listening_doorbell(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    a_rings: queue.Queue[str | None] = queue.Queue()
    b_rings: queue.Queue[str | None] = queue.Queue()
    a, b = _bell(path, a_rings), _bell(path, b_rings)
    try:
        a.listen()
        b.listen()
        b.ring("orders")
        b.ring(None)
        assert a_rings.get(timeout=10) == "orders"
        assert a_rings.get(timeout=10) is None  # every queue
        assert b_rings.empty(), "a process does not ring itself"
    finally:
        a.close()
        b.close()


def test_a_closed_doorbell_deregisters_and_stale_rows_are_not_rung(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    rings: queue.Queue[str | None] = queue.Queue()
    a, b = _bell(path, rings), _bell(path, rings)
    a.listen()
    port = a.port
    a.close()
    con = sqlite3.connect(path)
    try:
        assert con.execute("SELECT COUNT(*) FROM sbq_doorbells").fetchone() == (0,)
        # a process that died without closing: its row is left, with an old heartbeat
        con.execute(
            "INSERT INTO sbq_doorbells (port, pid, seen_at) VALUES (?, 1, ?)",
            (port, time.time() - STALE_SECONDS - 1),
        )
        con.commit()
        assert b._other_ports() == ()
    finally:
        con.close()
        b.close()


def test_a_long_poll_is_woken_by_a_send_of_another_process(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    provisioner = SqliteQueueProvisioner(path)
    provisioner.ensure_queue("work", QueueSettings())
    # idle re-reads a minute apart: only the doorbell can answer the poll early
    q = SqliteTaskQueue(path, idle_poll_seconds=(60, 60))
    child = subprocess.Popen(
        [sys.executable, "-c", _SENDER, str(path), "work"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    got: list[object] = []
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        poll = threading.Thread(target=lambda: got.extend(q.receive("work", 1, 60.0)))
        started = time.monotonic()
        poll.start()
        time.sleep(0.5)  # the poll is waiting, its first read found nothing
        child.stdin.write("send\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "sent"
        poll.join(timeout=30)
        waited = time.monotonic() - started
        assert not poll.is_alive(), "the poll slept through the other process's send"
        assert [m.json() for m in got] == [{"from": "child"}]  # type: ignore[attr-defined]
        assert waited < 30, f"answered after {waited:.1f} s: by a re-read, not the doorbell"
        child.stdin.write("stop\n")
        child.stdin.flush()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
        q.close()
        provisioner.close()
