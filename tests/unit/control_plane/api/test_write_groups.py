"""The Task API's writes grouped per turn of the event loop (local adapters:
control_plane/services/write_groups.py), counted on a real SQLite run store and queue.

What a worker sees is what it saw with one transaction per call: its result accepted
once, its own error, a task handed out to one worker only, 503 when the run store is
locked and its retry accepted once. What changes is the number of transactions, which
is what these tests count (statements, not times).

The grouped requests are sent in process (httpx's ASGI transport, to an app of its own
over the same stores) so that they reach the app in one turn of its loop; the real
HTTP cases at the end send them from worker threads as workers would."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from control_plane.api.app import create_app
from engine.ports.run_store import TaskStatus
from tests.unit.control_plane.api.test_store_outages import LOCKED, locked, store_file
from tests.unit.control_plane.conftest import Server, taskdef

TYPE = "grouped"


class _Begins:
    """The write transactions this thread opens on the run store and on the queue."""

    def __init__(self) -> None:
        self.store = 0
        self.queue = 0


@contextmanager
def write_transactions(srv: Server) -> Iterator[_Begins]:
    begins = _Begins()
    me = threading.get_ident()

    def on_store(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if threading.get_ident() == me and statement.startswith("BEGIN IMMEDIATE"):
            begins.store += 1

    def on_queue(statement: str) -> None:
        if statement.startswith("BEGIN IMMEDIATE"):
            begins.queue += 1

    engine = srv.deps.run_store.engine  # type: ignore[attr-defined]
    con: sqlite3.Connection = srv.deps.queue.database.connection()  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", on_store)
    con.set_trace_callback(on_queue)
    try:
        yield begins
    finally:
        event.remove(engine, "before_cursor_execute", on_store)
        con.set_trace_callback(None)


def handed_out(srv: Server, n: int) -> list[dict[str, Any]]:
    """``n`` tasks dispatched and polled by workers w0..w(n-1), one each."""
    for _ in range(n):
        srv.dispatch(TYPE)
    tasks = []
    for i in range(n):
        r = srv.client.get(f"/api/tasks/poll/batch/{TYPE}", params={"workerid": f"w{i}"})
        assert r.status_code == 200, r.text
        [task] = r.json()
        tasks.append(task)
    return tasks


def result(task: dict[str, Any], worker: str, **fields: Any) -> dict[str, Any]:
    return {
        "taskId": task["taskId"],
        "workflowInstanceId": task["workflowInstanceId"],
        "status": "COMPLETED",
        "workerId": worker,
        "outputData": {"by": worker},
        **fields,
    }


def post_together(srv: Server, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """POST each body to update-v2 at once, on an app of its own over ``srv``'s stores,
    in this thread's event loop."""
    app = create_app(srv.settings, srv.deps)

    async def send() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stepway") as client:
            return list(
                await asyncio.gather(
                    *(client.post("/api/tasks/update-v2", json=body) for body in bodies)
                )
            )

    # a loop of its own, not made this thread's current loop (asyncio.run would leave
    # the thread without one, and later tests of the session ask for it)
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(send())
    finally:
        loop.close()
        app.close()


@pytest.fixture
def grouped(srv: Server) -> Server:
    srv.register(taskdef(TYPE))
    return srv


def test_results_arriving_together_share_two_store_and_one_queue_transaction(
    grouped: Server,
) -> None:
    srv = grouped
    tasks = handed_out(srv, 8)
    waiting = [srv.dispatch(TYPE) for _ in range(8)]
    with write_transactions(srv) as begins:
        answers = post_together(srv, [result(t, f"w{i}") for i, t in enumerate(tasks)])

    assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers]
    # each worker got a next task of its own, handed out to it
    nexts = [a.json() for a in answers]
    assert sorted(n["taskId"] for n in nexts) == sorted(waiting)
    for i, n in enumerate(nexts):
        assert n["workerId"] == f"w{i}" and n["status"] == "IN_PROGRESS"
    for i, t in enumerate(tasks):
        row = srv.deps.run_store.get_task(t["taskId"])
        assert row is not None and row.status == TaskStatus.COMPLETED
        assert row.output_data == {"by": f"w{i}"}
        assert len(srv.signals.events(t["taskId"])) == 1
    # the results' messages were completed: nothing is left deferred but the new tasks'
    assert srv.deps.queue.depth(TYPE).deferred == 8
    # the results in one run-store transaction; their messages settled and the next
    # tasks received, handed out and deferred in one of each (alone: 16 and 24)
    assert (begins.store, begins.queue) == (2, 1)


