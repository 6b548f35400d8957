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

from dataclasses import dataclass
from typing import Any

from tests.e2e.conductor.harness import Conductor, unique

#: the JOIN of a failed parent, before or after a child's restart reopens it (the
#: specs accept either: the parent is also evaluated in the background)
JOIN_REOPENED = {"CANCELED", "IN_PROGRESS"}


@dataclass
class ThreeLevels:
    root_id: str
    mid_id: str
    leaf_id: str
    task1: str
    task2: str


def _shape(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["taskType"], t["status"]) for t in run["tasks"]]


def _restart(conductor: Conductor, workflow_id: str) -> None:
    # workflowExecutor.restart(id, false)
    r = conductor.http.post(
        f"/api/workflow/{workflow_id}/restart", params={"useLatestDefinitions": "false"}
    )
    assert r.status_code == 204, r.text


def _task_defs(conductor: Conductor) -> tuple[str, str]:
    """The harness's ``integration_task_1`` (retryCount 1, 120 s timeouts) and the
    spec's ``integration_task_2`` modified to 0 retries."""
    task1, task2 = unique("integration_task_1"), unique("integration_task_2")
    common = {"timeoutSeconds": 120, "responseTimeoutSeconds": 120}
    conductor.taskdefs(
        {"name": task1, "retryCount": 1, "ownerEmail": "test@harness.com", **common},
        {"name": task2, "retryCount": 0, "ownerEmail": "test@harness.com", **common},
    )
    return task1, task2


def _leaf_definition(name: str, task1: str, task2: str) -> dict[str, Any]:
    """simple_workflow_1_integration_test.json (``integration_test_wf``)."""
    return {
        "name": name,
        "description": "integration_test_wf",
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "restartable": True,
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
        "inputParameters": ["param1", "param2"],
        "tasks": [
            {
                "name": task1,
                "taskReferenceName": "t1",
                "inputParameters": {
                    "p1": "${workflow.input.param1}",
                    "p2": "${workflow.input.param2}",
                    "p3": "${CPEWF_TASK_ID}",
                    "someNullKey": None,
                },
                "type": "SIMPLE",
            },
            {
                "name": task2,
                "taskReferenceName": "t2",
                "inputParameters": {
                    "tp1": "${workflow.input.param1}",
                    "tp2": "${t1.output.op}",
                    "tp3": "${CPEWF_TASK_ID}",
                },
                "type": "SIMPLE",
            },
        ],
        "outputParameters": {
            "o1": "${workflow.input.param1}",
            "o2": "${t2.output.uuid}",
            "o3": "${t1.output.op}",
        },
    }


def _sub_workflow_task(ref: str) -> dict[str, Any]:
    return {
        "name": "sub_workflow_task",
        "taskReferenceName": ref,
        "inputParameters": {
            "param1": "${workflow.input.param1}",
            "param2": "${workflow.input.param2}",
            "subwf": "${workflow.input.nextSubwf}",
        },
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": "${workflow.input.subwf}", "version": 1},
        "retryCount": 0,
    }


# --- SubWorkflowRestartSpec ---------------------------------------------------------------


def _leaf_started(conductor: Conductor, leaf_id: str, task1: str) -> None:
    """A (new) leaf: RUNNING, its t1 SCHEDULED."""
    leaf = conductor.wait_tasks(leaf_id, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(task1, "SCHEDULED")]


def _chain_parent(
    conductor: Conductor, workflow_id: str, task1: str, status: str, sub_status: str
) -> dict[str, Any]:
    """A root or mid-level run of ``integration_test_wf_with_sub_wf`` once its run is
    ``status`` and its SUB_WORKFLOW ``sub_status``."""
    run = conductor.wait(
        workflow_id,
        lambda r: (
            r["status"] == status and len(r["tasks"]) == 2 and r["tasks"][1]["status"] == sub_status
        ),
    )
    assert run["status"] == status
    assert _shape(run) == [(task1, "COMPLETED"), ("SUB_WORKFLOW", sub_status)]
    return run


