"""The hot path, counted (not timed): a task row is written once per transition of the
task (SQL statements on the run store, seen by a SQLAlchemy event listener), and a fixed
3-step run costs a fixed number of run-store and queue transactions and round trips to
the durable backend."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import event

from control_plane.api.app import create_app
from control_plane.auth import ANONYMOUS
from control_plane.deps import Deps, Settings
from control_plane.services.task_results import TaskResultIn
from control_plane.services.workflows import StartWorkflowRequest
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.language.definitions import RunStatus, TaskStatus

_TASK_WRITE = re.compile(r"^(INSERT INTO|UPDATE) tasks\b")


@contextmanager
def task_row_writes(platform: Any) -> Iterator[list[str]]:
    """The INSERT and UPDATE statements on the task rows inside the block."""
    seen: list[str] = []
    engine = platform.services.run_store.engine

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        text = " ".join(statement.split())
        if _TASK_WRITE.match(text):
            seen.append(text)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_a_worker_task_row_is_written_once_per_transition(platform: Any) -> None:
    platform.register_task_def({"name": "hot", "retryCount": 0, "responseTimeoutSeconds": 60})
    platform.register(
        {
            "name": "hot_path",
            "version": 1,
            "tasks": [
                {
                    "name": "hot",
                    "taskReferenceName": "h",
                    "type": "WORKER",
                    "inputParameters": {"n": "${workflow.input.n}"},
                }
            ],
        }
    )
    with task_row_writes(platform) as writes:
        workflow_id = platform.start("hot_path", {"n": 1})
        platform.work("hot", lambda task_input: {"doubled": task_input["n"] * 2})
        run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED
    row = platform.tasks(workflow_id)["h"]
    assert row.status == TaskStatus.COMPLETED and row.output_data == {"doubled": 2}
    # SCHEDULED (the dispatch), IN_PROGRESS (the hand-out), COMPLETED (the result)
    assert Counter(w.split()[0] for w in writes) == {"INSERT": 1, "UPDATE": 2}, writes


def test_inline_tasks_are_written_once_per_transition(platform: Any) -> None:
    platform.register(
        {
            "name": "inline_path",
            "version": 1,
            "tasks": [
                {
                    "name": "set",
                    "taskReferenceName": "s",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"x": 1},
                },
                {
                    "name": "calc",
                    "taskReferenceName": "c",
                    "type": "INLINE",
                    "inputParameters": {"expression": "1 + 1"},
                },
            ],
        }
    )
    with task_row_writes(platform) as writes:
        workflow_id = platform.start("inline_path")
        run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED
    assert {ref: row.status for ref, row in platform.tasks(workflow_id).items()} == {
        "s": TaskStatus.COMPLETED,
        "c": TaskStatus.COMPLETED,
    }
    # SET_VARIABLE is decided and completed in one step: one write. INLINE is an activity
    # (evaluated once, in an evaluator process): written SCHEDULED with its activity's
    # input, and COMPLETED with the next I/O
    assert Counter(w.split()[0] for w in writes) == {"INSERT": 2, "UPDATE": 1}, writes


# --- transactions and backend round trips of a fixed 3-step run ---------------------

#: the history events that stand for round trips to the backend (an activity scheduled,
#: an event raised on the run, a durable timer, a child run)
_ROUND_TRIPS = ("TaskScheduled", "EventRaised", "TimerCreated", "SubOrchestrationInstanceCreated")


class _Counts:
    """Run-store and queue transactions by who made them: the Task API (this thread,
    inside ``phase``) and the engine (its activity threads)."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.caller = threading.get_ident()
        self.by: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def add(self, kind: str) -> None:
        if threading.get_ident() == self.caller:
            if self.phase is None:
                return
            who = self.phase
        else:
            who = "engine"
        with self.lock:
            self.by[(who, kind)] += 1

    @contextmanager
    def during(self, phase: str) -> Iterator[None]:
        self.phase = phase
        try:
            yield
        finally:
            self.phase = None

    def of(self, who: str) -> dict[str, int]:
        return {kind: n for (w, kind), n in sorted(self.by.items()) if w == who}


