"""A run store or task queue that is unavailable right now, over real HTTP: its SQLite
file held by another connection's ``BEGIN EXCLUSIVE`` past a short busy timeout, or a
PostgreSQL server that cannot be reached. What a client sees: 503 with ``Retry-After``
and a retryable Conductor error body naming the dependency, never the statement's
parameters or the database's address and credentials; and once the dependency is back,
the same call succeeds, counted once."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.adapters.run_store_sql import SqlRunStore
from engine.ports.queue import QueueDepth, QueueUnavailable, dead_letter_queue_name
from engine.ports.run_store import RunQuery, RunStatus, RunUpdate
from engine.runtime.deferred_sweep import DeferredSweep
from engine.runtime.settlement import DEAD_LETTER_REASON
from tests.postgres_schemas import fresh_schema
from tests.unit.control_plane.conftest import Server, assert_error, free_port, taskdef

WORKFLOW = {
    "name": "wf",
    "version": 1,
    "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
}
#: in a start's input: what the run store's statement carries as a parameter
SECRET_INPUT = {"card": "4111-1111-1111-1111"}
LOCKED = "run store unavailable: database is locked"


@contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """Another connection holds the write lock of the SQLite file at ``path``."""
    lock = sqlite3.connect(path, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        lock.execute("COMMIT")
        lock.close()


def store_file(srv: Server) -> str:
    database = srv.deps.run_store.engine.url.database  # type: ignore[attr-defined]
    assert database
    return str(database)


def assert_unavailable(r: httpx.Response, message: str) -> dict[str, Any]:
    body = assert_error(r, 503)
    assert body["retryable"] is True, body
    assert body["validationErrors"] == [], body
    assert message in body["message"], body
    assert r.headers["Retry-After"] == "1"
    assert "4111" not in r.text and "INSERT" not in r.text and "SELECT" not in r.text, r.text
    return body


def poll(srv: Server, task_type: str, **params: Any) -> httpx.Response:
    return srv.client.get(
        f"/api/tasks/poll/batch/{task_type}", params={"workerid": "w1", "timeout": 0, **params}
    )


def polled_result(srv: Server, task_type: str, output: Any) -> tuple[str, dict[str, Any]]:
    """A task of ``task_type`` (registered here) dispatched and polled by ``w1``: its id
    and the COMPLETED result ``w1`` posts for it with ``output``."""
    srv.register(taskdef(task_type))
    task_id = srv.dispatch(task_type)
    [task] = poll(srv, task_type).json()
    return task_id, {
        "workflowInstanceId": task["workflowInstanceId"],
        "taskId": task_id,
        "status": "COMPLETED",
        "outputData": output,
        "workerId": "w1",
    }


# --- the workflow and metadata APIs ----------------------------------------------------


@pytest.mark.parametrize("local_adapters", [True, False], ids=["stored-then-started", "direct"])
def test_a_start_meeting_a_locked_run_store_answers_503_and_its_retry_makes_one_run(
    make_server: Any, local_adapters: bool
) -> None:
    srv: Server = make_server(local_adapters=local_adapters, busy_timeout_seconds=0.2)
    srv.register(taskdef("parse"))
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    start = {"name": "wf", "input": SECRET_INPUT, "idempotencyKey": "order-17"}

    with locked(store_file(srv)):
        assert_unavailable(srv.client.post("/api/workflow", json=start), LOCKED)
        # a read does not need the write lock (WAL): the store answers it
        assert srv.client.get("/api/workflow/none-such").status_code == 404
    assert srv.deps.run_store.search_runs(RunQuery()).total_hits == 0

    retried = srv.client.post("/api/workflow", json=start)
    assert retried.status_code == 200, retried.text
    again = srv.client.post("/api/workflow", json=start)
    assert again.status_code == 200 and again.text == retried.text
    srv.signals.start_of(retried.text)
    time.sleep(0.2)  # a second start, if there were one, would be scheduled by now
    assert [c.workflow_id for c in srv.signals.calls if c.kind == "start"] == [retried.text]
    assert srv.deps.run_store.search_runs(RunQuery()).total_hits == 1


def test_a_metadata_write_meeting_a_locked_run_store_answers_503(make_server: Any) -> None:
    srv: Server = make_server(busy_timeout_seconds=0.2)
    with locked(store_file(srv)):
        body = assert_unavailable(srv.client.post("/api/metadata/workflow", json=WORKFLOW), LOCKED)
    assert body["message"] == LOCKED
    assert srv.client.get("/api/metadata/workflow/wf").status_code == 404
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    assert srv.client.get("/api/metadata/workflow/wf").status_code == 200


# --- the Task API (its hot routes answered by the fast path, or by FastAPI) ------------


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi"])
def test_a_poll_meeting_a_locked_run_store_answers_503_and_loses_no_task(
    make_server: Any, fast_path: bool
) -> None:
    # the worker's poll time is recorded on its first poll only: the second poll's first
    # write is the hand-out, after the message was received from the queue
    srv: Server = make_server(
        fast_path=fast_path, busy_timeout_seconds=0.2, poll_record_interval_ms=600_000
    )
    srv.register(taskdef("parse"))
    assert poll(srv, "parse").json() == []
    task_id = srv.dispatch("parse")

    with locked(store_file(srv)):
        body = assert_unavailable(poll(srv, "parse"), LOCKED)
        assert body["message"] == LOCKED
        single = srv.client.get("/api/tasks/poll/parse", params={"workerid": "w1"})
        assert_unavailable(single, LOCKED)

    # the message went back to its queue at once (not when its lock expires)
    tasks = poll(srv, "parse").json()
    assert [t["taskId"] for t in tasks] == [task_id]
    assert tasks[0]["pollCount"] == 1


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi"])
@pytest.mark.parametrize("route", ["/api/tasks", "/api/tasks/update-v2"])
def test_a_result_meeting_a_locked_run_store_answers_503_and_its_retry_is_accepted_once(
    make_server: Any, fast_path: bool, route: str
) -> None:
    srv: Server = make_server(fast_path=fast_path, busy_timeout_seconds=0.2)
    task_id, result = polled_result(srv, "parse", SECRET_INPUT)

    with locked(store_file(srv)):
        assert_unavailable(srv.client.post(route, json=result), LOCKED)
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "IN_PROGRESS"
    assert srv.signals.events(task_id) == []

    assert srv.client.post(route, json=result).status_code in (200, 204)
    assert srv.client.post(route, json=result).status_code in (200, 204)  # repeated: harmless
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.output_data == SECRET_INPUT
    assert len(srv.signals.events(task_id)) == 1


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi"])
@pytest.mark.parametrize("route", ["/api/tasks", "/api/tasks/update-v2"])
def test_a_result_meeting_a_locked_queue_stands_and_reaches_the_run(
    make_server: Any, fast_path: bool, route: str
) -> None:
    """The result is recorded before its queue message is completed; a queue locked at
    that moment does not fail the result (its retry would be a repeat, which signals
    nothing): the worker gets its answer and the run its one event."""
    srv: Server = make_server(fast_path=fast_path, busy_timeout_seconds=0.2)
    task_id, result = polled_result(srv, "parse", {"pages": 3})
    queues = srv.deps.queue._db.path  # type: ignore[attr-defined]

    with locked(queues):
        answer = srv.client.post(route, json=result)
    assert answer.status_code in (200, 204), answer.text
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.output_data == {"pages": 3}
    assert len(srv.signals.events(task_id)) == 1
    assert srv.client.post(route, json=result).status_code in (200, 204)  # repeated
    assert len(srv.signals.events(task_id)) == 1
    # the message was never handed out again
    assert poll(srv, "parse").json() == []


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi"])
def test_a_poll_meeting_a_locked_queue_answers_503_and_loses_no_task(
    make_server: Any, fast_path: bool
) -> None:
    srv: Server = make_server(fast_path=fast_path, busy_timeout_seconds=0.2)
    srv.register(taskdef("parse"))
    task_id = srv.dispatch("parse")
    queues = srv.deps.queue._db.path  # type: ignore[attr-defined]

    with locked(queues):
        body = assert_unavailable(poll(srv, "parse"), "task queue unavailable: database is locked")
    assert body["message"] == "task queue unavailable: database is locked"
    assert [t["taskId"] for t in poll(srv, "parse").json()] == [task_id]


# --- the sweep of deferred messages ----------------------------------------------------


def sweep_of(srv: Server) -> DeferredSweep:
    """The sweep of deferred messages an engine process runs, over the server's run store
    and queue, with no grace time (the attempts here ended a moment ago)."""
    return DeferredSweep(srv.deps.run_store, srv.deps.queue, grace_ms=0, clock=srv.deps.clock)


def depth(srv: Server, queue: str = "parse") -> QueueDepth:
    return srv.deps.queue.depth(queue)


def test_a_message_a_locked_queue_left_deferred_is_completed_by_the_next_sweep(
    make_server: Any,
) -> None:
    """The result stands while the queue is locked, and its message stays deferred (no
    worker sees it, nothing removes it); a sweep while the queue is still locked settles
    nothing and loses nothing; once it is free, one sweep completes it and the next one
    has nothing to do."""
    srv: Server = make_server(busy_timeout_seconds=0.2)
    task_id, result = polled_result(srv, "parse", {"pages": 3})
    queues = srv.deps.queue._db.path  # type: ignore[attr-defined]
    sweep = sweep_of(srv)

    with locked(queues):
        answer = srv.client.post("/api/tasks", json=result)
        assert answer.status_code in (200, 204), answer.text
        with pytest.raises(QueueUnavailable):
            sweep.run_once()  # a round of a process that holds the queue: it ends here
    assert depth(srv) == QueueDepth(active=0, scheduled=0, deferred=1, dead_lettered=0)
    assert poll(srv, "parse").json() == []  # invisible, as before

    assert sweep.run_once() == 1
    assert depth(srv) == QueueDepth(active=0, scheduled=0, deferred=0, dead_lettered=0)
    assert sweep.run_once() == 0
    lease = srv.deps.run_store.get_lease(task_id, 1)
    assert lease is not None and lease.settled_at is not None
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.output_data == {"pages": 3}


@pytest.mark.parametrize("decided", ["final", "retried"])
def test_the_message_of_a_failed_attempt_is_settled_by_the_sweep_as_the_engine_decided(
    make_server: Any, decided: str
) -> None:
    """A worker's failure leaves the message to the engine, which dead-letters it when no
    retry comes and completes it when a retry replaces the attempt. When the engine
    could not (the queue down until its bookkeeping gave up), the sweep does it for
    it, but only once the engine decided: a failure it has not decided may be
    retried."""
    srv: Server = make_server()
    task_id, result = polled_result(srv, "parse", {})
    failed = {**result, "status": "FAILED", "reasonForIncompletion": "disk full"}
    assert srv.client.post("/api/tasks", json=failed).status_code in (200, 204)
    sweep = sweep_of(srv)
    assert sweep.run_once() == 0
    assert depth(srv) == QueueDepth(active=0, scheduled=0, deferred=1, dead_lettered=0)

    # the engine's decision, as its record of the attempt writes it
    store, now = srv.deps.run_store, srv.deps.clock()
    row = store.get_task(task_id)
    assert row is not None
    if decided == "final":
        store.update_run(row.workflow_id, RunUpdate(status=RunStatus.FAILED), now)
    else:
        store.mark_retried(task_id, now)
        srv.dispatch("parse", workflow_id=row.workflow_id, attempt=2)
    assert sweep.run_once() == 1
    assert sweep.run_once() == 0
    if decided == "final":
        assert depth(srv) == QueueDepth(active=0, scheduled=0, deferred=0, dead_lettered=1)
        [dead] = srv.deps.queue.peek(dead_letter_queue_name("parse"))
        assert dead.json()["taskId"] == task_id
        assert (dead.dead_letter_reason, dead.dead_letter_description) == (
            DEAD_LETTER_REASON,
            "disk full",
        )
    else:
        # completed; the retry's own message waits for a worker
        assert depth(srv) == QueueDepth(active=1, scheduled=0, deferred=0, dead_lettered=0)


def test_the_sweep_leaves_the_messages_of_live_attempts_alone(make_server: Any) -> None:
    """An attempt in progress keeps its deferred message, and one whose worker asked for
    a callback gets its message back after the delay, however old they are."""
    srv: Server = make_server()
    held, _ = polled_result(srv, "parse", {})
    later, result = polled_result(srv, "parse", {})
    callback = {**result, "status": "IN_PROGRESS", "callbackAfterSeconds": 3600}
    assert srv.client.post("/api/tasks", json=callback).status_code in (200, 204)
    sweep = DeferredSweep(
        srv.deps.run_store,
        srv.deps.queue,
        grace_ms=0,
        clock=lambda: srv.deps.clock() + 86_400_000,  # a day on
    )
    assert sweep.run_once() == 0
    assert depth(srv) == QueueDepth(active=0, scheduled=1, deferred=1, dead_lettered=0)
    for task_id, status in ((held, "IN_PROGRESS"), (later, "SCHEDULED")):
        row = srv.deps.run_store.get_task(task_id)
        assert row is not None and row.status == status


# --- PostgreSQL ----------------------------------------------------------------------


def test_a_postgresql_run_store_that_cannot_be_reached_answers_503(make_server: Any) -> None:
    port = free_port()  # nothing listens there
    store = SqlRunStore(
        f"postgresql+psycopg://stepway:hunter2@127.0.0.1:{port}/stepway", migrate=False
    )
    srv: Server = make_server(run_store=store, local_adapters=False)
    answers = [
        srv.client.get("/api/workflow/some-run"),
        srv.client.post("/api/workflow/wf", json=SECRET_INPUT),
        srv.client.post("/api/metadata/workflow", json=WORKFLOW),
        poll(srv, "parse"),
    ]
    for r in answers:
        body = assert_unavailable(r, "run store unavailable: cannot connect to the database")
        for secret in ("hunter2", "stepway:", str(port), "127.0.0.1"):
            assert secret not in r.text, body


PG_URL = os.environ.get("STEPWAY_TEST_POSTGRES_URL")


class TcpProxy:
    """Forwards connections to ``target`` from a port of its own: the database's address
    as the run store sees it. ``stop`` closes the port and cuts every connection (a
    server gone away), ``start`` listens on the same port again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        with self._lock:
            cut, self._open = self._open, []
        for sock in [s for s in (listener,) if s is not None] + cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the accept and the pipes
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxied_postgres() -> Iterator[tuple[str, TcpProxy]]:
    """A run store URL of a fresh schema of the test server, reached through a proxy."""
    assert PG_URL
    with fresh_schema(PG_URL) as url:
        proxy = TcpProxy((url.host or "127.0.0.1", url.port or 5432))
        proxy.start()
        try:
            proxied = url.set(host="127.0.0.1", port=proxy.port)
            yield proxied.render_as_string(hide_password=False), proxy
        finally:
            proxy.stop()


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs STEPWAY_TEST_POSTGRES_URL")
def test_a_postgresql_run_store_that_goes_away_answers_503_until_it_is_back(
    make_server: Any, proxied_postgres: tuple[str, TcpProxy]
) -> None:
    url, proxy = proxied_postgres
    srv: Server = make_server(run_store=SqlRunStore(url), local_adapters=False)
    srv.register(taskdef("parse"))
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    first = srv.client.post("/api/workflow", json={"name": "wf", "idempotencyKey": "a"})
    assert first.status_code == 200, first.text
    start = {"name": "wf", "input": SECRET_INPUT, "idempotencyKey": "b"}

    proxy.stop()  # the server goes away, with the store's open connections
    for r in (
        srv.client.post("/api/workflow", json=start),
        srv.client.get(f"/api/workflow/{first.text}"),
        poll(srv, "parse"),
    ):
        assert_unavailable(r, "run store unavailable: ")
        assert str(proxy.port) not in r.text

    proxy.start()  # and is back
    assert srv.client.get(f"/api/workflow/{first.text}").status_code == 200
    retried = srv.client.post("/api/workflow", json=start)
    assert retried.status_code == 200, retried.text
    again = srv.client.post("/api/workflow", json=start)
    assert again.text == retried.text != first.text
    assert srv.deps.run_store.search_runs(RunQuery()).total_hits == 2