def _chain(conductor: Conductor) -> ThreeLevels:
    """SubWorkflowRestartSpec's setup: three runs FAILED by the leaf's t2."""
    task1, task2 = _task_defs(conductor)
    with_sub, leaf = unique("integration_test_wf_with_sub_wf"), unique("integration_test_wf")
    conductor.register(
        {
            # workflow_with_sub_workflow_1_integration_test.json
            "name": with_sub,
            "description": "integration_test_wf_with_sub_wf",
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": "test@harness.com",
            "restartable": True,
            "timeoutPolicy": "ALERT_ONLY",
            "timeoutSeconds": 0,
            "inputParameters": ["param1", "param2"],
            "tasks": [
                {
                    "name": task1,
                    "taskReferenceName": "t1",
                    "inputParameters": {
                        "p1": "${workflow.input.param1}",
                        "p2": "${workflow.input.param2}",
                        "someNullKey": None,
                    },
                    "type": "SIMPLE",
                },
                _sub_workflow_task("t2"),
            ],
        },
        _leaf_definition(leaf, task1, task2),
    )
    root_id = conductor.start(
        with_sub,
        {"param1": "p1 value", "param2": "p2 value", "subwf": with_sub, "nextSubwf": leaf},
        correlation_id="retry_on_root_in_3level_wf",
    )
    root = conductor.wait_tasks(root_id, 1)
    assert root["status"] == "RUNNING"
    assert _shape(root) == [(task1, "SCHEDULED")]

    conductor.poll_and_complete(task1, {"op": "task1.done"}, "task1.integration.worker")
    root = _chain_parent(conductor, root_id, task1, "RUNNING", "IN_PROGRESS")
    mid_id = root["tasks"][1]["subWorkflowId"]
    assert mid_id

    mid = conductor.wait_tasks(mid_id, 1)
    assert mid["status"] == "RUNNING"
    assert _shape(mid) == [(task1, "SCHEDULED")]
    conductor.poll_and_complete(task1, {"op": "task1.done"}, "task1.integration.worker")
    mid = _chain_parent(conductor, mid_id, task1, "RUNNING", "IN_PROGRESS")
    leaf_id = mid["tasks"][1]["subWorkflowId"]
    assert leaf_id
    _leaf_started(conductor, leaf_id, task1)

    conductor.poll_and_complete(task1, {"op": "task1.done"}, "task1.integration.worker")
    conductor.poll_and_fail(task2, "failed", "task2.integration.worker")
    leaf_run = conductor.wait_status(leaf_id, "FAILED")
    assert leaf_run["status"] == "FAILED"
    assert _shape(leaf_run) == [(task1, "COMPLETED"), (task2, "FAILED")]
    _chain_parent(conductor, mid_id, task1, "FAILED", "FAILED")
    _chain_parent(conductor, root_id, task1, "FAILED", "FAILED")
    return ThreeLevels(root_id, mid_id, leaf_id, task1, task2)


def _leaf_completes(conductor: Conductor, leaf_id: str, task1: str, task2: str) -> None:
    """Poll and complete the leaf's two tasks: the leaf COMPLETED."""
    conductor.poll_and_complete(task1, {"op": "task1.done"}, "task1.integration.worker")
    conductor.poll_and_complete(task2, {"op": "task2.done"}, "task2.integration.worker")
    leaf = conductor.wait_status(leaf_id, "COMPLETED")
    assert leaf["status"] == "COMPLETED"
    assert _shape(leaf) == [(task1, "COMPLETED"), (task2, "COMPLETED")]


def _chain_completed(conductor: Conductor, workflow_id: str, task1: str) -> None:
    run = _chain_parent(conductor, workflow_id, task1, "COMPLETED", "COMPLETED")
    assert not run["tasks"][1]["subworkflowChanged"]  # flag is reset after decide


