"""Retrying runs with SUB_WORKFLOW tasks, as conductor-oss's test-harness
``HierarchicalForkJoinSubworkflowRetrySpec`` and e2e ``WorkflowRetryTests`` assert.

The spec's three-level shape: a root run of ``hierarchical_fork_join_swf`` (a FORK of a
SUB_WORKFLOW ``st1`` and a SIMPLE ``t2``, then a JOIN) whose ``st1`` starts a mid-level
run of the same definition, whose ``st1`` starts a leaf run of ``integration_test_wf``
(``t1``, ``t2``). The leaf's ``t2`` fails (no retries): the leaf, the mid-level run and the
root all end FAILED. Then:

* a retry of the root **without** ``resumeSubworkflowTasks`` gives its SUB_WORKFLOW task a
  new attempt with a new child run (which starts a new leaf);
* a retry of the root **with** the flag goes down to the leaf and retries it; the mid-level
  run and the root are RUNNING again, their SUB_WORKFLOW tasks IN_PROGRESS in place (same
  task, same ``subWorkflowId``), and they complete when the leaf does
  (``WorkflowExecutorOps.updateAndPushParents``);
* a retry of the leaf itself (no flag) takes its parents back to RUNNING the same way;
* a retry of the mid-level run without the flag gives its SUB_WORKFLOW a new child and
  takes the root back to RUNNING.

The e2e ``testRetryWithResumeFlagInForkPlusSubWorkflowAcrossFailedStatuses`` shape: a FORK
of two SUB_WORKFLOW branches; one child's ``B`` fails (FAILED or
FAILED_WITH_TERMINAL_ERROR), which fails the parent and terminates the other child (its
task CANCELED). A retry with the flag resumes both branches in place: the failing child's
completed ``A`` keeps its id and end time, ``B`` gets a new attempt, the terminated
sibling child runs its task again, and the parent completes end to end."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique
from tests.e2e.conductor.sub_workflow_shapes import (
    Levels,
    complete_forked_t2s,
    fail_leaf_t2,
    fork_resumed,
    leaf_retried,
    register_fork_join,
    retry,
    settle_run,
    shape,
    start_root,
)

TERMINAL = {"COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "TIMED_OUT", "TERMINATED"}


def _three_levels(conductor: Conductor) -> Levels:
    """The spec's setup: three runs FAILED by the leaf's ``t2``."""
    names = register_fork_join(conductor)
    task1, task2 = names.task1, names.task2
    root_id = start_root(conductor, names)
    # the root's and the mid-level run's t2 complete; the leaf's t1 completes, its t2 fails
    complete_forked_t2s(conductor, task2)
    fail_leaf_t2(conductor, task1, task2)

    root = conductor.wait_status(root_id, "FAILED")
    assert root["status"] == "FAILED"
    assert shape(root) == [
        ("FORK", "COMPLETED"),
        ("SUB_WORKFLOW", "FAILED"),
        (task2, "COMPLETED"),
        ("JOIN", "CANCELED"),
    ]
    mid_id = root["tasks"][1]["subWorkflowId"]
    mid = conductor.wait_status(mid_id, "FAILED")
    assert shape(mid) == shape(root)
    leaf_id = mid["tasks"][1]["subWorkflowId"]
    settle_run(conductor, leaf_id, "FAILED", [(task1, "COMPLETED"), (task2, "FAILED")])
    return Levels(root_id, mid_id, leaf_id, task1, task2)


def _resumed(
    conductor: Conductor, levels: Levels, workflow_id: str, child_id: str
) -> dict[str, Any]:
    """The parent once it is RUNNING again with its SUB_WORKFLOW task resumed in place
    and its JOIN waiting: the spec's assertions on the mid-level and root runs."""
    run = fork_resumed(conductor, workflow_id, child_id, levels.task2)
    assert not run["tasks"][1].get("reasonForIncompletion")
    return run


