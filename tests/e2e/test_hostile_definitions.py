"""Hostile definitions against a running ``stepway dev`` over real HTTP (issue 11).

Each test starts one definition written to hurt the platform, and a trivial run next to
it. Each hostile run ends FAILED, within a bounded time, with a reason that names the
limit it ran into; the trivial run completes; and ``/health`` answers within 1 s the
whole time (a thread asks it four times a second). The platform is a process of its own
(tests/e2e/dev_process.py), so nothing it does can stall this test.

Limits are the defaults (docs/configuration.md) except the DO_WHILE iteration limit,
lowered through its variable so that the endless loop ends in seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from engine.adapters.run_store_sql import SqlRunStore

from .dev_process import DevProcess

pytestmark = pytest.mark.slow

#: how long a hostile run may take to end (the evaluator limits are 2 s of CPU, 10 s)
BOUND_SECONDS = 120
LOOP_LIMIT = 50
MB = 1024 * 1024

SELF_RECURSIVE = {
    "name": "again_and_again",
    "version": 1,
    "tasks": [
        {
            "name": "again",
            "taskReferenceName": "again",
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {"name": "again_and_again", "version": 1},
        }
    ],
}


@dataclass
class Health:
    """Asks /health four times a second; ``latencies`` holds (when, seconds) answers."""

    url: str
    latencies: list[tuple[float, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self.stop.wait(0.25):
                started = time.monotonic()
                try:
                    status = client.get("/health").status_code
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                took = time.monotonic() - started
                self.latencies.append((started, took))
                if status != 200:
                    self.failures.append(f"HTTP {status}")

    def slowest_since(self, since: float) -> float:
        return max((took for when, took in self.latencies if when >= since), default=0.0)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevProcess, Health]]:
    data = tmp_path_factory.mktemp("hostile") / "data"
    # registered before registration refused recursion (or written to the store around
    # the API): only the nesting limit can stop it
    store = SqlRunStore(f"sqlite:///{data / 'runs.db'}")
    store.put_definition("again_and_again", 1, SELF_RECURSIVE, int(time.time() * 1000))
    store.close()
    dev = DevProcess(data, env={"STEPWAY_MAX_LOOP_ITERATIONS": str(LOOP_LIMIT)})
    health = Health(dev.url)
    thread = threading.Thread(target=health.run, daemon=True)
    thread.start()
    try:
        dev.register_workflow(
            {
                "name": "trivial",
                "tasks": [
                    {
                        "name": "set",
                        "taskReferenceName": "set",
                        "type": "SET_VARIABLE",
                        "inputParameters": {"n": "${workflow.input.n}"},
                    },
                    {
                        "name": "pick",
                        "taskReferenceName": "pick",
                        "type": "SWITCH",
                        "evaluatorType": "value-param",
                        "expression": "n",
                        "inputParameters": {"n": "${workflow.variables.n}"},
                        "decisionCases": {"1": []},
                    },
                ],
                "outputParameters": {"n": "${workflow.variables.n}"},
            }
        )
        yield dev, health
    finally:
        health.stop.set()
        thread.join(5)
        dev.close()


def one_task(name: str, task: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "t", "taskReferenceName": "t", **task}], **extra}


def ended(dev: DevProcess, workflow_id: str, seconds: float = BOUND_SECONDS) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        run = dev.run(workflow_id)
        if run["status"] not in ("RUNNING", "PAUSED"):
            return run
        assert time.monotonic() < deadline, f"{workflow_id} still {run['status']}: {run}"
        time.sleep(0.25)


def hostile(
    platform: tuple[DevProcess, Health], name: str, input: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Start ``name`` and a trivial run beside it; the hostile run once it ended, after
    checking that the trivial one completed and /health stayed fast."""
    dev, health = platform
    since = time.monotonic()
    workflow_id = dev.start(name, input)
    trivial = dev.start("trivial", {"n": 1})
    run = ended(dev, workflow_id)
    assert ended(dev, trivial)["status"] == "COMPLETED"
    assert health.failures == [], health.failures
    slowest = health.slowest_since(since)
    assert slowest < 1.0, f"/health took {slowest:.2f} s while {name} ran"
    return run


def assert_met_a_time_limit(run: dict[str, Any]) -> None:
    """The run FAILED naming the evaluators' CPU limit, or their wall-clock limit."""
    assert run["status"] == "FAILED"
    reason = run["reasonForIncompletion"]
    assert (
        "the evaluation exceeded the CPU time limit of 2 s" in reason
        or "the evaluation exceeded the wall-clock limit of 10 s" in reason
    ), reason


def test_spinning_jq_meets_the_cpu_limit(platform: tuple[DevProcess, Health]) -> None:
    dev, _ = platform
    dev.register_workflow(
        one_task(
            "spin",
            {
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {"queryExpression": "${workflow.input.q}"},
            },
        )
    )
    run = hostile(platform, "spin", {"q": "last(range(1e10))"})
    assert_met_a_time_limit(run)
    assert run["tasks"][0]["status"] == "FAILED_WITH_TERMINAL_ERROR"