def test_chain_restart_on_the_root(conductor: Conductor) -> None:
    # SubWorkflowRestartSpec: "Test restart on the root in a 3-level subworkflow"
    levels = _chain(conductor)
    task1, task2 = levels.task1, levels.task2
    _restart(conductor, levels.root_id)

    conductor.poll_and_complete(task1, {"op1": "task1.done"}, "task1.integration.worker")
    root = _chain_parent(conductor, levels.root_id, task1, "RUNNING", "IN_PROGRESS")
    new_mid = root["tasks"][1]["subWorkflowId"]
    assert new_mid and new_mid != levels.mid_id
    mid = conductor.wait_tasks(new_mid, 1)
    assert mid["status"] == "RUNNING"
    assert _shape(mid) == [(task1, "SCHEDULED")]

    conductor.poll_and_complete(task1, {"op": "task1.done"}, "task1.integration.worker")
    mid = _chain_parent(conductor, new_mid, task1, "RUNNING", "IN_PROGRESS")
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    _leaf_started(conductor, new_leaf, task1)

    _leaf_completes(conductor, new_leaf, task1, task2)
    _chain_completed(conductor, new_mid, task1)
    _chain_completed(conductor, levels.root_id, task1)


def test_chain_restart_on_the_mid_level(conductor: Conductor) -> None:
    # SubWorkflowRestartSpec: "Test restart on the mid-level in a 3-level subworkflow"
    levels = _chain(conductor)
    task1, task2 = levels.task1, levels.task2
    _restart(conductor, levels.mid_id)

    mid = conductor.wait_tasks(levels.mid_id, 1)
    assert mid["status"] == "RUNNING"
    assert _shape(mid) == [(task1, "SCHEDULED")]
    # the SUB_WORKFLOW task in the root is updated: IN_PROGRESS, waiting for the same run
    root = _chain_parent(conductor, levels.root_id, task1, "RUNNING", "IN_PROGRESS")
    assert root["tasks"][1]["subWorkflowId"] == levels.mid_id

    conductor.poll_and_complete(task1, {"op": "task1.done"}, "task1.integration.worker")
    mid = _chain_parent(conductor, levels.mid_id, task1, "RUNNING", "IN_PROGRESS")
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    _leaf_started(conductor, new_leaf, task1)

    _leaf_completes(conductor, new_leaf, task1, task2)
    _chain_completed(conductor, levels.mid_id, task1)
    _chain_completed(conductor, levels.root_id, task1)


def test_chain_restart_on_the_leaf(conductor: Conductor) -> None:
    # SubWorkflowRestartSpec: "Test restart on the leaf in a 3-level subworkflow"
    levels = _chain(conductor)
    task1, task2 = levels.task1, levels.task2
    _restart(conductor, levels.leaf_id)

    _leaf_started(conductor, levels.leaf_id, task1)
    mid = _chain_parent(conductor, levels.mid_id, task1, "RUNNING", "IN_PROGRESS")
    assert mid["tasks"][1]["subWorkflowId"] == levels.leaf_id
    root = _chain_parent(conductor, levels.root_id, task1, "RUNNING", "IN_PROGRESS")
    assert root["tasks"][1]["subWorkflowId"] == levels.mid_id

    _leaf_completes(conductor, levels.leaf_id, task1, task2)
    _chain_completed(conductor, levels.mid_id, task1)
    _chain_completed(conductor, levels.root_id, task1)


# --- HierarchicalForkJoinSubworkflowRestartSpec -------------------------------------------


def _fork_parent(
    conductor: Conductor,
    workflow_id: str,
    task2: str,
    *,
    status: str,
    sub: str,
    t2: str,
    join: set[str],
) -> dict[str, Any]:
    """A root or mid-level run of ``hierarchical_fork_join_swf`` once it is ``status``
    with its SUB_WORKFLOW ``sub``, its t2 ``t2`` and its JOIN one of ``join``."""

    def reached(r: dict[str, Any]) -> bool:
        return (
            r["status"] == status
            and len(r["tasks"]) == 4
            and [t["status"] for t in r["tasks"][1:3]] == [sub, t2]
            and r["tasks"][3]["status"] in join
        )

    run = conductor.wait(workflow_id, reached)
    assert run["status"] == status
    shape = _shape(run)
    assert shape[:3] == [("FORK", "COMPLETED"), ("SUB_WORKFLOW", sub), (task2, t2)]
    assert len(shape) == 4
    assert shape[3][0] == "JOIN"
    assert shape[3][1] in join
    return run