def _all_complete(conductor: Conductor, levels: Levels) -> None:
    """The leaf's new t2 completes: the leaf, then the mid-level run and the root."""
    conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    for workflow_id in (levels.leaf_id, levels.mid_id, levels.root_id):
        run = conductor.wait_status(workflow_id, "COMPLETED")
        assert run["status"] == "COMPLETED", (workflow_id, run.get("reasonForIncompletion"))


@pytest.mark.parametrize("retried", ["root", "mid"])
def test_a_retry_with_the_resume_flag_retries_the_leaf_and_resumes_its_parents(
    conductor: Conductor, retried: str
) -> None:
    # "Test retry on the root with resume flag" / "... on the mid-level with resume flag"
    levels = _three_levels(conductor)
    root_sub = conductor.run(levels.root_id)["tasks"][1]["taskId"]
    mid_sub = conductor.run(levels.mid_id)["tasks"][1]["taskId"]

    retry(conductor, levels.root_id if retried == "root" else levels.mid_id, resume=True)

    leaf_retried(conductor, levels.leaf_id, levels.task1, levels.task2)
    mid = _resumed(conductor, levels, levels.mid_id, levels.leaf_id)
    root = _resumed(conductor, levels, levels.root_id, levels.mid_id)
    # in place: the same task, no new attempt
    assert mid["tasks"][1]["taskId"] == mid_sub
    assert root["tasks"][1]["taskId"] == root_sub
    assert len(mid["tasks"]) == len(root["tasks"]) == 4
    _all_complete(conductor, levels)
    root = conductor.run(levels.root_id)
    assert root["tasks"][1]["status"] == "COMPLETED"
    assert root["tasks"][1]["subWorkflowId"] == levels.mid_id


def test_a_retry_of_the_leaf_takes_its_parents_back_to_running(conductor: Conductor) -> None:
    # "Test retry on the leaf in a 3-level subworkflow" (no resume flag)
    levels = _three_levels(conductor)
    retry(conductor, levels.leaf_id, resume=False)
    leaf_retried(conductor, levels.leaf_id, levels.task1, levels.task2)
    _resumed(conductor, levels, levels.mid_id, levels.leaf_id)
    _resumed(conductor, levels, levels.root_id, levels.mid_id)
    _all_complete(conductor, levels)


def test_a_retry_of_the_root_without_the_flag_starts_new_children(conductor: Conductor) -> None:
    # "Test retry on the root in a 3-level subworkflow": a NEW mid-level run, a NEW leaf
    levels = _three_levels(conductor)
    retry(conductor, levels.root_id, resume=False)
    root = conductor.wait(
        levels.root_id,
        lambda r: len(r["tasks"]) >= 5 and r["tasks"][-1]["status"] == "IN_PROGRESS",
    )
    assert root["status"] == "RUNNING"
    sub = [t for t in root["tasks"] if t["taskType"] == "SUB_WORKFLOW"]
    assert [t["status"] for t in sub] == ["FAILED", "IN_PROGRESS"]
    assert sub[1]["retriedTaskId"] == sub[0]["taskId"]
    new_mid = sub[1]["subWorkflowId"]
    assert new_mid and new_mid != levels.mid_id
    # the old mid-level run and leaf stay as they ended
    assert conductor.run(levels.mid_id)["status"] == "FAILED"
    assert conductor.run(levels.leaf_id)["status"] == "FAILED"
    conductor.poll_and_complete(levels.task2, {"op": "task2.done"})  # the new mid's t2
    mid = conductor.wait_tasks(new_mid, 3)
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    conductor.poll_and_complete(levels.task1, {"op": "task1.done"})
    conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    for workflow_id in (new_leaf, new_mid, levels.root_id):
        assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