def test_a_memory_bomb_meets_the_memory_limit(platform: tuple[DevProcess, Health]) -> None:
    dev, _ = platform
    dev.register_workflow(
        one_task(
            "bomb",
            {"type": "JSON_JQ_TRANSFORM", "inputParameters": {"queryExpression": '"x" * 1e9'}},
        )
    )
    run = hostile(platform, "bomb")
    assert run["status"] == "FAILED"
    assert "exceeded the memory limit of 256 MiB" in run["reasonForIncompletion"]


def test_an_inline_result_nested_100000_deep_meets_the_depth_limit(
    platform: tuple[DevProcess, Health],
) -> None:
    dev, _ = platform
    script = (
        "(function () { var o = {}; for (var i = 0; i < 100000; i++) { o = {a: o}; } return o; })()"
    )
    dev.register_workflow(
        one_task("deep", {"type": "INLINE", "inputParameters": {"expression": script}})
    )
    run = hostile(platform, "deep")
    assert run["status"] == "FAILED"
    assert "nested more than 100 levels deep; the limit is 100" in run["reasonForIncompletion"]


def test_a_5_mb_output_interpolated_into_a_string_meets_the_inline_limit(
    platform: tuple[DevProcess, Health],
) -> None:
    dev, health = platform
    dev.register_task_def("produce_text")
    dev.register_workflow(
        {
            "name": "interpolate",
            "tasks": [
                {"name": "produce_text", "taskReferenceName": "p", "type": "SIMPLE"},
                {
                    "name": "use",
                    "taskReferenceName": "use",
                    "type": "INLINE",
                    "inputParameters": {"expression": "$.s.length", "s": "text: ${p.output.text}"},
                },
            ],
        }
    )
    since = time.monotonic()
    workflow_id = dev.start("interpolate")
    trivial = dev.start("trivial", {"n": 1})
    deadline = time.monotonic() + 60
    tasks: list[Any] = []
    while not tasks and time.monotonic() < deadline:
        tasks = dev.poll("produce_text")
    assert tasks, "the producing task was never handed out"
    posted = dev.http.post(
        "/api/tasks",
        json={
            "workflowInstanceId": workflow_id,
            "taskId": tasks[0]["taskId"],
            "workerId": "w1",
            "status": "COMPLETED",
            "outputData": {"text": "x" * (5 * MB)},
        },
    )
    assert posted.status_code == 200, posted.text
    run = ended(dev, workflow_id)
    assert ended(dev, trivial)["status"] == "COMPLETED"
    assert health.slowest_since(since) < 1.0
    assert run["status"] == "FAILED"
    assert (
        "input 's' of task 'use' is more than 10240 bytes, above the limit of 10240 bytes"
        in run["reasonForIncompletion"]
    )


def test_a_2_mb_input_passes_by_reference_and_fails_when_interpolated(
    platform: tuple[DevProcess, Health],
) -> None:
    dev, _ = platform
    doc = "d" * (2 * MB + 200 * 1024)
    dev.register_task_def("read_doc")
    dev.register_workflow(
        one_task(
            "by_reference",
            {
                "type": "SIMPLE",
                "name": "read_doc",
                "inputParameters": {"doc": "${workflow.input.doc}"},
            },
        )
    )
    workflow_id = dev.start("by_reference", {"doc": doc})
    deadline = time.monotonic() + 60
    tasks: list[Any] = []
    while not tasks and time.monotonic() < deadline:
        tasks = dev.poll("read_doc")
    assert tasks and tasks[0]["inputData"] == {"doc": doc}
    dev.ok(
        dev.http.post(
            "/api/tasks",
            json={
                "workflowInstanceId": workflow_id,
                "taskId": tasks[0]["taskId"],
                "workerId": "w1",
                "status": "COMPLETED",
                "outputData": {"length": len(doc)},
            },
        )
    )
    assert ended(dev, workflow_id)["status"] == "COMPLETED"

    dev.register_workflow(
        one_task(
            "interpolated",
            {
                "type": "SIMPLE",
                "name": "read_doc",
                "inputParameters": {"doc": "doc: ${workflow.input.doc}"},
            },
        )
    )
    run = hostile(platform, "interpolated", {"doc": doc})
    assert run["status"] == "FAILED"
    assert "input 'doc' of task 't' is more than 10240 bytes" in run["reasonForIncompletion"]


def test_a_self_recursive_sub_workflow_is_refused_and_one_stored_anyway_meets_the_depth_limit(
    platform: tuple[DevProcess, Health],
) -> None:
    dev, _ = platform
    itself = one_task(
        "recursive_again",
        {"type": "SUB_WORKFLOW", "subWorkflowParam": {"name": "recursive_again"}},
    )
    refused = dev.http.post("/api/metadata/workflow", json=itself)
    assert refused.status_code == 400, refused.text
    assert "can start itself (recursive_again -> recursive_again)" in refused.json()["message"]
    run = hostile(platform, "again_and_again")
    assert run["status"] == "FAILED"
    assert "above the limit of 16 (STEPWAY_MAX_WORKFLOW_DEPTH)" in run["reasonForIncompletion"]


