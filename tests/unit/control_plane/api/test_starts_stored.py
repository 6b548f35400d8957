"""Starts answered once stored (local adapters: control_plane/services/run_starts.py),
over real HTTP and a real SQLite run store; the durable backend is the recording one,
which can refuse starts as an unreachable backend would.

What a user sees: every start answered is scheduled exactly once, also when the backend
was away at first or the process stopped before scheduling it; until then the run
reads RUNNING; a signal to it schedules it first; a start that cannot be scheduled at
all fails its run instead of leaving it RUNNING."""

from __future__ import annotations

import itertools
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from control_plane.api.app import StepwayApp, create_app
from control_plane.services import run_starts
from engine.adapters.run_signals_recording import RecordingRunSignals
from engine.ports.run_store import NewRun
from tests.unit.control_plane.conftest import Server, taskdef

WORKFLOW = {
    "name": "wf",
    "version": 1,
    "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
}


def server(make_server: Any, **settings: Any) -> Server:
    s: Server = make_server(local_adapters=True, **settings)
    s.register(taskdef("parse"))
    assert s.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    return s


@pytest.fixture
def srv(make_server: Any) -> Server:
    return server(make_server)


@pytest.fixture
def next_process() -> Iterator[Callable[[Server], StepwayApp]]:
    """Builds the control plane the next process would start over ``srv``'s store and
    backend (it schedules the pending starts it finds); each is closed at the end."""
    apps: list[StepwayApp] = []

    def make(srv: Server) -> StepwayApp:
        apps.append(create_app(srv.settings, srv.deps))
        return apps[-1]

    yield make
    for app in apps:
        app.close()


def eventually(check: Callable[[], bool], what: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def started(srv: Server) -> list[str]:
    return [c.workflow_id for c in srv.signals.calls if c.kind == "start"]


def test_a_burst_of_starts_is_answered_and_each_run_scheduled_once(srv: Server) -> None:
    def start(i: int) -> httpx.Response:
        with httpx.Client(base_url=srv.url, timeout=30) as client:
            return client.post("/api/workflow/wf", json={"i": i})

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(start, range(80)))
    assert [r.status_code for r in answers] == [200] * 80, [r.text for r in answers]
    ids = [r.text for r in answers]
    assert len(set(ids)) == 80
    for i, workflow_id in enumerate(ids):  # stored as answered, with its own input
        run = srv.deps.run_store.get_run(workflow_id)
        assert run is not None and run.input == {"i": i}
    eventually(lambda: len(started(srv)) >= 80, "not every run was scheduled")
    assert sorted(started(srv)) == sorted(ids)
    inputs = {c.workflow_id: c.data for c in srv.signals.calls if c.kind == "start"}
    assert all(inputs[w]["input"] == {"i": i} for i, w in enumerate(ids))
    eventually(lambda: srv.deps.run_store.pending_starts() == [], "pending starts were left")