def _fork(conductor: Conductor) -> ThreeLevels:
    """HierarchicalForkJoinSubworkflowRestartSpec's setup: three runs FAILED by the
    leaf's t2."""
    task1, task2 = _task_defs(conductor)
    hierarchical, leaf = unique("hierarchical_fork_join_swf"), unique("integration_test_wf")
    conductor.register(
        {
            # hierarchical_fork_join_swf.json
            "name": hierarchical,
            "description": "hierarchical_fork_join_swf",
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": "test@harness.com",
            "restartable": True,
            "timeoutPolicy": "ALERT_ONLY",
            "timeoutSeconds": 0,
            "inputParameters": ["param1", "param2", "subwf"],
            "tasks": [
                {
                    "name": "fork",
                    "taskReferenceName": "fanouttask",
                    "inputParameters": {
                        "param1": "${workflow.input.param1}",
                        "param2": "${workflow.input.param2}",
                        "subwf": "${workflow.input.nextSubwf}",
                    },
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [_sub_workflow_task("st1")],
                        [
                            {
                                "name": task2,
                                "taskReferenceName": "t2",
                                "inputParameters": {
                                    "p1": "${workflow.input.param1}",
                                    "p2": "${workflow.input.param2}",
                                },
                                "type": "SIMPLE",
                                "retryCount": 0,
                            }
                        ],
                    ],
                },
                {
                    "name": "join",
                    "taskReferenceName": "fanouttask_join",
                    "inputParameters": {},
                    "type": "JOIN",
                    "joinOn": ["st1", "t2"],
                },
            ],
        },
        _leaf_definition(leaf, task1, task2),
    )
    root_id = conductor.start(
        hierarchical,
        {"param1": "p1 value", "param2": "p2 value", "subwf": hierarchical, "nextSubwf": leaf},
        correlation_id="retry_on_root_in_3level_wf",
    )
    root = _fork_parent(
        conductor,
        root_id,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="SCHEDULED",
        join={"IN_PROGRESS"},
    )
    mid_id = root["tasks"][1]["subWorkflowId"]
    assert mid_id

    # the root's and the mid-level run's t2 (either may be handed out first)
    conductor.poll_and_complete(task2, {"op": "task2.done"}, "task2.integration.worker")
    root = conductor.run(root_id)
    assert root["status"] == "RUNNING"
    assert len(root["tasks"]) == 4
    conductor.poll_and_complete(task2, {"op": "task2.done"}, "task2.integration.worker")
    mid = _fork_parent(
        conductor,
        mid_id,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="COMPLETED",
        join={"IN_PROGRESS"},
    )
    # the spec polls integration_task_2 a third time here: nothing is there to hand out
    assert conductor.poll(task2, "task2.integration.worker", seconds=1) is None

    leaf_id = mid["tasks"][1]["subWorkflowId"]
    assert leaf_id
    _leaf_started(conductor, leaf_id, task1)

    conductor.poll_and_complete(task1, {"op": "task1.done"}, "task1.integration.worker")
    conductor.poll_and_fail(task2, "failed", "task2.integration.worker")
    leaf_run = conductor.wait_status(leaf_id, "FAILED")
    assert leaf_run["status"] == "FAILED"
    assert _shape(leaf_run) == [(task1, "COMPLETED"), (task2, "FAILED")]
    for workflow_id in (mid_id, root_id):
        _fork_parent(
            conductor,
            workflow_id,
            task2,
            status="FAILED",
            sub="FAILED",
            t2="COMPLETED",
            join=JOIN_REOPENED,
        )
    return ThreeLevels(root_id, mid_id, leaf_id, task1, task2)


def _fork_completed(conductor: Conductor, workflow_id: str, task2: str) -> None:
    """The spec's assertWorkflowIsCompleted."""
    run = _fork_parent(
        conductor,
        workflow_id,
        task2,
        status="COMPLETED",
        sub="COMPLETED",
        t2="COMPLETED",
        join={"COMPLETED"},
    )
    assert not run["tasks"][1]["subworkflowChanged"]  # flag is reset after decide