def test_an_endless_do_while_meets_the_iteration_limit(platform: tuple[DevProcess, Health]) -> None:
    dev, _ = platform
    dev.register_workflow(
        one_task(
            "endless",
            {
                "type": "DO_WHILE",
                "loopCondition": "true",
                "loopOver": [
                    {
                        "name": "grow",
                        "taskReferenceName": "grow",
                        "type": "INLINE",
                        "inputParameters": {"expression": "'x'.repeat(1000)"},
                    }
                ],
            },
        )
    )
    run = hostile(platform, "endless")
    assert run["status"] == "FAILED"
    assert f"reached the limit of {LOOP_LIMIT} iterations" in run["reasonForIncompletion"]


def test_a_switch_whose_regular_expression_backtracks_forever_meets_the_cpu_limit(
    platform: tuple[DevProcess, Health],
) -> None:
    """QuickJS cannot interrupt its regular expressions: in the engine's own process this
    condition ran on past every time limit (2^40 backtracking steps), holding an engine
    thread and a core for good. It runs in an evaluator process, which is ended."""
    dev, _ = platform
    dev.register_workflow(
        one_task(
            "redos",
            {
                "type": "SWITCH",
                "evaluatorType": "javascript",
                "expression": "/(a+)+b/.test($.text) ? 'match' : 'none'",
                "inputParameters": {"text": "${workflow.input.text}"},
                "decisionCases": {"match": [], "none": []},
            },
        )
    )
    run = hostile(platform, "redos", {"text": "a" * 40})
    assert_met_a_time_limit(run)


def test_a_backtracking_regular_expression_in_a_reference_is_refused_and_never_run(
    platform: tuple[DevProcess, Health],
) -> None:
    """A JSONPath filter's regular expression runs in Python's ``re``, which holds the
    GIL while it backtracks: ``/(a|a)*b/`` on 30 characters froze the whole process (the
    control plane with it) for a minute, and each character more doubles that. Refused
    at registration, naming the field; one built from the run's input (a nested
    reference) resolves to null at once."""
    dev, _ = platform
    refused = dev.http.post(
        "/api/metadata/workflow",
        json=one_task(
            "regex_ref",
            {
                "type": "SET_VARIABLE",
                "inputParameters": {"m": "${workflow.input.s[?(@ =~ /(a|a)*b/)]}"},
            },
        ),
    )
    assert refused.status_code == 400, refused.text
    assert "tasks[0].inputParameters.m" in refused.text
    assert "regular expressions (=~) are not supported" in refused.text
    dev.register_workflow(
        one_task(
            "regex_from_input",
            {
                "type": "SET_VARIABLE",
                "inputParameters": {"m": "${${workflow.input.query}}"},
            },
            outputParameters={"m": "${workflow.variables.m}"},
        )
    )
    run = hostile(
        platform,
        "regex_from_input",
        {"query": "workflow.input.s[?(@ =~ /(a|a)*b/)]", "s": ["a" * 30]},
    )
    assert run["status"] == "COMPLETED" and run["output"] == {"m": None}, run


def test_a_do_while_condition_stringifying_a_value_nested_100000_deep_fails_the_loop(
    platform: tuple[DevProcess, Health],
) -> None:
    """QuickJS's own JSON.stringify crashed the engine's process on this condition
    (engine/language/scripting.py)."""
    dev, _ = platform
    condition = (
        "var o = {}; for (var i = 0; i < 100000; i++) { o = {a: o}; } JSON.stringify(o).length < 0"
    )
    dev.register_workflow(
        one_task(
            "stringify_deep",
            {
                "type": "DO_WHILE",
                "loopCondition": condition,
                "loopOver": [
                    {
                        "name": "once",
                        "taskReferenceName": "once",
                        "type": "SET_VARIABLE",
                        "inputParameters": {"x": 1},
                    }
                ],
            },
        )
    )
    run = hostile(platform, "stringify_deep")
    assert run["status"] == "FAILED"
    assert "loopCondition: InternalError: stack overflow" in run["reasonForIncompletion"]


def test_terminate_takes_effect_on_a_run_whose_task_spins(
    platform: tuple[DevProcess, Health],
) -> None:
    dev, _ = platform
    dev.register_workflow(
        one_task(
            "spin_to_terminate",
            {
                "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {"queryExpression": "last(range(1e10))"},
            },
        )
    )
    workflow_id = dev.start("spin_to_terminate")
    time.sleep(0.5)
    assert (
        dev.http.delete(f"/api/workflow/{workflow_id}", params={"reason": "enough"}).status_code
        < 300
    )
    run = ended(dev, workflow_id, 30)
    assert run["status"] == "TERMINATED"
    assert run["reasonForIncompletion"] == "enough"
