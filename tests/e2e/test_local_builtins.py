"""Built-in steps (HTTP, INLINE, JSON_JQ_TRANSFORM) done in the orchestration's work item
that starts them, where the engine hosts the activities too (engine/runtime/
interpreter.py, ``LocalBuiltin``), on the embedded backend over its gRPC protocol: no
built-in activity in the history, replays (every work item replayed in full) that read
the result the work item kept instead of calling again, a step that fails there taken
over by the activity, and the branches of a fork still called at once."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from durabletask import history

from engine.language.definitions import RunStatus, TaskStatus
from engine.ports.run_store import RunStoreUnavailable
from engine.runtime.activity_io import ACTIVITY_BUILTIN
from engine.runtime.interpreter import STEPS_PER_EXECUTION


class _Server(ThreadingHTTPServer):
    """Answers ``GET /<n>`` with ``{"n": n}``, counting the requests per path; ``GET
    /slow/<n>`` the same after 0.4 s, ``GET /pause/<n>`` after 0.1 s, ``GET /hang/<n>``
    after 3 s; ``GET
    /together/<n>`` only once two such requests are in flight at once (else, after 5 s,
    ``{"together": false}``)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.calls: Counter[str] = Counter()
        self.pair = threading.Barrier(2, timeout=5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def do_GET(self) -> None:
        self.server.calls[self.path] += 1
        if self.path.startswith("/together/"):
            try:
                self.server.pair.wait()
                body: dict[str, Any] = {"together": True}
            except threading.BrokenBarrierError:
                body = {"together": False}
        else:
            if self.path.startswith("/slow/"):
                time.sleep(0.4)
            elif self.path.startswith("/hang/"):
                time.sleep(3)
            elif self.path.startswith("/pause/"):
                time.sleep(0.1)
            body = {"n": int(self.path.rsplit("/", 1)[-1])}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    served = _Server()
    threading.Thread(target=served.serve_forever, daemon=True).start()
    try:
        yield served
    finally:
        served.shutdown()
        served.server_close()


def _call(ref: str, url: str) -> dict[str, Any]:
    return {
        "name": "call",
        "taskReferenceName": ref,
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": url, "method": "GET"}},
    }


def _activities(platform: Any, workflow_id: str) -> list[str]:
    return [
        event.name
        for event in platform.client.get_orchestration_history(workflow_id)
        if isinstance(event, history.TaskScheduledEvent)
    ]


def _register_mixed(platform: Any, url: str) -> None:
    platform.register_task_def({"name": "step", "retryCount": 0})
    platform.register(
        {
            "name": "mixed",
            "version": 1,
            "tasks": [
                _call("h", f"{url}/3"),
                {
                    "name": "double",
                    "taskReferenceName": "i",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": "$.n * 2",
                        "n": "${h.output.response.body.n}",
                    },
                },
                {
                    "name": "plus_one",
                    "taskReferenceName": "j",
                    "type": "JSON_JQ_TRANSFORM",
                    "inputParameters": {
                        "queryExpression": ".n + 1",
                        "n": "${i.output.result}",
                    },
                },
                {
                    "name": "step",
                    "taskReferenceName": "w",
                    "type": "WORKER",
                    "inputParameters": {"n": "${j.output.result}"},
                },
                _call("h2", f"{url}/5"),
            ],
            "outputParameters": {
                "doubled": "${i.output.result}",
                "plus": "${j.output.result}",
                "worker": "${w.output.seen}",
                "last": "${h2.output.response.body.n}",
            },
        }
    )


