"""DO_WHILE ``keepLastN`` through the workflow and Task APIs: older iterations leave the
run, rows and all, as conductor-oss's DoWhile ``removeIterations`` deletes them.

The first scenario is conductor-oss's e2e ``DoWhileTests.testKeepLstN3`` with its
definition ``keep_last_n_example_3`` (e2e/src/test/resources/metadata/
do_while_keep_last_n_fix.json, rebuilt here with unique task names): a fork whose two
branches each run a five-iteration loop, one keeping 4 iterations and one 2; the
finished run has 18 tasks, as that test asserts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, refs, simple, unique, workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _loop(ref: str, keep: int, body: list[dict[str, Any]]) -> dict[str, Any]:
    """One of keep_last_n_example_3's loops: five iterations, graaljs condition."""
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "DO_WHILE",
        "inputParameters": {"number": 5, "keepLastN": keep},
        "loopCondition": (
            f"(function () {{\n  if ($.{ref}['iteration'] < $.number) {{\n    return true;\n"
            "  }\n  return false;\n})();"
        ),
        "evaluatorType": "graaljs",
        "loopOver": body,
    }


def _set_variable(ref: str) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "SET_VARIABLE",
        "inputParameters": {"name": "Orkes"},
    }


def test_conductors_keep_last_n_example_3_ends_with_18_tasks(conductor: Conductor) -> None:
    simple_, simple_1, simple_2 = (unique(n) for n in ("simple", "simple_1", "simple_2"))
    name = unique("keep_last_n_example_3")
    conductor.taskdefs(*({"name": t, "retryCount": 0} for t in (simple_, simple_1, simple_2)))
    inline = {
        "name": "inline",
        "taskReferenceName": "inline_ref",
        "type": "INLINE",
        "inputParameters": {
            "expression": "(function () {\n  return $.value1 + $.value2;\n})();",
            "evaluatorType": "graaljs",
            "value1": 1,
            "value2": 2,
        },
    }
    fork = {
        "name": "fork",
        "taskReferenceName": "fork_ref",
        "type": "FORK_JOIN",
        "forkTasks": [
            [
                inline,
                _loop(
                    "do_while_ref_1",
                    4,
                    [_set_variable("set_variable_ref_1"), simple(simple_, "simple_ref")],
                ),
            ],
            [
                _set_variable("set_variable_ref"),
                _loop(
                    "do_while_ref",
                    2,
                    [simple(simple_1, "simple_ref_1"), simple(simple_2, "simple_ref_2")],
                ),
            ],
        ],
    }
    join = {"name": "join", "taskReferenceName": "join_ref", "type": "JOIN"}
    conductor.register(workflow(name, [fork, join]))
    workflow_id = conductor.start(name)

    first = None
    for _ in range(5):
        polled = conductor.poll_and_complete(simple_1)
        first = first or polled
        conductor.poll_and_complete(simple_)
        conductor.poll_and_complete(simple_2)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert len(run["tasks"]) == 18, " ".join(sorted(refs(run)))
    loop_refs = sorted(r for r in refs(run) if "__" in r)
    assert loop_refs == sorted(
        [f"set_variable_ref_1__{n}" for n in (2, 3, 4, 5)]
        + [f"simple_ref__{n}" for n in (2, 3, 4, 5)]
        + [f"simple_ref_1__{n}" for n in (4, 5)]
        + [f"simple_ref_2__{n}" for n in (4, 5)]
    )
    outputs = {t["referenceTaskName"]: t["outputData"] for t in run["tasks"]}
    assert sorted(k for k in outputs["do_while_ref_1"] if k.isdigit()) == ["2", "3", "4", "5"]
    assert sorted(k for k in outputs["do_while_ref"] if k.isdigit()) == ["4", "5"]
    # the first iteration's task is gone from the Task API too
    assert first is not None
    assert conductor.http.get(f"/api/tasks/{first['taskId']}").status_code == 404


def test_a_retry_goes_on_from_the_kept_iterations_without_running_removed_ones(
    conductor: Conductor,
) -> None:
    """Iteration 4 of a keepLastN 2 loop fails the run (iteration 1 left when 3 ended);
    the retry hands out p__4 again, then p__5, and never an iteration the run removed."""
    task_type, name = unique("keep_retry"), unique("keep_retry_wf")
    conductor.taskdefs({"name": task_type, "retryCount": 0})
    loop = {
        "name": "loop",
        "taskReferenceName": "loop",
        "type": "DO_WHILE",
        "inputParameters": {"keepLastN": 2},
        "loopCondition": "$.loop['iteration'] < 5",
        "loopOver": [simple(task_type, "p", n="${loop.output.iteration}")],
    }
    conductor.register(workflow(name, [loop]))
    workflow_id = conductor.start(name)
    for n in (1, 2, 3):
        polled = conductor.poll_and_complete(task_type, {"n": n})
        assert polled["referenceTaskName"] == f"p__{n}"
    conductor.poll_and_fail(task_type, "boom")
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert refs(run) == ["loop", "p__2", "p__3", "p__4"]

    retried = conductor.http.post(f"/api/workflow/{workflow_id}/retry")
    assert retried.status_code == 204, retried.text
    handed = [conductor.poll_and_complete(task_type, {"again": True}) for _ in range(2)]
    assert [(t["referenceTaskName"], t["inputData"]["n"]) for t in handed] == [
        ("p__4", 4),
        ("p__5", 5),
    ]
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert [(t["referenceTaskName"], t["status"]) for t in run["tasks"]] == [
        ("loop", "COMPLETED"),
        ("p__4", "FAILED"),
        ("p__4", "COMPLETED"),
        ("p__5", "COMPLETED"),
    ]
    assert run["tasks"][0]["outputData"] == {
        "iteration": 5,
        "4": {"p": {"again": True}},
        "5": {"p": {"again": True}},
    }
    assert conductor.poll(task_type, seconds=0.5) is None
