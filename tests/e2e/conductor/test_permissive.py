"""Permissive tasks (conductor-oss's ``permissive`` workflow task field), with the
scenarios of its test-harness specs: WorkflowAndTaskConfigurationSpec ("Test simple
workflow which has a permissive task", "... a permissive optional task") and ForkJoinSpec
("Test a simple workflow with fork join permissive failure flow"), read through the
workflow API.

A permissive task that fails (its retries spent) does not end the run: the run goes on,
and fails when it would have completed, with Conductor's reason for the task; a JOIN on
it fails once every task it joins on has ended.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import (
    Conductor,
    simple,
    statuses,
    types,
    unique,
    workflow,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _fork_join(
    name: str,
    branches: list[list[tuple[str, str]]],
    join_on: list[str],
    after: tuple[str, str],
) -> dict[str, Any]:
    """ForkJoinSpec's fan-out: a FORK_JOIN of permissive worker tasks ((type, ref) per
    branch), a JOIN on ``join_on``, then the (not permissive) task ``after``."""
    return workflow(
        name,
        [
            {
                "name": "fork",
                "taskReferenceName": "fanouttask",
                "type": "FORK_JOIN",
                "forkTasks": [
                    [{**simple(t, ref), "permissive": True} for t, ref in branch]
                    for branch in branches
                ],
            },
            {
                "name": "join",
                "taskReferenceName": "fanouttask_join",
                "type": "JOIN",
                "joinOn": join_on,
            },
            simple(*after),
        ],
    )


def test_a_failed_permissive_task_lets_the_run_go_on_then_fails_it(
    conductor: Conductor,
) -> None:
    t1, t2, name = unique("task_permissive"), unique("integration_task_2"), unique("perm")
    conductor.taskdefs(
        {"name": t1, "retryCount": 1, "retryDelaySeconds": 0},
        {"name": t2, "retryCount": 0},
    )
    conductor.register(
        workflow(
            name,
            [
                {**simple(t1, "t1", p1="${workflow.input.param1}"), "permissive": True},
                {**simple(t2, "t2", tp2="${t1.output.op}"), "permissive": True},
            ],
        )
    )
    workflow_id = conductor.start(name, {"param1": "p1 value"})
    conductor.poll_and_fail(t1, "NETWORK ERROR")
    run = conductor.wait(workflow_id, lambda r: statuses(r) == ["FAILED", "SCHEDULED"])
    assert statuses(run) == ["FAILED", "SCHEDULED"], run["reasonForIncompletion"]

    conductor.poll_and_fail(t1, "NETWORK ERROR")
    run = conductor.wait(workflow_id, lambda r: len(r["tasks"]) == 3)
    assert run["status"] == "RUNNING", run["reasonForIncompletion"]
    assert statuses(run) == ["FAILED", "FAILED", "SCHEDULED"]
    assert types(run) == [t1, t1, t2]

    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert statuses(run) == ["FAILED", "FAILED", "COMPLETED"]
    failed = run["tasks"][1]["taskId"]
    assert run["reasonForIncompletion"] == (
        f"Task {failed} failed with status: FAILED and reason: 'NETWORK ERROR'"
    )
    assert "t1" in run["failedReferenceTaskNames"]


def test_a_permissive_optional_task_is_optional(conductor: Conductor) -> None:
    """Optional wins: the failed task is COMPLETED_WITH_ERRORS and the run completes."""
    t1, t2, name = unique("task_optional"), unique("integration_task_2"), unique("perm_opt")
    conductor.taskdefs({"name": t1, "retryCount": 0}, {"name": t2, "retryCount": 0})
    conductor.register(
        workflow(
            name,
            [
                {**simple(t1, "t1"), "permissive": True, "optional": True},
                simple(t2, "t2"),
            ],
        )
    )
    workflow_id = conductor.start(name)
    conductor.poll_and_fail(t1, "NETWORK ERROR")
    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert statuses(run) == ["COMPLETED_WITH_ERRORS", "COMPLETED"]


def test_a_join_on_a_failed_permissive_task_fails_once_every_branch_ended(
    conductor: Conductor,
) -> None:
    """ForkJoinSpec's FanInOutPermissiveTest: t1 fails, the JOIN waits for t2; once t2
    completed the JOIN fails with t1's reason, and so does the run (t3 never runs)."""
    t1, t2, t3 = (unique(f"integration_task_{i}") for i in (1, 2, 3))
    name = unique("FanInOutPermissiveTest")
    conductor.taskdefs(*({"name": t, "retryCount": 0} for t in (t1, t2, t3)))
    conductor.register(_fork_join(name, [[(t1, "t1")], [(t2, "t2")]], ["t1", "t2"], (t3, "t3")))
    workflow_id = conductor.start(name)
    conductor.poll_and_fail(t1, "Failed...")
    run = conductor.wait(workflow_id, lambda r: statuses(r)[1] == "FAILED")
    assert run["status"] == "RUNNING", run["reasonForIncompletion"]
    assert statuses(run) == ["COMPLETED", "FAILED", "SCHEDULED", "IN_PROGRESS"]

    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert types(run) == ["FORK", t1, t2, "JOIN"]
    assert statuses(run) == ["COMPLETED", "FAILED", "COMPLETED", "FAILED"]
    join = run["tasks"][3]
    assert join["reasonForIncompletion"] == "Failed..."
    assert run["reasonForIncompletion"] == (
        f"Task {join['taskId']} failed with status: FAILED and reason: 'Failed...'"
    )


def test_retrying_a_run_failed_by_permissive_tasks(conductor: Conductor) -> None:
    """ForkJoinSpec's "Test retrying a failed permissive fork join workflow": both
    branches' permissive tasks failed, the JOIN failed and the run with it; a retry makes
    a new attempt of each failed task (the completed one keeps its result), and once
    they complete the JOIN completes and the run goes on to its end."""
    rt1, rt2, rt3, rt4 = (unique(f"integration_p_task_0_RT_{i}") for i in (1, 2, 3, 4))
    name = unique("FanInOutPermissiveTest_2")
    conductor.taskdefs(*({"name": t, "retryCount": 0} for t in (rt1, rt2, rt3, rt4)))
    conductor.register(
        _fork_join(name, [[(rt1, "t1"), (rt3, "t3")], [(rt2, "t2")]], ["t3", "t2"], (rt4, "t4"))
    )
    workflow_id = conductor.start(name)
    conductor.poll_and_complete(rt1)
    conductor.poll_and_fail(rt2, "Failed....")
    run = conductor.wait(workflow_id, lambda r: rt3 in types(r))
    assert run["status"] == "RUNNING", run["reasonForIncompletion"]
    conductor.poll_and_fail(rt3, "Failed....")
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    by_type = {t["taskType"]: t["status"] for t in run["tasks"]}
    assert by_type == {
        "FORK": "COMPLETED",
        rt1: "COMPLETED",
        rt2: "FAILED",
        "JOIN": "FAILED",
        rt3: "FAILED",
    }

    retried = conductor.http.post(f"/api/workflow/{workflow_id}/retry")
    assert retried.status_code == 204, retried.text
    conductor.poll_and_complete(rt3)
    conductor.poll_and_complete(rt2)
    conductor.poll_and_complete(rt4)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert [t["status"] for t in run["tasks"] if t["taskType"] in (rt2, rt3)] == [
        "FAILED",
        "FAILED",
        "COMPLETED",
        "COMPLETED",
    ]
    assert [t["status"] for t in run["tasks"] if t["taskType"] in ("JOIN", rt4)][-2:] == [
        "COMPLETED",
        "COMPLETED",
    ]