def test_starts_that_arrive_together_are_stored_in_one_transaction(
    srv: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another writer holds the run store (as the engine does between its
    writes), the starts that arrive wait together and are then written in one
    transaction (counted: the write transactions that insert runs)."""
    engine: Any = srv.deps.run_store.engine  # type: ignore[attr-defined]
    began: dict[int, int] = {}  # thread -> its current write transaction
    transactions = itertools.count(1)
    with_runs: set[int] = set()
    lock = threading.Lock()

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        with lock:
            if statement.startswith("BEGIN IMMEDIATE"):
                began[threading.get_ident()] = next(transactions)
            elif statement.startswith("INSERT INTO runs"):
                with_runs.add(began[threading.get_ident()])

    service = srv.app.state.workflow_service
    prepare = service._prepare
    prepared: list[str] = []

    def counted(*args: Any) -> Any:
        found = prepare(*args)
        prepared.append(found[0].workflow_id)
        return found

    monkeypatch.setattr(service, "_prepare", counted)
    blocker = sqlite3.connect(engine.url.database, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    event.listen(engine, "before_cursor_execute", record)
    try:
        with ThreadPoolExecutor(20) as pool:

            def start(i: int) -> httpx.Response:
                with httpx.Client(base_url=srv.url, timeout=60) as client:
                    return client.post("/api/workflow/wf", json={"i": i})

            answers = [pool.submit(start, i) for i in range(20)]
            # every start prepared: each is then in the first store (waiting for the
            # lock) or among the starts waiting for it to end
            eventually(lambda: len(prepared) == 20, "the starts did not arrive")
            blocker.execute("COMMIT")
            ids = [a.result().text for a in answers]
    finally:
        event.remove(engine, "before_cursor_execute", record)
        blocker.close()
    assert len(set(ids)) == 20
    # the first start's own transaction (it began waiting first), then all the others'
    assert len(with_runs) <= 2, with_runs
    eventually(lambda: sorted(started(srv)) == sorted(ids), "not every run was scheduled")


def test_starts_with_one_idempotency_key_at_once_make_one_run(srv: Server) -> None:
    body = {"name": "wf", "input": {"a": 1}, "idempotencyKey": "order-17"}

    def start(_: int) -> httpx.Response:
        with httpx.Client(base_url=srv.url, timeout=30) as client:
            return client.post("/api/workflow", json=body)

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(start, range(10)))
    assert {r.status_code for r in answers} == {200}
    assert len({r.text for r in answers}) == 1
    eventually(lambda: len(started(srv)) >= 1, "the run was not scheduled")
    time.sleep(0.2)
    assert started(srv) == [answers[0].text]


def test_a_run_whose_start_is_not_scheduled_yet_reads_running_and_is_scheduled_later(
    srv: Server,
) -> None:
    srv.signals.refuse_starts = True
    r = srv.client.post("/api/workflow/wf", json={})
    assert r.status_code == 200, r.text
    workflow_id = r.text
    # what the durable adapter reports for an orchestration it does not have (yet)
    srv.signals.ended[workflow_id] = "its orchestration no longer exists in the durable backend"
    run = srv.client.get(f"/api/workflow/{workflow_id}")
    assert run.status_code == 200 and run.json()["status"] == "RUNNING", run.text
    assert srv.deps.run_store.has_pending_start(workflow_id)

    srv.signals.refuse_starts = False  # the backend is back: the starter tries again
    eventually(lambda: started(srv) == [workflow_id], "the start was not tried again")
    eventually(lambda: not srv.deps.run_store.has_pending_start(workflow_id), "pending start left")


def test_a_signal_to_a_run_not_scheduled_yet_schedules_it_first(srv: Server) -> None:
    srv.signals.refuse_starts = True
    workflow_id = srv.client.post("/api/workflow/wf", json={}).text
    srv.signals.refuse_starts = False
    r = srv.client.put(f"/api/workflow/{workflow_id}/pause")
    assert r.status_code == 200, r.text
    kinds = [(c.kind, c.workflow_id) for c in srv.signals.calls]
    assert kinds[:2] == [("start", workflow_id), ("suspend", workflow_id)], kinds
    assert not srv.deps.run_store.has_pending_start(workflow_id)  # deleted once scheduled
    time.sleep(1.0)  # the starter's retry finds it scheduled: not started twice
    assert started(srv) == [workflow_id]


def test_a_start_stored_by_a_process_that_stopped_is_scheduled_at_start_up(
    srv: Server, next_process: Callable[[Server], StepwayApp]
) -> None:
    """A pending start left in the store (the process stopped between storing the run
    and scheduling it) is scheduled by the next control plane over the store."""
    workflow_id = str(uuid.uuid4())
    srv.deps.run_store.create_run(
        NewRun(workflow_id=workflow_id, name="wf", version=1, create_time=srv.deps.clock()),
        start={"name": "wf", "version": 1, "input": {"left": True}},
    )
    next_process(srv)
    eventually(lambda: started(srv) == [workflow_id], "the left start was not scheduled")
    assert srv.signals.calls[0].data["input"] == {"left": True}
    eventually(lambda: not srv.deps.run_store.has_pending_start(workflow_id), "pending start left")


def test_a_start_that_cannot_be_scheduled_fails_its_run(make_server: Any) -> None:
    srv = server(make_server, start_retry_first_seconds=0.05, start_max_attempts=3)
    srv.signals.refuse_starts = True
    workflow_id = srv.client.post("/api/workflow/wf", json={}).text

    def failed() -> bool:
        run = srv.deps.run_store.get_run(workflow_id)
        return run is not None and run.status.value == "FAILED"

    eventually(failed, "the run was left RUNNING")
    run = srv.client.get(f"/api/workflow/{workflow_id}").json()
    assert run["status"] == "FAILED"
    assert "could not be scheduled" in run["reasonForIncompletion"]
    assert "cannot be reached" in run["reasonForIncompletion"]
    assert not srv.deps.run_store.has_pending_start(workflow_id)
    assert srv.signals.refused == [workflow_id] * 3  # tried no more once given up


def test_a_refused_start_waits_its_own_retry_while_the_starts_after_it_go_through(
    make_server: Any,
) -> None:
    """A backend that refuses one run while it takes the others: that run is tried again
    only once its own wait is over (here a minute), however many other starts the
    starter schedules meanwhile, and none of those waits for it."""
    srv = server(make_server, start_retry_first_seconds=60)
    srv.signals.refuse_starts = True
    refused = srv.client.post("/api/workflow/wf", json={"n": -1}).text
    eventually(lambda: srv.signals.refused == [refused], "the start was not tried")
    srv.signals.refuse_runs.add(refused)  # from now on the backend refuses that run only
    srv.signals.refuse_starts = False

    others = []
    for i in range(30):  # one after the other: the starter makes a pass for each
        r = srv.client.post("/api/workflow/wf", json={"n": i})
        assert r.status_code == 200, r.text
        others.append(r.text)
        eventually(lambda w=r.text: w in started(srv), f"start {i} waited", seconds=10)
    assert sorted(started(srv)) == sorted(others)
    assert srv.signals.refused == [refused]  # its wait is not over: not tried again
    run = srv.client.get(f"/api/workflow/{refused}").json()
    assert run["status"] == "RUNNING" and srv.deps.run_store.has_pending_start(refused)


def test_left_starts_are_scheduled_page_by_page_past_one_the_backend_refuses(
    make_server: Any, next_process: Callable[[Server], StepwayApp]
) -> None:
    """More pending starts left by a stopped process than a page of recovery holds, the
    oldest of them refused by the backend: every other one is scheduled, once, and the
    refused one waits its own retry instead of being tried again with every page."""
    srv = server(make_server, start_retry_first_seconds=60)
    store = srv.deps.run_store
    now = srv.deps.clock()
    left = [f"left-{i:04}" for i in range(2 * run_starts.RECOVER_PAGE + 100)]
    with store.batch():
        for i, workflow_id in enumerate(left):
            store.create_run(
                NewRun(workflow_id=workflow_id, name="wf", version=1, create_time=now + i),
                start={"name": "wf", "version": 1, "input": {"i": i}},
            )
    srv.signals.refuse_runs.add(left[0])
    next_process(srv)
    eventually(lambda: len(started(srv)) >= len(left) - 1, "the left starts were not scheduled")
    assert sorted(started(srv)) == left[1:]
    assert srv.signals.refused == [left[0]]
    # a scheduled start's row is deleted after its page is scheduled: wait for the last
    eventually(
        lambda: [p.workflow_id for p in store.pending_starts()] == [left[0]],
        "the scheduled starts' rows were not deleted, or the refused one's was",
    )
    assert srv.signals.refused == [left[0]]


# --- starts the backend may have carried out --------------------------------------------


class SignalsRefusingStarts(RecordingRunSignals):
    """A backend that answers every start of the runs in ``refuse_runs`` with an error
    that is not an outage (it throttles them, say), while it may hold them already."""

    def start_new_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        if workflow_id in self.refuse_runs:
            with self._lock:
                self.refused.append(workflow_id)
            raise RuntimeError("throttled")
        super().start_new_run(workflow_id, run_input)


def left_start(srv: Server) -> str:
    """A run stored with its pending start by a process that stopped before deleting
    it: it may have scheduled the orchestration just before it stopped."""
    workflow_id = str(uuid.uuid4())
    srv.deps.run_store.create_run(
        NewRun(workflow_id=workflow_id, name="wf", version=1, create_time=srv.deps.clock()),
        start={"name": "wf", "version": 1, "input": {"left": True}},
    )
    return workflow_id


def status(srv: Server, workflow_id: str) -> str:
    return str(srv.client.get(f"/api/workflow/{workflow_id}").json()["status"])


FAST_RETRIES = {
    "start_retry_first_seconds": 0.02,
    "start_retry_max_seconds": 0.05,
    "start_max_attempts": 3,
}


def test_a_left_start_is_not_failed_while_the_backend_cannot_be_reached(
    make_server: Any, next_process: Callable[[Server], StepwayApp]
) -> None:
    """Its orchestration may exist: failing the run after the usual refusals would
    contradict it. It stays RUNNING, tried again and again, and is scheduled once the
    backend answers."""
    srv = server(make_server, **FAST_RETRIES)
    srv.signals.refuse_starts = True
    workflow_id = left_start(srv)
    next_process(srv)
    eventually(lambda: len(srv.signals.refused) >= 8, "the start was not tried again")
    assert status(srv, workflow_id) == "RUNNING"
    assert srv.deps.run_store.has_pending_start(workflow_id)
    srv.signals.refuse_starts = False  # the backend is back
    eventually(lambda: started(srv) == [workflow_id], "the start was not scheduled")
    eventually(lambda: not srv.deps.run_store.has_pending_start(workflow_id), "pending start left")
    assert status(srv, workflow_id) == "RUNNING"  # never FAILED on the way
    assert started(srv) == [workflow_id]


def test_a_closed_control_plane_stops_trying_and_leaves_the_start_to_the_next(
    make_server: Any, next_process: Callable[[Server], StepwayApp]
) -> None:
    """A control plane that stops (``StepwayApp.close``) tries a start it could not
    schedule no more, and keeps it pending in the store: the next control plane over
    the store schedules it, once."""
    srv = server(make_server, **FAST_RETRIES)
    srv.signals.refuse_starts = True
    workflow_id = left_start(srv)
    stopping = next_process(srv)
    eventually(lambda: len(srv.signals.refused) >= 2, "the start was not tried")
    stopping.close()
    tries = len(srv.signals.refused)
    time.sleep(0.3)  # six retry delays
    assert len(srv.signals.refused) == tries
    assert srv.deps.run_store.has_pending_start(workflow_id)
    assert status(srv, workflow_id) == "RUNNING"
    srv.signals.refuse_starts = False
    next_process(srv)
    eventually(lambda: started(srv) == [workflow_id], "the next process did not schedule it")
    eventually(lambda: not srv.deps.run_store.has_pending_start(workflow_id), "pending start left")
    assert started(srv) == [workflow_id]


def test_a_left_start_whose_orchestration_exists_counts_as_scheduled(
    make_server: Any, next_process: Callable[[Server], StepwayApp]
) -> None:
    """The backend keeps refusing the start but holds the run's orchestration (the
    stopped process scheduled it): once the refusals are used up the start counts as
    done, is not made again, and its run is not failed."""
    srv = server(make_server, **FAST_RETRIES)
    signals = SignalsRefusingStarts()
    srv.deps.signals = signals
    workflow_id = left_start(srv)
    signals.refuse_runs.add(workflow_id)
    signals.held.add(workflow_id)
    next_process(srv)
    eventually(lambda: not srv.deps.run_store.has_pending_start(workflow_id), "pending start left")
    assert signals.refused == [workflow_id] * 3  # then asked whether it exists: it does
    assert status(srv, workflow_id) == "RUNNING"
    time.sleep(0.3)  # and it is not tried again
    assert signals.refused == [workflow_id] * 3


def test_a_left_start_the_backend_holds_nothing_of_fails_its_run(
    make_server: Any, next_process: Callable[[Server], StepwayApp]
) -> None:
    """The backend answers, refuses the start and holds no orchestration of the run:
    nothing can run it, so after the usual refusals the run is FAILED, not RUNNING."""
    srv = server(make_server, **FAST_RETRIES)
    signals = SignalsRefusingStarts()
    srv.deps.signals = signals
    workflow_id = left_start(srv)
    signals.refuse_runs.add(workflow_id)
    next_process(srv)
    eventually(lambda: status(srv, workflow_id) == "FAILED", "the run was left RUNNING")
    run = srv.client.get(f"/api/workflow/{workflow_id}").json()
    assert run["reasonForIncompletion"] == (
        "its orchestration could not be scheduled (internal error: RuntimeError)"
    )
    assert signals.refused == [workflow_id] * 3
    assert not srv.deps.run_store.has_pending_start(workflow_id)


def test_the_starts_of_one_turn_of_the_loop_read_the_current_registration_once(
    srv: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """control_plane/services/stamp_reads.py: while the event loop is held in one start's
    read of which registration is current, ten more starts arrive on connections it
    had accepted; they are read in one turn of the loop and share one read. Each is
    answered with a run of its own."""
    service = srv.app.state.workflow_service
    read = service.stamps._read
    reads: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def counted(name: str, version: int | None) -> Any:
        reads.append(name)
        if len(reads) == 1:
            holding.set()
            release.wait(10)  # holds the event loop: the others arrive meanwhile
        return read(name, version)

    monkeypatch.setattr(service.stamps, "_read", counted)
    host, port = srv.url.removeprefix("http://").split(":")
    conns = [socket.create_connection((host, int(port)), timeout=10) for _ in range(10)]
    time.sleep(0.3)  # accepted by the loop before it is held
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(srv.client.post, "/api/workflow/wf", json={"i": -1})
            assert holding.wait(10)
            body = b'{"i": 1}'
            request = (
                f"POST /api/workflow/wf HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body
            for conn in conns:
                conn.sendall(request)
            time.sleep(0.3)
            release.set()
            assert first.result(timeout=10).status_code == 200
        ids = [_answer_of(conn) for conn in conns]
    finally:
        release.set()
        for conn in conns:
            conn.close()
    assert len(set(ids)) == 10 and all(ids)
    assert len(reads) == 2, reads
    eventually(lambda: set(ids) <= set(started(srv)), "not every run was scheduled")


def _answer_of(conn: socket.socket) -> str:
    """The body of the one HTTP/1.1 answer ``conn`` gets (status 200)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"200", head
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")[1:]
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return body.decode()
