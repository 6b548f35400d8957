"""Rerunning runs with SUB_WORKFLOW tasks, as conductor-oss's test-harness
``SubWorkflowRerunSpec`` and ``HierarchicalForkJoinSubworkflowRerunSpec`` assert.

``SubWorkflowRerunSpec``'s three-level shape: a root run of
``integration_test_wf_with_sub_wf`` (a SIMPLE ``t1``, then a SUB_WORKFLOW ``t2``) whose
SUB_WORKFLOW starts a mid-level run of the same definition, whose SUB_WORKFLOW starts a
leaf run of ``integration_test_wf`` (``t1``, ``t2``). ``HierarchicalForkJoinSubworkflow
RerunSpec``'s: a root run of ``hierarchical_fork_join_swf`` (a FORK of a SUB_WORKFLOW
``st1`` and a SIMPLE ``t2``, then a JOIN) whose ``st1`` starts a mid-level run of the same
definition, whose ``st1`` starts a leaf run of ``integration_test_wf``. In both the leaf's
``t2`` fails (no retries): the leaf, the mid-level run and the root all end FAILED. Then
``POST /workflow/{id}/rerun`` (Conductor's ``WorkflowExecutorOps.rerun``/``rerunWF``):

* a rerun of the root (from the start, or from its first task) runs it again with a new
  SUB_WORKFLOW task, which starts a NEW mid-level run, which starts a NEW leaf;
* a rerun of the mid-level run runs it again under its id with a NEW leaf, and takes the
  root back to RUNNING, its SUB_WORKFLOW task IN_PROGRESS again waiting for the same
  mid-level run (``updateAndPushParents(workflow, "reran")``);
* a rerun of the leaf runs it again under its id and takes the mid-level run and the root
  back to RUNNING the same way.

When the (new) leaf completes, the runs above it complete.

Conductor decides inside its API calls and the specs ``sweep`` and execute system tasks
by hand; Stepway decides in its engine a moment later, so the tests wait for the settled
state after each action and then assert it. ``subworkflowChanged`` is always false in
Stepway (docs/conductor-compatibility.md, "Task"), which is what the specs assert after
the parent was decided. Stepway's task ids and child run ids differ in form from
Conductor's. A rerun keeps the id of the task it reruns from, as Conductor's ``rerunWF``
resets it in place; the specs do not assert on it, the last test here does."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor
from tests.e2e.conductor.sub_workflow_shapes import (
    JOIN_REOPENED,
    Levels,
    chain_completes,
    chain_failed,
    chain_parent,
    chain_resumed,
    child_of,
    complete_forked_t2s,
    first_task_scheduled,
    fork_completes,
    fork_parents_failed,
    fork_resumed,
    fork_running,
    fork_started,
    leaf_fails,
    new_child_of,
    new_leaf_of_chain,
    new_leaf_of_fork,
    new_mid_of_chain,
)

CORRELATION_ID = "rerun_on_root_in_3level_wf"


def _rerun(conductor: Conductor, workflow_id: str, from_task: bool) -> None:
    """``POST /workflow/{id}/rerun`` with a RerunWorkflowRequest; ``from_task``: from the
    run's first task (``tasks[0].taskId``, as the specs' "with taskId" cases)."""
    body: dict[str, Any] = {"reRunFromWorkflowId": workflow_id}
    if from_task:
        body["reRunFromTaskId"] = conductor.run(workflow_id)["tasks"][0]["taskId"]
    r = conductor.http.post(f"/api/workflow/{workflow_id}/rerun", json=body)
    assert r.status_code == 200, r.text
    assert r.text == workflow_id


# --- SubWorkflowRerunSpec -------------------------------------------------------------


@pytest.mark.parametrize("from_task", [False, True], ids=["whole", "from_task"])
def test_rerun_of_the_root_starts_a_new_mid_level_run_and_leaf(
    conductor: Conductor, from_task: bool
) -> None:
    # SubWorkflowRerunSpec "Test rerun on the root-level in a 3-level subworkflow" and
    # "Test rerun on the root-level with taskId in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    _rerun(conductor, levels.root_id, from_task)

    conductor.poll_and_complete(levels.task1, {"op1": "task1.done"})
    new_mid = new_mid_of_chain(conductor, levels)
    polled = conductor.poll_and_complete(levels.task1, {"op": "task1.done"})
    assert polled["workflowInstanceId"] == new_mid
    new_leaf = new_leaf_of_chain(conductor, levels, new_mid)

    chain_completes(conductor, levels, new_leaf, new_mid)


@pytest.mark.parametrize("from_task", [False, True], ids=["whole", "from_task"])
def test_rerun_of_the_mid_level_run_resumes_the_root_and_starts_a_new_leaf(
    conductor: Conductor, from_task: bool
) -> None:
    # SubWorkflowRerunSpec "Test rerun on the mid-level in a 3-level subworkflow" and
    # "Test rerun on the mid-level with taskId in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    _rerun(conductor, levels.mid_id, from_task)

    first_task_scheduled(conductor, levels.mid_id, levels.task1)
    # "verify the SUB_WORKFLOW task in root workflow is updated"
    chain_resumed(conductor, levels.root_id, levels.mid_id, levels.task1)

    conductor.poll_and_complete(levels.task1, {"op": "task1.done"})
    new_leaf = new_leaf_of_chain(conductor, levels, levels.mid_id)

    chain_completes(conductor, levels, new_leaf, levels.mid_id)


@pytest.mark.parametrize("from_task", [False, True], ids=["whole", "from_task"])
def test_rerun_of_the_leaf_resumes_its_parents(conductor: Conductor, from_task: bool) -> None:
    # SubWorkflowRerunSpec "Test rerun on the leaf-level in a 3-level subworkflow" and
    # "Test rerun on the leaf-level with taskId in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    _rerun(conductor, levels.leaf_id, from_task)

    first_task_scheduled(conductor, levels.leaf_id, levels.task1)
    chain_resumed(conductor, levels.mid_id, levels.leaf_id, levels.task1)
    chain_resumed(conductor, levels.root_id, levels.mid_id, levels.task1)

    chain_completes(conductor, levels, levels.leaf_id, levels.mid_id)


def test_rerun_from_the_sub_workflow_task_keeps_its_id_and_starts_a_new_child(
    conductor: Conductor,
) -> None:
    """Not in the specs: a rerun of the mid-level run from its SUB_WORKFLOW task keeps
    the task's id (conductor-oss's ``rerunWF`` resets the task in place), which starts a
    NEW leaf; ``t1`` before it stands; the root resumes, and the chain completes."""
    levels = chain_failed(conductor, CORRELATION_ID)
    before = conductor.run(levels.mid_id)["tasks"]
    r = conductor.http.post(
        f"/api/workflow/{levels.mid_id}/rerun",
        json={"reRunFromWorkflowId": levels.mid_id, "reRunFromTaskId": before[1]["taskId"]},
    )
    assert r.status_code == 200, r.text

    mid = chain_parent(conductor, levels.mid_id, levels.task1, "RUNNING", "IN_PROGRESS")
    assert [t["taskId"] for t in mid["tasks"]] == [t["taskId"] for t in before]
    assert mid["tasks"][0]["endTime"] == before[0]["endTime"]
    new_leaf = new_child_of(mid, levels.leaf_id)
    chain_resumed(conductor, levels.root_id, levels.mid_id, levels.task1)
    first_task_scheduled(conductor, new_leaf, levels.task1)
    chain_completes(conductor, levels, new_leaf, levels.mid_id)


# --- HierarchicalForkJoinSubworkflowRerunSpec -----------------------------------------


def _fork_join_levels(conductor: Conductor) -> Levels:
    """``HierarchicalForkJoinSubworkflowRerunSpec.setup``: three runs FAILED by the leaf's
    ``t2``."""
    names, root_id, mid_id = fork_started(conductor, CORRELATION_ID)

    # the root's and the mid-level run's t2 (Conductor hands out the root's first, as it
    # decides the mid-level run only when swept; here both are queued: either order)
    complete_forked_t2s(conductor, names.task2)
    mid = fork_running(conductor, mid_id, names.task2, "COMPLETED")
    root = conductor.wait_task(root_id, "t2", "COMPLETED")
    assert root["status"] == "RUNNING"
    assert len(root["tasks"]) == 4

    levels = Levels(root_id, mid_id, child_of(mid), names.task1, names.task2)
    leaf_fails(conductor, levels)
    fork_parents_failed(conductor, levels)
    return levels


def test_fork_join_rerun_of_the_root_starts_a_new_mid_level_run_and_leaf(
    conductor: Conductor,
) -> None:
    # HierarchicalForkJoinSubworkflowRerunSpec "Test rerun on the root-level in a 3-level
    # subworkflow"
    levels = _fork_join_levels(conductor)
    _rerun(conductor, levels.root_id, from_task=False)

    root = fork_running(conductor, levels.root_id, levels.task2, "SCHEDULED")
    new_mid = new_child_of(root, levels.mid_id)

    # the root's t2 and the new mid-level run's t2, in either order (as the spec's await)
    complete_forked_t2s(conductor, levels.task2)
    fork_running(conductor, levels.root_id, levels.task2, "COMPLETED")
    new_leaf = new_leaf_of_fork(conductor, levels, new_mid)

    fork_completes(conductor, levels, new_leaf, new_mid)


def test_fork_join_rerun_of_the_mid_level_run_resumes_the_root_and_starts_a_new_leaf(
    conductor: Conductor,
) -> None:
    # HierarchicalForkJoinSubworkflowRerunSpec "Test rerun on the mid-level in a 3-level
    # subworkflow"
    levels = _fork_join_levels(conductor)
    _rerun(conductor, levels.mid_id, from_task=False)

    fork_running(conductor, levels.mid_id, levels.task2, "SCHEDULED")
    # "verify the root workflow is updated"
    fork_resumed(conductor, levels.root_id, levels.mid_id, levels.task2)

    polled = conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    assert polled["workflowInstanceId"] == levels.mid_id
    new_leaf = new_leaf_of_fork(conductor, levels, levels.mid_id)

    fork_completes(conductor, levels, new_leaf, levels.mid_id)


def test_fork_join_rerun_of_the_leaf_resumes_its_parents(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRerunSpec "Test rerun on the leaf-level in a 3-level
    # subworkflow"
    levels = _fork_join_levels(conductor)
    _rerun(conductor, levels.leaf_id, from_task=False)

    first_task_scheduled(conductor, levels.leaf_id, levels.task1)
    # "verify that the mid-level workflow is updated" / "... the root workflow is updated":
    # the JOIN CANCELED or already IN_PROGRESS again
    fork_resumed(conductor, levels.mid_id, levels.leaf_id, levels.task2, JOIN_REOPENED)
    fork_resumed(conductor, levels.root_id, levels.mid_id, levels.task2, JOIN_REOPENED)
    # after the sweep: "the JOIN is updated"
    for workflow_id in (levels.mid_id, levels.root_id):
        run = fork_running(conductor, workflow_id, levels.task2, "COMPLETED")
        assert not run["tasks"][1].get("subworkflowChanged")

    fork_completes(conductor, levels, levels.leaf_id, levels.mid_id)