def test_a_retry_of_the_mid_level_run_starts_a_new_leaf_and_resumes_the_root(
    conductor: Conductor,
) -> None:
    # "Test retry on the mid-level in a 3-level subworkflow"
    levels = _three_levels(conductor)
    retry(conductor, levels.mid_id, resume=False)
    mid = conductor.wait(
        levels.mid_id,
        lambda r: len(r["tasks"]) >= 5 and r["tasks"][-1]["status"] == "IN_PROGRESS",
    )
    sub = [t for t in mid["tasks"] if t["taskType"] == "SUB_WORKFLOW"]
    assert [t["status"] for t in sub] == ["FAILED", "IN_PROGRESS"]
    new_leaf = sub[1]["subWorkflowId"]
    assert new_leaf != levels.leaf_id
    _resumed(conductor, levels, levels.root_id, levels.mid_id)
    conductor.poll_and_complete(levels.task1, {"op": "task1.done"})
    conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    for workflow_id in (new_leaf, levels.mid_id, levels.root_id):
        assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


@pytest.mark.parametrize("fail_status", ["FAILED", "FAILED_WITH_TERMINAL_ERROR"])
def test_resume_restores_a_failed_and_a_terminated_sibling_in_place(
    conductor: Conductor, fail_status: str
) -> None:
    # e2e testRetryWithResumeFlagInForkPlusSubWorkflowAcrossFailedStatuses
    a, b, c, d = (unique(f"task_{x}") for x in "abcd")
    failing, cancelled, parent = unique("failing"), unique("cancelled"), unique("parent")
    conductor.taskdefs(*({"name": t, "retryCount": 0} for t in (a, b, c, d)))

    def child(name: str, types: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": "test@conductor.io",
            "tasks": [{"name": t, "taskReferenceName": t, "type": "SIMPLE"} for t in types],
        }

    def branch(ref: str, name: str) -> list[dict[str, Any]]:
        return [
            {
                "name": ref,
                "taskReferenceName": ref,
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": name, "version": 1},
            }
        ]

    conductor.register(
        child(failing, [a, b, c]),
        child(cancelled, [d]),
        {
            "name": parent,
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": "test@conductor.io",
            "tasks": [
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        branch("failing_sub", failing),
                        branch("cancelled_sub", cancelled),
                    ],
                },
                {
                    "name": "join",
                    "taskReferenceName": "join",
                    "type": "JOIN",
                    "joinOn": ["failing_sub", "cancelled_sub"],
                },
            ],
        },
    )
    parent_id = conductor.start(parent)
    run = conductor.wait(
        parent_id,
        lambda r: sum(1 for t in r["tasks"] if t.get("subWorkflowId")) == 2,
    )
    children = {t["referenceTaskName"]: t.get("subWorkflowId") for t in run["tasks"]}
    failing_id, cancelled_id = children["failing_sub"], children["cancelled_sub"]
    conductor.poll_and_complete(a)
    original_a = conductor.wait_task(failing_id, a, "COMPLETED")["tasks"][0]
    polled = conductor.poll_one(b)
    r = conductor.update(polled, fail_status, reason="b failed")
    assert r.status_code == 200, r.text

    run = conductor.wait_status(parent_id, "FAILED")
    assert run["status"] == "FAILED"
    by_ref = {t["referenceTaskName"]: t for t in run["tasks"]}
    assert by_ref["cancelled_sub"]["status"] == "CANCELED"
    assert by_ref["failing_sub"]["reasonForIncompletion"]
    assert conductor.wait_status(cancelled_id, "TERMINATED")["status"] == "TERMINATED"

    retry(conductor, parent_id, resume=True)

    def resumed(r: dict[str, Any]) -> bool:
        subs = [t for t in r["tasks"] if t["taskType"] == "SUB_WORKFLOW"]
        return r["status"] == "RUNNING" and all(t["status"] == "IN_PROGRESS" for t in subs)

    run = conductor.wait(parent_id, resumed)
    assert run["status"] == "RUNNING"
    by_ref = {t["referenceTaskName"]: t for t in run["tasks"]}
    for ref, child_id in (("failing_sub", failing_id), ("cancelled_sub", cancelled_id)):
        assert by_ref[ref]["status"] == "IN_PROGRESS"
        assert by_ref[ref]["subWorkflowId"] == child_id  # preserved: resumed in place
        assert not by_ref[ref].get("reasonForIncompletion")
    assert [t["taskType"] for t in run["tasks"]].count("SUB_WORKFLOW") == 2

    child_run = conductor.wait_task(failing_id, b, "SCHEDULED")
    assert child_run["status"] not in TERMINAL
    kept_a = [t for t in child_run["tasks"] if t["referenceTaskName"] == a]
    assert [(t["taskId"], t["status"], t["endTime"]) for t in kept_a] == [
        (original_a["taskId"], "COMPLETED", original_a["endTime"])
    ]

    conductor.poll_and_complete(b)
    conductor.poll_and_complete(c)
    conductor.poll_and_complete(d)  # the terminated sibling's task, run again
    run = conductor.wait_status(parent_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run.get("reasonForIncompletion")
    assert conductor.run(failing_id)["status"] == "COMPLETED"
    assert conductor.run(cancelled_id)["status"] == "COMPLETED"


def test_terminating_a_resumed_parent_terminates_the_children_it_waits_for(
    conductor: Conductor,
) -> None:
    # a parent resumed in place waits for its children by event, not as its
    # sub-orchestrations: its end must still end them (Conductor's SubWorkflow.cancel)
    levels = _three_levels(conductor)
    retry(conductor, levels.root_id, resume=True)
    leaf_retried(conductor, levels.leaf_id, levels.task1, levels.task2)
    _resumed(conductor, levels, levels.root_id, levels.mid_id)
    r = conductor.http.delete(f"/api/workflow/{levels.root_id}", params={"reason": "stop"})
    assert r.status_code < 300, r.text
    for workflow_id in (levels.root_id, levels.mid_id, levels.leaf_id):
        run = conductor.wait_status(workflow_id, "TERMINATED")
        assert run["status"] == "TERMINATED", workflow_id
    # nothing is left to hand out: the leaf's retried t2 was canceled with it
    assert conductor.poll(levels.task2, seconds=1) is None


def test_resume_reaches_a_child_of_a_loop_iteration(conductor: Conductor) -> None:
    # findLastFailedSubWorkflowIfAny's DO_WHILE case: the loop's failed SUB_WORKFLOW
    step = unique("loop_step")
    child, parent = unique("loop_child"), unique("loop_parent")
    conductor.taskdefs({"name": step, "retryCount": 0})
    conductor.register(
        {
            "name": child,
            "version": 1,
            "tasks": [{"name": step, "taskReferenceName": "s", "type": "SIMPLE"}],
        },
        {
            "name": parent,
            "version": 1,
            "tasks": [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "$.loop['iteration'] < 2",
                    "loopOver": [
                        {
                            "name": "sub",
                            "taskReferenceName": "sub",
                            "type": "SUB_WORKFLOW",
                            "subWorkflowParam": {"name": child, "version": 1},
                        }
                    ],
                }
            ],
        },
    )
    parent_id = conductor.start(parent)
    conductor.poll_and_complete(step, {"n": 1})
    conductor.poll_and_fail(step, "second iteration fails")
    run = conductor.wait_status(parent_id, "FAILED")
    assert run["status"] == "FAILED"
    failed = conductor.wait_task(parent_id, "sub__2", "FAILED")
    child_id = next(t for t in failed["tasks"] if t["referenceTaskName"] == "sub__2")[
        "subWorkflowId"
    ]

    retry(conductor, parent_id, resume=True)
    run = conductor.wait_task(parent_id, "sub__2", "IN_PROGRESS")
    assert run["status"] == "RUNNING"
    sub2 = [t for t in run["tasks"] if t["referenceTaskName"] == "sub__2"]
    assert [(t["status"], t["subWorkflowId"]) for t in sub2] == [("IN_PROGRESS", child_id)]
    conductor.poll_and_complete(step, {"n": 2})
    run = conductor.wait_status(parent_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run.get("reasonForIncompletion")
    loop = next(t for t in run["tasks"] if t["referenceTaskName"] == "loop")
    assert loop["outputData"]["iteration"] == 2
    assert conductor.run(child_id)["status"] == "COMPLETED"