def test_builtin_steps_are_done_by_their_work_items_and_replays_read_what_they_kept(
    platform: Any, server: _Server
) -> None:
    """Every work item replayed in full (no sessions): the work item of the worker's
    result replays the HTTP, INLINE and jq steps of the first from the results it kept
    (the server is called once per step), and the run completes with no built-in
    activity."""
    platform.engine.sessions.capacity = 0
    _register_mixed(platform, server.url)

    workflow_id = platform.start("mixed")
    platform.work("step", lambda task_input: {"seen": task_input["n"]})
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"doubled": 6, "plus": 7, "worker": 7, "last": 5}
    assert server.calls == {"/3": 1, "/5": 1}
    rows = platform.tasks(workflow_id)
    assert {ref: rows[ref].status for ref in ("h", "i", "j", "w", "h2")} == dict.fromkeys(
        ("h", "i", "j", "w", "h2"), TaskStatus.COMPLETED
    )
    assert rows["i"].output_data == {"result": 6}
    assert ACTIVITY_BUILTIN not in _activities(platform, workflow_id)
    assert platform.engine.sessions.misses >= 1  # the result's work item replayed in full


def test_a_builtin_step_that_fails_in_its_work_item_goes_to_the_activity(
    platform: Any, server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run store refuses to keep the first step's result in the work item: the
    built-in activity does the step again (its call goes out a second time, as a retry
    after an outage would), and the run goes on; the later steps are done in their work
    items."""
    platform.engine.sessions.capacity = 0
    _register_mixed(platform, server.url)
    store = platform.services.run_store
    keep = store.put_step_result
    refused: list[str] = []

    def once_refused(workflow_id: str, task_id: str, attempt: int, *args: Any) -> None:
        if not refused:
            refused.append(task_id)
            raise RunStoreUnavailable("locked")
        keep(workflow_id, task_id, attempt, *args)

    monkeypatch.setattr(store, "put_step_result", once_refused)

    workflow_id = platform.start("mixed")
    platform.work("step", lambda task_input: {"seen": task_input["n"]})
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"doubled": 6, "plus": 7, "worker": 7, "last": 5}
    assert len(refused) == 1
    assert server.calls == {"/3": 2, "/5": 1}
    assert _activities(platform, workflow_id).count(ACTIVITY_BUILTIN) == 1


def test_the_calls_of_a_fork_are_made_at_once(platform: Any, server: _Server) -> None:
    """Two HTTP branches started together: each is answered only while the other is in
    flight, so they must not be done one after the other in the work item."""
    platform.register(
        {
            "name": "forked_calls",
            "version": 1,
            "tasks": [
                {
                    "name": "fork",
                    "taskReferenceName": "f",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [_call("a", f"{server.url}/together/1")],
                        [_call("b", f"{server.url}/together/2")],
                    ],
                },
                {"name": "join", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["a", "b"]},
            ],
            "outputParameters": {
                "a": "${a.output.response.body.together}",
                "b": "${b.output.response.body.together}",
            },
        }
    )

    run = platform.wait(platform.start("forked_calls"))

    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"a": True, "b": True}


def test_a_call_slower_than_the_work_items_bound_is_made_by_the_activity_from_then_on(
    platform: Any, server: _Server
) -> None:
    """A GET that has no answer within the bound of a step done in a work item (0.25 s;
    the server takes 0.4 s) is left to the built-in activity, which takes the answer of
    the call the work item began (made once); the next run's call of that task goes to
    the activity at once (engine/runtime/local_steps.py), and another task is still done
    in its work item. The work item is not held past the bound: a terminate would be
    taken in."""
    platform.register(
        {
            "name": "slow_then_fast",
            "version": 1,
            "tasks": [_call("slow", f"{server.url}/slow/1"), _call("fast", f"{server.url}/2")],
            "outputParameters": {
                "slow": "${slow.output.response.body.n}",
                "fast": "${fast.output.response.body.n}",
            },
        }
    )
    first = platform.start("slow_then_fast")
    assert platform.wait(first).output == {"slow": 1, "fast": 2}
    second = platform.start("slow_then_fast")
    assert platform.wait(second).output == {"slow": 1, "fast": 2}

    assert _builtin_refs(platform, first) == ["slow"]
    assert _builtin_refs(platform, second) == ["slow"]
    # one call a run: the first begun in the work item and taken by its activity
    assert server.calls == {"/slow/1": 2, "/2": 2}


def test_a_call_that_is_not_safe_to_make_again_is_made_by_the_activity(
    platform: Any, server: _Server
) -> None:
    """A POST (not a safe method: a call cut short in the work item could not be made
    again) is made once, by the built-in activity."""
    platform.register(
        {
            "name": "post_once",
            "version": 1,
            "tasks": [
                {
                    "name": "call",
                    "taskReferenceName": "p",
                    "type": "HTTP",
                    "inputParameters": {
                        "http_request": {"uri": f"{server.url}/7", "method": "POST", "body": {}}
                    },
                }
            ],
            "outputParameters": {"n": "${p.output.response.body.n}"},
        }
    )

    workflow_id = platform.start("post_once")
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"n": 7}
    assert server.calls == {"/7": 1}
    assert _builtin_refs(platform, workflow_id) == ["p"]


def _builtin_refs(platform: Any, workflow_id: str) -> list[str]:
    """The task references of the run's built-in activities, in order."""
    return [
        json.loads(event.input)["task"]["ref"]
        for event in platform.client.get_orchestration_history(workflow_id)
        if isinstance(event, history.TaskScheduledEvent) and event.name == ACTIVITY_BUILTIN
    ]


def test_a_long_run_keeps_the_results_of_its_last_execution_only(
    platform: Any, server: _Server
) -> None:
    """25 HTTP steps span three executions (continue-as-new every STEPS_PER_EXECUTION
    outcomes): the results kept for replays of the earlier executions are deleted as the
    later ones keep theirs, so a run holds one execution's."""
    steps = 25
    platform.register(
        {
            "name": "many_calls",
            "version": 1,
            "tasks": [_call(f"c{i}", f"{server.url}/{i}") for i in range(steps)],
            "outputParameters": {"last": f"${{c{steps - 1}.output.response.body.n}}"},
        }
    )

    workflow_id = platform.start("many_calls")
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"last": steps - 1}
    assert _activities(platform, workflow_id) == []
    rows = platform.tasks(workflow_id)
    store = platform.services.run_store
    kept = [
        ref
        for ref, row in sorted(rows.items(), key=lambda item: item[1].seq)
        if store.get_step_result(workflow_id, row.task_id, row.attempt) is not None
    ]
    assert kept == [f"c{i}" for i in range(2 * STEPS_PER_EXECUTION, steps)]


