"""Restarting runs with SUB_WORKFLOW tasks, as conductor-oss's test-harness
``SubWorkflowRestartSpec`` and ``HierarchicalForkJoinSubworkflowRestartSpec`` assert.

Both specs build three levels of runs that all end FAILED because the leaf's ``t2``
fails (its task definition has no retries):

* ``SubWorkflowRestartSpec``: a root run of ``integration_test_wf_with_sub_wf`` (a SIMPLE
  ``t1``, then a SUB_WORKFLOW ``t2``) whose ``t2`` starts a mid-level run of the same
  definition, whose ``t2`` starts a leaf run of ``integration_test_wf`` (``t1``, ``t2``);
* ``HierarchicalForkJoinSubworkflowRestartSpec``: a root run of
  ``hierarchical_fork_join_swf`` (a FORK of a SUB_WORKFLOW ``st1`` and a SIMPLE ``t2``,
  then a JOIN) whose ``st1`` starts a mid-level run of the same definition, whose ``st1``
  starts a leaf run of ``integration_test_wf``.

Then one run is restarted (``POST /workflow/{id}/restart``; conductor-oss's
``WorkflowExecutorOps.restart``): it runs again from its first task under the same id,
and ``updateAndPushParents(workflow, "restarted")`` takes its parents back to RUNNING,
their SUB_WORKFLOW task IN_PROGRESS again waiting for the same (restarted) child:

* a restart of the root starts a NEW mid-level run, which starts a NEW leaf; all three
  complete when the new leaf does;
* a restart of the mid-level run starts a NEW leaf, the root's SUB_WORKFLOW task is
  IN_PROGRESS again, and the mid-level run and the root complete when the new leaf does;
* a restart of the leaf takes the mid-level run and the root back to RUNNING, and both
  complete when the restarted leaf does.

The specs' ``sweep``/``asyncSystemTaskExecutor.execute`` calls have no counterpart here:
Stepway decides (and starts child runs) by itself, so each step waits for the settled
state and then asserts it. ``subworkflowChanged`` is always false in Stepway
(docs/conductor-compatibility.md, "Task"), which is what the specs assert once decided.
The definitions' ``failureWorkflow: "$workflow.input.failureWfName"`` is left out (it
resolves to no workflow in Conductor; no assertion reads it)."""

from __future__ import annotations

from tests.e2e.conductor.harness import Conductor
from tests.e2e.conductor.sub_workflow_shapes import (
    JOIN_REOPENED,
    WORKER1,
    WORKER2,
    Levels,
    chain_completes,
    chain_failed,
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
    restart,
)

CORRELATION_ID = "retry_on_root_in_3level_wf"


# --- SubWorkflowRestartSpec ---------------------------------------------------------------


def test_chain_restart_on_the_root(conductor: Conductor) -> None:
    # SubWorkflowRestartSpec: "Test restart on the root in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    restart(conductor, levels.root_id)

    conductor.poll_and_complete(levels.task1, {"op1": "task1.done"}, WORKER1)
    new_mid = new_mid_of_chain(conductor, levels)
    conductor.poll_and_complete(levels.task1, {"op": "task1.done"}, WORKER1)
    new_leaf = new_leaf_of_chain(conductor, levels, new_mid)

    chain_completes(conductor, levels, new_leaf, new_mid)


def test_chain_restart_on_the_mid_level(conductor: Conductor) -> None:
    # SubWorkflowRestartSpec: "Test restart on the mid-level in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    restart(conductor, levels.mid_id)

    first_task_scheduled(conductor, levels.mid_id, levels.task1)
    # the SUB_WORKFLOW task in the root is updated: IN_PROGRESS, waiting for the same run
    chain_resumed(conductor, levels.root_id, levels.mid_id, levels.task1)

    conductor.poll_and_complete(levels.task1, {"op": "task1.done"}, WORKER1)
    new_leaf = new_leaf_of_chain(conductor, levels, levels.mid_id)

    chain_completes(conductor, levels, new_leaf, levels.mid_id)


