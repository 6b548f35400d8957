"""Concurrency rules of the Task API with 8 workers polling over real HTTP."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.unit.control_plane.conftest import Server, taskdef

pytestmark = pytest.mark.both_storage_modes


def _workers(
    srv: Server,
    task_type: str,
    n: int,
    stop: threading.Event,
    hold: float,
    handed: list[str],
    accepted: list[str],
    on_task: Any = None,
    count: int = 10,
) -> list[threading.Thread]:
    lock = threading.Lock()

    def work(i: int) -> None:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            while not stop.is_set():
                r = c.get(
                    f"/api/tasks/poll/batch/{task_type}",
                    params={"workerid": f"w{i}", "count": count, "timeout": 200},
                )
                assert r.status_code == 200, r.text
                for t in r.json():
                    with lock:
                        handed.append(t["taskId"])
                    if on_task:
                        on_task(+1)
                    time.sleep(hold)
                    if on_task:
                        on_task(-1)
                    res = c.post(
                        "/api/tasks",
                        json={"taskId": t["taskId"], "status": "COMPLETED", "workerId": f"w{i}"},
                    )
                    if res.status_code == 200:
                        with lock:
                            accepted.append(t["taskId"])

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def _wait(cond: Any, seconds: float) -> None:
    deadline = time.time() + seconds
    while not cond():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_concurrent_exec_limit_holds_across_8_workers(srv: Server) -> None:
    srv.register(taskdef("lim", concurrentExecLimit=2))
    ids = [srv.dispatch("lim") for _ in range(12)]
    in_flight, peak = 0, 0
    lock = threading.Lock()

    def on_task(delta: int) -> None:
        nonlocal in_flight, peak
        with lock:
            in_flight += delta
            peak = max(peak, in_flight)
            assert srv.deps.run_store.concurrency_in_use("lim") <= 2

    stop = threading.Event()
    handed: list[str] = []
    accepted: list[str] = []
    threads = _workers(srv, "lim", 8, stop, 0.05, handed, accepted, on_task)
    _wait(lambda: len(set(accepted)) == len(ids), 30)
    stop.set()
    for t in threads:
        t.join(5)
    assert peak <= 2 and sorted(set(accepted)) == sorted(ids)
    assert srv.deps.run_store.concurrency_in_use("lim") == 0


def test_rate_limit_per_window_is_never_exceeded(srv: Server) -> None:
    srv.register(taskdef("rate", rateLimitPerFrequency=3, rateLimitFrequencyInSeconds=1))
    ids = [srv.dispatch("rate") for _ in range(9)]
    stop = threading.Event()
    handed: list[str] = []
    accepted: list[str] = []
    threads = _workers(srv, "rate", 8, stop, 0.0, handed, accepted)
    _wait(lambda: len(set(accepted)) == len(ids), 30)
    stop.set()
    for t in threads:
        t.join(5)
    windows = Counter(
        (srv.deps.run_store.get_task(i).start_time or 0) // 1000  # type: ignore[union-attr]
        for i in ids
    )
    assert max(windows.values()) <= 3, windows


def test_1000_tasks_each_accepted_exactly_once(srv: Server) -> None:
    srv.register(taskdef("bulk"))
    wf = srv.run()
    ids = [srv.dispatch("bulk", workflow_id=wf) for _ in range(1000)]
    stop = threading.Event()
    handed: list[str] = []
    accepted: list[str] = []
    threads = _workers(srv, "bulk", 8, stop, 0.0, handed, accepted, count=20)
    _wait(lambda: len(accepted) >= 1000, 60)
    stop.set()
    for t in threads:
        t.join(5)
    assert len(handed) == 1000 and len(set(handed)) == 1000  # nothing handed out twice
    assert sorted(accepted) == sorted(ids)
    results = [e for e in srv.signals.events() if not (e.name or "").endswith(".started")]
    assert Counter(e.name for e in results) == Counter(ids)
