"""Retrying a chain of runs with SUB_WORKFLOW tasks, as conductor-oss's test-harness
``SubWorkflowRetrySpec`` asserts it.

The spec's three-level shape: a root run of ``integration_test_wf_with_sub_wf`` (a SIMPLE
``t1``, then a SUB_WORKFLOW ``t2``) whose SUB_WORKFLOW starts a mid-level run of the same
definition, whose SUB_WORKFLOW starts a leaf run of ``integration_test_wf`` (``t1``,
``t2``). The leaf's ``t2`` fails (no retries): the leaf, the mid-level run and the root
all end FAILED (``sub_workflow_shapes.chain_failed``, the spec's ``setup``). Then
``POST /workflow/{id}/retry`` (Conductor's ``WorkflowExecutorOps.retry``):

* a retry of the root without ``resumeSubworkflowTasks`` gives its SUB_WORKFLOW task a new
  attempt, which starts a NEW mid-level run, which starts a NEW leaf;
* a retry of the mid-level run without the flag does the same one level down (a NEW
  leaf) and takes the root back to RUNNING, its SUB_WORKFLOW task IN_PROGRESS in place;
* a retry of the root or of the mid-level run with the flag, and a retry of the leaf with
  or without it, retries the leaf's failed ``t2`` and takes the runs above it back to
  RUNNING, their SUB_WORKFLOW tasks IN_PROGRESS in place
  (``updateAndPushParents``).

When the (new) leaf completes, the runs above it complete.

``test_sub_workflow_retry.py`` ports ``HierarchicalForkJoinSubworkflowRetrySpec``, whose
features have the same six titles, on the FORK/JOIN shape (``hierarchical_fork_join_swf``:
parents of four tasks, a JOIN waiting for the SUB_WORKFLOW and a forked ``t2``). None of
its tests runs this spec's chain shape (``integration_test_wf_with_sub_wf``: parents of two
tasks, ``t1`` then the SUB_WORKFLOW), so no case here duplicates one there, and every
feature of this spec is ported.

Translations:

* Conductor decides inside its API calls and the spec ``sweep``s and executes the
  SUB_WORKFLOW tasks by hand (``asyncSystemTaskExecutor.execute``); Stepway decides and
  starts children in its engine a moment later, so each step waits for the state the
  spec asserts (``sub_workflow_shapes.settle``) and then asserts it.
* In "Test retry on the root in a 3-level subworkflow" the spec's first
  ``pollAndCompleteTask('integration_task_1')`` after the retry finds nothing in
  Conductor (the root's ``t1`` stays COMPLETED, and the new SUB_WORKFLOW task is not
  executed yet, so no new mid-level run exists): ``pollAndCompleteTask`` returns an
  empty tuple, nothing is asserted on it. Stepway has already started the new mid-level
  run, whose ``t1`` that poll would take, so the poll is left out; the new mid-level
  run's ``t1`` is completed where the spec completes it.
* ``subworkflowChanged`` is always false in Stepway (docs/conductor-compatibility.md,
  "Task"), which is what the spec asserts after the parents were decided.
* The workflow names and task types are ``unique()``; the definitions leave out
  ``failureWorkflow`` (``sub_workflow_shapes``' docstring). The spec also registers
  ``simple_one_task_sub_workflow_integration_test.json``, which no case uses.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor
from tests.e2e.conductor.sub_workflow_shapes import (
    WORKER1,
    Levels,
    chain_failed,
    chain_parent,
    chain_resumed,
    first_task_scheduled,
    leaf_retried,
    retry,
    settle_run,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

CORRELATION_ID = "retry_on_root_in_3level_wf"


def _with_new_attempt(
    conductor: Conductor, workflow_id: str, task1: str, status: str, sub: str
) -> dict[str, Any]:
    """A root or mid-level run retried without the flag, once it is ``status`` with its
    ``t1`` COMPLETED, its failed SUB_WORKFLOW task ``retried`` and the new attempt
    (``retriedTaskId`` naming it) ``sub``."""
    run = settle_run(
        conductor,
        workflow_id,
        status,
        [(task1, "COMPLETED"), ("SUB_WORKFLOW", "FAILED"), ("SUB_WORKFLOW", sub)],
    )
    assert run["tasks"][1]["retried"] is True
    assert run["tasks"][2]["retriedTaskId"] == run["tasks"][1]["taskId"]
    return run


def _new_child(run: dict[str, Any], old_id: str) -> str:
    """The run the new SUB_WORKFLOW attempt (``tasks[2]``) started: not ``old_id``."""
    child_id: str = run["tasks"][2]["subWorkflowId"]
    assert child_id
    assert child_id != old_id
    return child_id


def _complete_new_leaf(conductor: Conductor, leaf_id: str, task1: str, task2: str) -> None:
    """The spec's "poll and complete the 2 tasks in the leaf workflow": the new leaf
    COMPLETED."""
    polled = conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)
    assert polled["workflowInstanceId"] == leaf_id
    polled = conductor.poll_and_complete(task2, {"op": "task1.done"}, WORKER1)
    assert polled["workflowInstanceId"] == leaf_id
    settle_run(conductor, leaf_id, "COMPLETED", [(task1, "COMPLETED"), (task2, "COMPLETED")])


def _leaf_retried_and_parents_resumed(conductor: Conductor, levels: Levels) -> None:
    """After a retry that reaches the leaf: the leaf RUNNING with its failed ``t2``
    retried by a SCHEDULED one, the mid-level run and the root RUNNING with their
    SUB_WORKFLOW task IN_PROGRESS (in place, waiting for the same child) and, after they
    are decided, ``subworkflowChanged`` false."""
    leaf_retried(conductor, levels.leaf_id, levels.task1, levels.task2)
    for workflow_id, child_id in ((levels.mid_id, levels.leaf_id), (levels.root_id, levels.mid_id)):
        run = chain_resumed(conductor, workflow_id, child_id, levels.task1)
        assert not run["tasks"][1]["subworkflowChanged"]


def _retried_leaf_completes(conductor: Conductor, levels: Levels) -> None:
    """The leaf's new ``t2`` completes: the leaf COMPLETED (its failed ``t2`` still
    ``retried``), then the mid-level run and the root COMPLETED, their SUB_WORKFLOW task
    COMPLETED, ``subworkflowChanged`` false."""
    polled = conductor.poll_and_complete(levels.task2, {"op": "task1.done"}, WORKER1)
    assert polled["workflowInstanceId"] == levels.leaf_id
    leaf_retried(conductor, levels.leaf_id, levels.task1, levels.task2, "COMPLETED")
    for workflow_id in (levels.mid_id, levels.root_id):
        run = chain_parent(conductor, workflow_id, levels.task1, "COMPLETED", "COMPLETED")
        assert not run["tasks"][1]["subworkflowChanged"]


def test_retry_on_the_root_in_a_3_level_subworkflow(conductor: Conductor) -> None:
    # SubWorkflowRetrySpec."Test retry on the root in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    retry(conductor, levels.root_id, resume=False)

    # "verify that the root workflow created a new SUB_WORKFLOW task"
    root = _with_new_attempt(conductor, levels.root_id, levels.task1, "RUNNING", "IN_PROGRESS")
    # "verify that a new mid level workflow is created and is in RUNNING state"
    new_mid = _new_child(root, levels.mid_id)
    first_task_scheduled(conductor, new_mid, levels.task1)

    # "the new mid level workflow completes its first task and starts its subworkflow"
    polled = conductor.poll_and_complete(levels.task1, {"op1": "task1.done"}, WORKER1)
    assert polled["workflowInstanceId"] == new_mid
    mid = chain_parent(conductor, new_mid, levels.task1, "RUNNING", "IN_PROGRESS")
    # "verify that a new leaf workflow is created and is in RUNNING state"
    new_leaf: str = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf
    assert new_leaf != levels.leaf_id
    first_task_scheduled(conductor, new_leaf, levels.task1)

    # "poll and complete the two tasks in the leaf workflow"
    _complete_new_leaf(conductor, new_leaf, levels.task1, levels.task2)

    # "the new mid level workflow is in COMPLETED state"
    chain_parent(conductor, new_mid, levels.task1, "COMPLETED", "COMPLETED")
    # "the root workflow is in COMPLETED state"
    _with_new_attempt(conductor, levels.root_id, levels.task1, "COMPLETED", "COMPLETED")


def test_retry_on_the_root_with_resume_flag_in_a_3_level_subworkflow(
    conductor: Conductor,
) -> None:
    # SubWorkflowRetrySpec."Test retry on the root with resume flag in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    retry(conductor, levels.root_id, resume=True)
    _leaf_retried_and_parents_resumed(conductor, levels)
    _retried_leaf_completes(conductor, levels)


def test_retry_on_the_mid_level_in_a_3_level_subworkflow(conductor: Conductor) -> None:
    # SubWorkflowRetrySpec."Test retry on the mid-level in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    retry(conductor, levels.mid_id, resume=False)

    # "verify that the mid workflow created a new SUB_WORKFLOW task"
    mid = _with_new_attempt(conductor, levels.mid_id, levels.task1, "RUNNING", "IN_PROGRESS")
    # "verify the SUB_WORKFLOW task in root workflow is updated"
    chain_resumed(conductor, levels.root_id, levels.mid_id, levels.task1)
    # "verify that a new leaf workflow is created and is in RUNNING state"
    new_leaf = _new_child(mid, levels.leaf_id)
    first_task_scheduled(conductor, new_leaf, levels.task1)

    # "poll and complete the 2 tasks in the leaf workflow"
    _complete_new_leaf(conductor, new_leaf, levels.task1, levels.task2)

    # "verify that the mid level and root workflows reach COMPLETED state"
    _with_new_attempt(conductor, levels.mid_id, levels.task1, "COMPLETED", "COMPLETED")
    root = chain_parent(conductor, levels.root_id, levels.task1, "COMPLETED", "COMPLETED")
    assert not root["tasks"][1]["subworkflowChanged"]


def test_retry_on_the_mid_level_with_resume_flag_in_a_3_level_subworkflow(
    conductor: Conductor,
) -> None:
    # SubWorkflowRetrySpec."Test retry on the mid-level with resume flag in a 3-level
    # subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    retry(conductor, levels.mid_id, resume=True)
    _leaf_retried_and_parents_resumed(conductor, levels)
    _retried_leaf_completes(conductor, levels)


def test_retry_on_the_leaf_in_a_3_level_subworkflow(conductor: Conductor) -> None:
    # SubWorkflowRetrySpec."Test retry on the leaf in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    retry(conductor, levels.leaf_id, resume=False)
    _leaf_retried_and_parents_resumed(conductor, levels)
    _retried_leaf_completes(conductor, levels)


def test_retry_on_the_leaf_with_resume_flag_in_a_3_level_subworkflow(
    conductor: Conductor,
) -> None:
    # SubWorkflowRetrySpec."Test retry on the leaf with resume flag in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    retry(conductor, levels.leaf_id, resume=True)
    _leaf_retried_and_parents_resumed(conductor, levels)
    _retried_leaf_completes(conductor, levels)