def test_a_request_that_fails_in_a_group_fails_alone(grouped: Server) -> None:
    srv = grouped
    tasks = handed_out(srv, 3)
    waiting = srv.dispatch(TYPE)
    bodies = [
        result(tasks[0], "w0"),
        {**result(tasks[1], "w1"), "taskId": str(uuid.uuid4())},  # no such task
        result(tasks[1], "w1", attempt=2),  # it is at attempt 1
        result(tasks[2], "w2"),
    ]
    answers = post_together(srv, bodies)

    assert [a.status_code for a in answers] == [200, 404, 409, 204], [a.text for a in answers]
    assert answers[0].json()["taskId"] == waiting
    for t, status in zip(tasks, ["COMPLETED", "IN_PROGRESS", "COMPLETED"], strict=True):
        row = srv.deps.run_store.get_task(t["taskId"])
        assert row is not None and row.status == status
    # the task the refused result was for is still w1's to finish
    r = srv.client.post("/api/tasks", json=result(tasks[1], "w1"))
    assert r.status_code == 200, r.text
    assert len(srv.signals.events(tasks[1]["taskId"])) == 1


def test_a_locked_run_store_fails_the_group_and_the_retries_count_once(
    make_server: Any,
) -> None:
    srv: Server = make_server(busy_timeout_seconds=0.2)
    srv.register(taskdef(TYPE))
    tasks = handed_out(srv, 4)
    bodies = [result(t, f"w{i}") for i, t in enumerate(tasks)]
    with locked(store_file(srv)):
        answers = post_together(srv, bodies)
    for a in answers:
        assert a.status_code == 503 and LOCKED in a.json()["message"], a.text
    assert srv.signals.events() == []

    assert [a.status_code for a in post_together(srv, bodies)] == [204] * 4
    assert [a.status_code for a in post_together(srv, bodies)] == [204] * 4  # repeats
    for t in tasks:
        row = srv.deps.run_store.get_task(t["taskId"])
        assert row is not None and row.status == TaskStatus.COMPLETED
        assert len(srv.signals.events(t["taskId"])) == 1
    assert srv.deps.queue.depth(TYPE).total == 0


def test_update_v2_workers_and_a_dispatching_engine_lose_and_repeat_nothing(
    grouped: Server,
) -> None:
    """Eight workers over real HTTP (result, then the next task, in one call) while an
    engine thread dispatches as the engine's activities do, and settles a message inside
    its run-store batch (the lock order the groups follow: run store, then queue). Every
    task is handed out once and accepted once, and nothing waits on a lock for good."""
    srv = grouped
    total = 300
    wf = srv.run()
    dispatched: list[str] = []
    engine_done = threading.Event()

    def engine() -> None:
        for i in range(total):
            task_id = str(uuid.uuid4())
            srv.dispatch(TYPE, workflow_id=wf, task_id=task_id, ref=f"t{i}")
            dispatched.append(task_id)
            with srv.deps.run_store.batch():  # store lock held, then the queue's
                srv.deps.run_store.get_task(task_id)
                srv.deps.queue.settle_deferred(TYPE, 10**12)
        engine_done.set()

    handed: list[str] = []
    accepted: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            task: dict[str, Any] | None = None
            while not (engine_done.is_set() and task is None and len(accepted) >= total):
                if task is None:
                    r = c.get(
                        f"/api/tasks/poll/batch/{TYPE}",
                        params={"workerid": f"w{i}", "timeout": 100},
                    )
                    assert r.status_code == 200, r.text
                    task = (r.json() or [None])[0]
                    if task is not None:
                        with lock:
                            handed.append(task["taskId"])
                    continue
                r = c.post("/api/tasks/update-v2", json=result(task, f"w{i}"))
                assert r.status_code in (200, 204), r.text
                with lock:
                    accepted.append(task["taskId"])
                    task = r.json() if r.status_code == 200 else None
                    if task is not None:
                        handed.append(task["taskId"])

    threads = [threading.Thread(target=engine, daemon=True)]
    threads += [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 90
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), (len(dispatched), len(accepted))
    assert sorted(handed) == sorted(dispatched)  # each handed out once
    assert sorted(accepted) == sorted(dispatched)  # each accepted once
    results = [e for e in srv.signals.events() if not (e.name or "").endswith(".started")]
    assert Counter(e.name for e in results) == Counter(dispatched)
    assert srv.deps.queue.depth(TYPE).total == 0