def test_chain_restart_on_the_leaf(conductor: Conductor) -> None:
    # SubWorkflowRestartSpec: "Test restart on the leaf in a 3-level subworkflow"
    levels = chain_failed(conductor, CORRELATION_ID)
    restart(conductor, levels.leaf_id)

    first_task_scheduled(conductor, levels.leaf_id, levels.task1)
    chain_resumed(conductor, levels.mid_id, levels.leaf_id, levels.task1)
    chain_resumed(conductor, levels.root_id, levels.mid_id, levels.task1)

    chain_completes(conductor, levels, levels.leaf_id, levels.mid_id)


# --- HierarchicalForkJoinSubworkflowRestartSpec -------------------------------------------


def _fork(conductor: Conductor) -> Levels:
    """HierarchicalForkJoinSubworkflowRestartSpec's setup: three runs FAILED by the
    leaf's t2."""
    names, root_id, mid_id = fork_started(conductor, CORRELATION_ID)
    task2 = names.task2

    # the root's and the mid-level run's t2 (either may be handed out first)
    conductor.poll_and_complete(task2, {"op": "task2.done"}, WORKER2)
    root = conductor.run(root_id)
    assert root["status"] == "RUNNING"
    assert len(root["tasks"]) == 4
    conductor.poll_and_complete(task2, {"op": "task2.done"}, WORKER2)
    mid = fork_running(conductor, mid_id, task2, "COMPLETED")
    # the spec polls integration_task_2 a third time here: nothing is there to hand out
    assert conductor.poll(task2, WORKER2, seconds=1) is None

    levels = Levels(root_id, mid_id, child_of(mid), names.task1, task2)
    leaf_fails(conductor, levels)
    fork_parents_failed(conductor, levels)
    return levels


def test_fork_restart_on_the_root(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRestartSpec:
    # "Test restart on the root in a 3-level subworkflow"
    levels = _fork(conductor)
    restart(conductor, levels.root_id)

    root = fork_running(conductor, levels.root_id, levels.task2, "SCHEDULED")
    # the root's t2 and the new mid-level run's t2, in either order
    complete_forked_t2s(conductor, levels.task2)
    fork_running(conductor, levels.root_id, levels.task2, "COMPLETED")

    new_mid = new_child_of(root, levels.mid_id)
    new_leaf = new_leaf_of_fork(conductor, levels, new_mid)

    fork_completes(conductor, levels, new_leaf, new_mid)


def test_fork_restart_on_the_mid_level(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRestartSpec:
    # "Test restart on the mid-level in a 3-level subworkflow"
    levels = _fork(conductor)
    restart(conductor, levels.mid_id)

    fork_running(conductor, levels.mid_id, levels.task2, "SCHEDULED")
    # the root is updated: RUNNING, its SUB_WORKFLOW IN_PROGRESS for the same run
    fork_resumed(conductor, levels.root_id, levels.mid_id, levels.task2, JOIN_REOPENED)

    conductor.poll_and_complete(levels.task2, {"op": "task2.done"}, WORKER2)
    new_leaf = new_leaf_of_fork(conductor, levels, levels.mid_id)

    fork_completes(conductor, levels, new_leaf, levels.mid_id)


def test_fork_restart_on_the_leaf(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRestartSpec:
    # "Test restart on the leaf in a 3-level subworkflow"
    levels = _fork(conductor)
    restart(conductor, levels.leaf_id)

    first_task_scheduled(conductor, levels.leaf_id, levels.task1)
    # the mid-level run and the root are updated; their JOIN reopened at once or soon
    # after (the spec's joinIsUpdated, awaited after the first snapshot)
    fork_resumed(conductor, levels.mid_id, levels.leaf_id, levels.task2, JOIN_REOPENED)
    fork_resumed(conductor, levels.root_id, levels.mid_id, levels.task2, JOIN_REOPENED)
    for workflow_id in (levels.mid_id, levels.root_id):
        run = fork_running(conductor, workflow_id, levels.task2, "COMPLETED")
        assert not run["tasks"][1]["subworkflowChanged"]

    fork_completes(conductor, levels, levels.leaf_id, levels.mid_id)