@contextmanager
def transactions(platform: Any) -> Iterator[_Counts]:
    """Counts each transaction: on the run store the BEGIN it opens with (``BEGIN
    IMMEDIATE`` for a write), on the SQLite queue each read or write block and each
    single-statement read."""
    counts = _Counts()
    engine = platform.services.run_store.engine
    db = platform.services.queue.database

    def on_sql(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("BEGIN"):
            counts.add("store write" if "IMMEDIATE" in statement else "store read")

    def counted(kind: str, block: Any) -> Any:
        def wrapper() -> Any:
            counts.add(kind)
            return block()

        return wrapper

    def counted_row(block: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            counts.add("queue read")  # one statement, its own read transaction
            return block(*args)

        return wrapper

    event.listen(engine, "before_cursor_execute", on_sql)

    db.write = counted("queue write", db.write)
    db.read = counted("queue read", db.read)
    db.read_row = counted_row(db.read_row)
    try:
        yield counts
    finally:
        event.remove(engine, "before_cursor_execute", on_sql)
        del db.write, db.read, db.read_row


def _history(platform: Any, workflow_id: str) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for item in platform.client.get_orchestration_history(workflow_id):
        kind = type(item).__name__.removesuffix("Event")
        if kind in _ROUND_TRIPS:
            kinds[kind] += 1
    return kinds


class _Empty(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


def test_a_three_step_run_costs_a_fixed_number_of_transactions(platform: Any) -> None:
    """A WORKER step served through the Task API's own services, an HTTP step and a
    SET_VARIABLE step, counted on the second run (caches warm, a worker polling): the
    start, the hand-out and the result in transactions of the run store and the queue,
    the engine's activities in transactions, and the run's round trips to the durable
    backend (activities scheduled, events raised, timers). A regression on the hot path
    changes a count."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Empty)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    platform.register_task_def({"name": "hot3", "retryCount": 0, "responseTimeoutSeconds": 60})
    platform.register(
        {
            "name": "three_steps",
            "version": 1,
            "tasks": [
                {"name": "hot3", "taskReferenceName": "w", "type": "WORKER"},
                {
                    "name": "call",
                    "taskReferenceName": "h",
                    "type": "HTTP",
                    "inputParameters": {
                        "http_request": {
                            "uri": f"http://127.0.0.1:{server.server_port}/",
                            "method": "GET",
                        }
                    },
                },
                {
                    "name": "set",
                    "taskReferenceName": "s",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"done": True},
                },
            ],
        }
    )
    deps = Deps(
        run_store=platform.services.run_store,
        queue=platform.services.queue,
        provisioner=platform.provisioner,
        payloads=platform.services.payloads,
        signals=DurableRunSignals(platform.client),
    )
    # task definitions (and the snapshot a start reuses) re-read once a minute, so that
    # the counts do not depend on how long the first run took; a start answers at once
    # (settle_seconds=0: its wait for the first decision reads the store until it shows,
    # as often as the engine's timing makes it)
    app = create_app(Settings(taskdef_cache_seconds=60, settle_seconds=0), deps)
    workflows, handout, results = (
        app.state.workflow_service,
        app.state.task_handout,
        app.state.task_results,
    )

    def one_run(counts: _Counts | None) -> str:
        phase = counts.during if counts is not None else (lambda _: nullcontext())
        with phase("start"):
            workflow_id = workflows.start(StartWorkflowRequest(name="three_steps"))
        deadline = time.monotonic() + 30
        while platform.services.queue.depth("hot3").active < 1:  # queued by the engine
            assert time.monotonic() < deadline, "the WORKER task was never queued"
            time.sleep(0.01)
        with phase("hand-out"):
            [task] = handout.poll("hot3", "w1", None, 1, 5000)
        with phase("result"):
            results.update(
                TaskResultIn(task_id=task["taskId"], status="COMPLETED", worker_id="w1"),
                ANONYMOUS,
            )
        assert platform.wait(workflow_id).status == RunStatus.COMPLETED
        return workflow_id

    try:
        assert handout.poll("hot3", "w1", None, 1, 0) == []  # a worker polls
        one_run(None)  # definitions, task definitions and poll data are read once
        sessions = platform.engine.sessions
        hits, misses = sessions.hits, sessions.misses
        with transactions(platform) as counts:
            workflow_id = one_run(counts)
        hits, misses = sessions.hits - hits, sessions.misses - misses
    finally:
        server.shutdown()

    assert {ref: row.status for ref, row in platform.tasks(workflow_id).items()} == {
        "w": TaskStatus.COMPLETED,
        "h": TaskStatus.COMPLETED,
        "s": TaskStatus.COMPLETED,
    }
    assert counts.of("start") == {"store read": 1, "store write": 1}, counts.by
    # receive (one read of the -high and the normal queue together, the write of the
    # receive), the hand-out, the deferral
    assert counts.of("hand-out") == {"queue read": 1, "queue write": 2, "store write": 1}
    # the row and its lease read together, the result with the lease release, the
    # deferred message completed by its sequence number; that it is settled is recorded
    # on the lease later, with other results' marks (mark_settled_later), not in a
    # transaction of the result's own
    assert counts.of("result") == {"queue write": 1, "store read": 1, "store write": 1}
    # the WORKER task's dispatch (and its send); the HTTP step's records, and its result
    # kept for the replays of its work item; and the end. All are written by the work
    # items that reach them (the engine hosts the activities too)
    assert counts.of("engine") == {"queue write": 1, "store write": 4}, counts.by
    # no activity at all (the WORKER task queued in the first work item; the HTTP step
    # done and the end recorded in the result's); one event: the result (a hand-out
    # raises none; the run reads it from the store when a deadline is due); the WORKER
    # step's one timer (the earliest its response timeout can fall, armed with the
    # dispatch)
    round_trips = _history(platform, workflow_id)
    assert round_trips == {"EventRaised": 1, "TimerCreated": 1}, round_trips
    # after the first, the run's work item (the result, which does the rest) applied only
    # its new events to the orchestration kept live in the engine: none replayed the
    # history from its start
    assert misses == 0 and hits >= 1, (hits, misses)


def test_a_sub_workflow_run_costs_a_fixed_number_of_round_trips(platform: Any) -> None:
    """A run whose SUB_WORKFLOW child completes (nothing canceled, no timeout set) costs
    the same round trips to the durable backend as ever: ending a canceled child at once
    (engine/runtime/interpreter.py, ``_Run._untrack``) adds nothing to a run that does not
    cancel one."""
    platform.register(
        {
            "name": "hot_child",
            "version": 1,
            "tasks": [
                {
                    "name": "set",
                    "taskReferenceName": "s",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"done": True},
                }
            ],
        }
    )
    platform.register(
        {
            "name": "hot_parent",
            "version": 1,
            "tasks": [
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "hot_child", "version": 1},
                },
                {
                    "name": "set",
                    "taskReferenceName": "s",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"done": True},
                },
            ],
        }
    )
    workflow_id = platform.start("hot_parent")
    assert platform.wait(workflow_id).status == RunStatus.COMPLETED
    # the child run's start (resolve); the run's end recorded in the work item that
    # reached it (the engine hosts the activities too): no record of its own
    assert _history(platform, workflow_id) == {
        "TaskScheduled": 1,
        "SubOrchestrationInstanceCreated": 1,
    }
    assert len(list(platform.client.get_orchestration_history(workflow_id))) == 12