def test_fork_restart_on_the_root(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRestartSpec:
    # "Test restart on the root in a 3-level subworkflow"
    levels = _fork(conductor)
    task1, task2 = levels.task1, levels.task2
    _restart(conductor, levels.root_id)

    root = _fork_parent(
        conductor,
        levels.root_id,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="SCHEDULED",
        join={"IN_PROGRESS"},
    )
    new_mid = root["tasks"][1]["subWorkflowId"]
    # the root's t2 and the new mid-level run's t2, in either order
    conductor.poll_and_complete(task2, {"op": "task2.done"}, "task2.integration.worker")
    conductor.poll_and_complete(task2, {"op": "task2.done"}, "task2.integration.worker")
    _fork_parent(
        conductor,
        levels.root_id,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="COMPLETED",
        join={"IN_PROGRESS"},
    )

    assert new_mid and new_mid != levels.mid_id
    mid = _fork_parent(
        conductor,
        new_mid,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="COMPLETED",
        join={"IN_PROGRESS"},
    )
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    _leaf_started(conductor, new_leaf, task1)

    _leaf_completes(conductor, new_leaf, task1, task2)
    _fork_completed(conductor, new_mid, task2)
    _fork_completed(conductor, levels.root_id, task2)


def test_fork_restart_on_the_mid_level(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRestartSpec:
    # "Test restart on the mid-level in a 3-level subworkflow"
    levels = _fork(conductor)
    task1, task2 = levels.task1, levels.task2
    _restart(conductor, levels.mid_id)

    _fork_parent(
        conductor,
        levels.mid_id,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="SCHEDULED",
        join={"IN_PROGRESS"},
    )
    # the root is updated: RUNNING, its SUB_WORKFLOW IN_PROGRESS for the same run
    root = _fork_parent(
        conductor,
        levels.root_id,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="COMPLETED",
        join=JOIN_REOPENED,
    )
    assert root["tasks"][1]["subWorkflowId"] == levels.mid_id

    conductor.poll_and_complete(task2, {"op": "task2.done"}, "task2.integration.worker")
    mid = _fork_parent(
        conductor,
        levels.mid_id,
        task2,
        status="RUNNING",
        sub="IN_PROGRESS",
        t2="COMPLETED",
        join={"IN_PROGRESS"},
    )
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    _leaf_started(conductor, new_leaf, task1)

    _leaf_completes(conductor, new_leaf, task1, task2)
    _fork_completed(conductor, levels.mid_id, task2)
    _fork_completed(conductor, levels.root_id, task2)


def test_fork_restart_on_the_leaf(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRestartSpec:
    # "Test restart on the leaf in a 3-level subworkflow"
    levels = _fork(conductor)
    task1, task2 = levels.task1, levels.task2
    _restart(conductor, levels.leaf_id)

    _leaf_started(conductor, levels.leaf_id, task1)
    # the mid-level run and the root are updated; their JOIN reopened at once or soon
    # after (the spec's joinIsUpdated, awaited after the first snapshot)
    for workflow_id, child_id in ((levels.mid_id, levels.leaf_id), (levels.root_id, levels.mid_id)):
        run = _fork_parent(
            conductor,
            workflow_id,
            task2,
            status="RUNNING",
            sub="IN_PROGRESS",
            t2="COMPLETED",
            join=JOIN_REOPENED,
        )
        assert run["tasks"][1]["subWorkflowId"] == child_id
    for workflow_id in (levels.mid_id, levels.root_id):
        run = _fork_parent(
            conductor,
            workflow_id,
            task2,
            status="RUNNING",
            sub="IN_PROGRESS",
            t2="COMPLETED",
            join={"IN_PROGRESS"},
        )
        assert not run["tasks"][1]["subworkflowChanged"]

    _leaf_completes(conductor, levels.leaf_id, task1, task2)
    _fork_completed(conductor, levels.mid_id, task2)
    _fork_completed(conductor, levels.root_id, task2)