def test_the_rows_of_steps_done_in_one_work_item_show_when_each_ran(
    platform: Any, server: _Server
) -> None:
    """Two calls of 0.1 s each done in one work item: each row ends when its call did
    and the second is scheduled when the first ended (the run decides at the time kept
    with each result), not all at the work item's start."""
    platform.register(
        {
            "name": "two_pauses",
            "version": 1,
            "tasks": [_call("a", f"{server.url}/pause/1"), _call("b", f"{server.url}/pause/2")],
        }
    )

    workflow_id = platform.start("two_pauses")
    assert platform.wait(workflow_id).status == RunStatus.COMPLETED

    assert _activities(platform, workflow_id) == []
    rows = platform.tasks(workflow_id)
    a, b = rows["a"], rows["b"]
    assert a.end_time - a.scheduled_time >= 90, (a.scheduled_time, a.end_time)
    assert b.scheduled_time >= a.end_time
    assert b.end_time - b.scheduled_time >= 90, (b.scheduled_time, b.end_time)


def test_a_terminate_is_taken_in_while_a_call_begun_in_a_work_item_goes_on(
    platform: Any, server: _Server
) -> None:
    """A GET that answers after 3 s, begun in the work item: the work item leaves it to
    the activity after 0.25 s, so a terminate raised meanwhile ends the run at once, not
    when the call answers."""
    platform.register(
        {"name": "hangs", "version": 1, "tasks": [_call("h", f"{server.url}/hang/1")]}
    )
    workflow_id = platform.start("hangs")
    deadline = time.monotonic() + 5
    while not server.calls:  # the call is in flight
        assert time.monotonic() < deadline, "the call was never made"
        time.sleep(0.01)

    began = time.monotonic()
    platform.terminate(workflow_id, "enough")
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.TERMINATED and run.reason_for_incompletion == "enough"
    assert time.monotonic() - began < 2.0  # well before the call's answer
    assert server.calls == {"/hang/1": 1}
