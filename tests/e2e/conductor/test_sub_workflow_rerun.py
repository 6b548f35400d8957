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
Conductor's; a rerun gives the task it reruns from a new id (Conductor keeps it), which the
specs do not assert on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique

OWNER = "test@harness.com"
CORRELATION_ID = "rerun_on_root_in_3level_wf"


@dataclass
class Levels:
    root_id: str
    mid_id: str
    leaf_id: str
    task1: str
    task2: str


def _shape(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["taskType"], t["status"]) for t in run["tasks"]]


def _rerun(conductor: Conductor, workflow_id: str, from_task: bool) -> None:
    """``POST /workflow/{id}/rerun`` with a RerunWorkflowRequest; ``from_task``: from the
    run's first task (``tasks[0].taskId``, as the specs' "with taskId" cases)."""
    body: dict[str, Any] = {"reRunFromWorkflowId": workflow_id}
    if from_task:
        body["reRunFromTaskId"] = conductor.run(workflow_id)["tasks"][0]["taskId"]
    r = conductor.http.post(f"/api/workflow/{workflow_id}/rerun", json=body)
    assert r.status_code == 200, r.text
    assert r.text == workflow_id


def _task_defs(conductor: Conductor) -> tuple[str, str]:
    """The harness's ``integration_task_1`` (retryCount 1, timeouts 120 s) and
    ``integration_task_2`` with the retryCount 0 the specs' setup gives it."""
    task1, task2 = unique("integration_task_1"), unique("integration_task_2")
    conductor.taskdefs(
        {
            "name": task1,
            "retryCount": 1,
            "timeoutSeconds": 120,
            "responseTimeoutSeconds": 120,
            "ownerEmail": OWNER,
        },
        {
            "name": task2,
            "retryCount": 0,
            "timeoutSeconds": 120,
            "responseTimeoutSeconds": 120,
            "ownerEmail": OWNER,
        },
    )
    return task1, task2


def _simple_wf(name: str, task1: str, task2: str) -> dict[str, Any]:
    """``simple_workflow_1_integration_test.json`` (``integration_test_wf``), but its
    ``failureWorkflow`` (``$workflow.input.failureWfName``, which the specs' input leaves
    unset, so Conductor starts none)."""
    return {
        "name": name,
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": OWNER,
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


# --- SubWorkflowRerunSpec -------------------------------------------------------------


def _three_levels(conductor: Conductor) -> Levels:
    """``SubWorkflowRerunSpec.setup``: three runs FAILED by the leaf's ``t2``."""
    task1, task2 = _task_defs(conductor)
    with_sub, simple_wf = unique("integration_test_wf_with_sub_wf"), unique("integration_test_wf")
    conductor.register(
        _simple_wf(simple_wf, task1, task2),
        {
            # workflow_with_sub_workflow_1_integration_test.json, but its failureWorkflow
            "name": with_sub,
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": OWNER,
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
    )
    root_id = conductor.start(
        with_sub,
        {"param1": "p1 value", "param2": "p2 value", "subwf": with_sub, "nextSubwf": simple_wf},
        version=1,
        correlation_id=CORRELATION_ID,
    )
    root = conductor.wait_tasks(root_id, 1)
    assert root["status"] == "RUNNING"
    assert _shape(root) == [(task1, "SCHEDULED")]

    polled = conductor.poll_and_complete(task1, {"op": "task1.done"})
    assert polled["workflowInstanceId"] == root_id
    root = conductor.wait_task(root_id, "t2", "IN_PROGRESS")
    assert root["status"] == "RUNNING"
    assert _shape(root) == [(task1, "COMPLETED"), ("SUB_WORKFLOW", "IN_PROGRESS")]

    mid_id = root["tasks"][1]["subWorkflowId"]
    mid = conductor.wait_tasks(mid_id, 1)
    assert mid["status"] == "RUNNING"
    assert _shape(mid) == [(task1, "SCHEDULED")]
    conductor.poll_and_complete(task1, {"op": "task1.done"})
    mid = conductor.wait_task(mid_id, "t2", "IN_PROGRESS")
    leaf_id = mid["tasks"][1]["subWorkflowId"]
    leaf = conductor.wait_tasks(leaf_id, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(task1, "SCHEDULED")]

    conductor.poll_and_complete(task1, {"op": "task1.done"})
    conductor.poll_and_fail(task2, "failed")
    leaf = conductor.wait_status(leaf_id, "FAILED")
    assert leaf["status"] == "FAILED"
    assert _shape(leaf) == [(task1, "COMPLETED"), (task2, "FAILED")]
    for workflow_id in (mid_id, root_id):
        run = conductor.wait_status(workflow_id, "FAILED")
        assert run["status"] == "FAILED"
        assert _shape(run) == [(task1, "COMPLETED"), ("SUB_WORKFLOW", "FAILED")]
    return Levels(root_id, mid_id, leaf_id, task1, task2)


def _leaf_completes(conductor: Conductor, levels: Levels, leaf_id: str) -> None:
    """The (new) leaf's two tasks complete: the leaf COMPLETED."""
    conductor.poll_and_complete(levels.task1, {"op": "task1.done"})
    conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    leaf = conductor.wait_status(leaf_id, "COMPLETED")
    assert leaf["status"] == "COMPLETED"
    assert _shape(leaf) == [(levels.task1, "COMPLETED"), (levels.task2, "COMPLETED")]


def _completed(conductor: Conductor, workflow_id: str, task1: str) -> dict[str, Any]:
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", (workflow_id, run.get("reasonForIncompletion"))
    assert _shape(run) == [(task1, "COMPLETED"), ("SUB_WORKFLOW", "COMPLETED")]
    assert not run["tasks"][1].get("subworkflowChanged")  # "flag is reset after decide"
    return run


def _resumed(conductor: Conductor, workflow_id: str, child_id: str, task1: str) -> None:
    """A parent taken back to RUNNING by its child's rerun (``updateAndPushParents``):
    its SUB_WORKFLOW task IN_PROGRESS again, waiting for the same child run."""
    run = conductor.wait(
        workflow_id,
        lambda r: r["status"] == "RUNNING" and r["tasks"][-1]["status"] == "IN_PROGRESS",
    )
    assert run["status"] == "RUNNING"
    assert _shape(run) == [(task1, "COMPLETED"), ("SUB_WORKFLOW", "IN_PROGRESS")]
    assert run["tasks"][1]["subWorkflowId"] == child_id


@pytest.mark.parametrize("from_task", [False, True], ids=["whole", "from_task"])
def test_rerun_of_the_root_starts_a_new_mid_level_run_and_leaf(
    conductor: Conductor, from_task: bool
) -> None:
    # SubWorkflowRerunSpec "Test rerun on the root-level in a 3-level subworkflow" and
    # "Test rerun on the root-level with taskId in a 3-level subworkflow"
    levels = _three_levels(conductor)
    _rerun(conductor, levels.root_id, from_task)

    conductor.poll_and_complete(levels.task1, {"op1": "task1.done"})
    root = conductor.wait_task(levels.root_id, "t2", "IN_PROGRESS")
    assert root["status"] == "RUNNING"
    assert _shape(root) == [(levels.task1, "COMPLETED"), ("SUB_WORKFLOW", "IN_PROGRESS")]

    new_mid = root["tasks"][1]["subWorkflowId"]
    assert new_mid and new_mid != levels.mid_id
    mid = conductor.wait_tasks(new_mid, 1)
    assert mid["status"] == "RUNNING"
    assert _shape(mid) == [(levels.task1, "SCHEDULED")]

    polled = conductor.poll_and_complete(levels.task1, {"op": "task1.done"})
    assert polled["workflowInstanceId"] == new_mid
    mid = conductor.wait_task(new_mid, "t2", "IN_PROGRESS")
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    leaf = conductor.wait_tasks(new_leaf, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(levels.task1, "SCHEDULED")]

    _leaf_completes(conductor, levels, new_leaf)
    _completed(conductor, new_mid, levels.task1)
    _completed(conductor, levels.root_id, levels.task1)


@pytest.mark.parametrize("from_task", [False, True], ids=["whole", "from_task"])
def test_rerun_of_the_mid_level_run_resumes_the_root_and_starts_a_new_leaf(
    conductor: Conductor, from_task: bool
) -> None:
    # SubWorkflowRerunSpec "Test rerun on the mid-level in a 3-level subworkflow" and
    # "Test rerun on the mid-level with taskId in a 3-level subworkflow"
    levels = _three_levels(conductor)
    _rerun(conductor, levels.mid_id, from_task)

    mid = conductor.wait_tasks(levels.mid_id, 1)
    assert mid["status"] == "RUNNING"
    assert _shape(mid) == [(levels.task1, "SCHEDULED")]
    # "verify the SUB_WORKFLOW task in root workflow is updated"
    root = conductor.wait(
        levels.root_id,
        lambda r: r["status"] == "RUNNING" and r["tasks"][-1]["status"] == "IN_PROGRESS",
    )
    assert root["status"] == "RUNNING"
    assert len(root["tasks"]) == 2
    assert (root["tasks"][1]["taskType"], root["tasks"][1]["status"]) == (
        "SUB_WORKFLOW",
        "IN_PROGRESS",
    )
    assert root["tasks"][1]["subWorkflowId"] == levels.mid_id

    conductor.poll_and_complete(levels.task1, {"op": "task1.done"})
    mid = conductor.wait_task(levels.mid_id, "t2", "IN_PROGRESS")
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    leaf = conductor.wait_tasks(new_leaf, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(levels.task1, "SCHEDULED")]

    _leaf_completes(conductor, levels, new_leaf)
    _completed(conductor, levels.mid_id, levels.task1)
    _completed(conductor, levels.root_id, levels.task1)


@pytest.mark.parametrize("from_task", [False, True], ids=["whole", "from_task"])
def test_rerun_of_the_leaf_resumes_its_parents(conductor: Conductor, from_task: bool) -> None:
    # SubWorkflowRerunSpec "Test rerun on the leaf-level in a 3-level subworkflow" and
    # "Test rerun on the leaf-level with taskId in a 3-level subworkflow"
    levels = _three_levels(conductor)
    _rerun(conductor, levels.leaf_id, from_task)

    leaf = conductor.wait_tasks(levels.leaf_id, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(levels.task1, "SCHEDULED")]
    _resumed(conductor, levels.mid_id, levels.leaf_id, levels.task1)
    _resumed(conductor, levels.root_id, levels.mid_id, levels.task1)

    _leaf_completes(conductor, levels, levels.leaf_id)
    _completed(conductor, levels.mid_id, levels.task1)
    _completed(conductor, levels.root_id, levels.task1)


# --- HierarchicalForkJoinSubworkflowRerunSpec -----------------------------------------


def _fork_join_levels(conductor: Conductor) -> Levels:
    """``HierarchicalForkJoinSubworkflowRerunSpec.setup``: three runs FAILED by the leaf's
    ``t2``."""
    task1, task2 = _task_defs(conductor)
    hierarchical, simple_wf = unique("hierarchical_fork_join_swf"), unique("integration_test_wf")
    conductor.register(
        _simple_wf(simple_wf, task1, task2),
        {
            # hierarchical_fork_join_swf.json
            "name": hierarchical,
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": OWNER,
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
    )
    root_id = conductor.start(
        hierarchical,
        {
            "param1": "p1 value",
            "param2": "p2 value",
            "subwf": hierarchical,
            "nextSubwf": simple_wf,
        },
        version=1,
        correlation_id=CORRELATION_ID,
    )
    root = conductor.wait_task(root_id, "st1", "IN_PROGRESS")
    assert root["status"] == "RUNNING"
    assert _shape(root) == [
        ("FORK", "COMPLETED"),
        ("SUB_WORKFLOW", "IN_PROGRESS"),
        (task2, "SCHEDULED"),
        ("JOIN", "IN_PROGRESS"),
    ]
    mid_id = root["tasks"][1]["subWorkflowId"]

    # the root's and the mid-level run's t2 (Conductor hands out the root's first, as it
    # decides the mid-level run only when swept; here both are queued: either order)
    conductor.poll_and_complete(task2, {"op": "task2.done"})
    conductor.poll_and_complete(task2, {"op": "task2.done"})
    mid = conductor.wait(
        mid_id,
        lambda r: len(r["tasks"]) == 4 and r["tasks"][2]["status"] == "COMPLETED",
    )
    assert mid["status"] == "RUNNING"
    assert _shape(mid) == [
        ("FORK", "COMPLETED"),
        ("SUB_WORKFLOW", "IN_PROGRESS"),
        (task2, "COMPLETED"),
        ("JOIN", "IN_PROGRESS"),
    ]
    root = conductor.wait_task(root_id, "t2", "COMPLETED")
    assert root["status"] == "RUNNING"
    assert len(root["tasks"]) == 4

    leaf_id = mid["tasks"][1]["subWorkflowId"]
    leaf = conductor.wait_tasks(leaf_id, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(task1, "SCHEDULED")]

    conductor.poll_and_complete(task1, {"op": "task1.done"})
    conductor.poll_and_fail(task2, "failed")
    leaf = conductor.wait_status(leaf_id, "FAILED")
    assert leaf["status"] == "FAILED"
    assert _shape(leaf) == [(task1, "COMPLETED"), (task2, "FAILED")]
    for workflow_id in (mid_id, root_id):
        run = conductor.wait_status(workflow_id, "FAILED")
        assert run["status"] == "FAILED"
        assert _shape(run)[:3] == [
            ("FORK", "COMPLETED"),
            ("SUB_WORKFLOW", "FAILED"),
            (task2, "COMPLETED"),
        ]
        assert run["tasks"][3]["taskType"] == "JOIN"
        assert run["tasks"][3]["status"] in ("CANCELED", "IN_PROGRESS")
        assert len(run["tasks"]) == 4
    return Levels(root_id, mid_id, leaf_id, task1, task2)


def _fork_join_running(
    conductor: Conductor, workflow_id: str, t2_status: str, join: tuple[str, ...]
) -> dict[str, Any]:
    """The run once RUNNING with its SUB_WORKFLOW IN_PROGRESS, ``t2`` ``t2_status``, its
    JOIN in one of ``join``."""
    run = conductor.wait(
        workflow_id,
        lambda r: (
            r["status"] == "RUNNING"
            and len(r["tasks"]) == 4
            and r["tasks"][1]["status"] == "IN_PROGRESS"
            and r["tasks"][2]["status"] == t2_status
            and r["tasks"][3]["status"] in join
        ),
    )
    assert run["status"] == "RUNNING"
    assert len(run["tasks"]) == 4
    assert _shape(run)[:3] == [
        ("FORK", "COMPLETED"),
        ("SUB_WORKFLOW", "IN_PROGRESS"),
        (run["tasks"][2]["taskType"], t2_status),
    ]
    assert run["tasks"][3]["taskType"] == "JOIN"
    assert run["tasks"][3]["status"] in join
    return run


def _fork_join_completed(conductor: Conductor, workflow_id: str, task2: str) -> None:
    """The spec's ``assertWorkflowIsCompleted``."""
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", (workflow_id, run.get("reasonForIncompletion"))
    assert _shape(run) == [
        ("FORK", "COMPLETED"),
        ("SUB_WORKFLOW", "COMPLETED"),
        (task2, "COMPLETED"),
        ("JOIN", "COMPLETED"),
    ]
    assert not run["tasks"][1].get("subworkflowChanged")  # "flag is reset after decide"


def test_fork_join_rerun_of_the_root_starts_a_new_mid_level_run_and_leaf(
    conductor: Conductor,
) -> None:
    # HierarchicalForkJoinSubworkflowRerunSpec "Test rerun on the root-level in a 3-level
    # subworkflow"
    levels = _fork_join_levels(conductor)
    _rerun(conductor, levels.root_id, from_task=False)

    root = _fork_join_running(conductor, levels.root_id, "SCHEDULED", ("IN_PROGRESS",))
    new_mid = root["tasks"][1]["subWorkflowId"]
    assert new_mid and new_mid != levels.mid_id

    # the root's t2 and the new mid-level run's t2, in either order (as the spec's await)
    conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    _fork_join_running(conductor, levels.root_id, "COMPLETED", ("IN_PROGRESS",))
    mid = _fork_join_running(conductor, new_mid, "COMPLETED", ("IN_PROGRESS",))

    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    leaf = conductor.wait_tasks(new_leaf, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(levels.task1, "SCHEDULED")]

    _leaf_completes(conductor, levels, new_leaf)
    _fork_join_completed(conductor, new_mid, levels.task2)
    _fork_join_completed(conductor, levels.root_id, levels.task2)


def test_fork_join_rerun_of_the_mid_level_run_resumes_the_root_and_starts_a_new_leaf(
    conductor: Conductor,
) -> None:
    # HierarchicalForkJoinSubworkflowRerunSpec "Test rerun on the mid-level in a 3-level
    # subworkflow"
    levels = _fork_join_levels(conductor)
    _rerun(conductor, levels.mid_id, from_task=False)

    mid = _fork_join_running(conductor, levels.mid_id, "SCHEDULED", ("IN_PROGRESS",))
    # "verify the root workflow is updated"
    root = _fork_join_running(conductor, levels.root_id, "COMPLETED", ("IN_PROGRESS",))
    assert root["tasks"][1]["subWorkflowId"] == levels.mid_id

    polled = conductor.poll_and_complete(levels.task2, {"op": "task2.done"})
    assert polled["workflowInstanceId"] == levels.mid_id
    mid = _fork_join_running(conductor, levels.mid_id, "COMPLETED", ("IN_PROGRESS",))
    new_leaf = mid["tasks"][1]["subWorkflowId"]
    assert new_leaf and new_leaf != levels.leaf_id
    leaf = conductor.wait_tasks(new_leaf, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(levels.task1, "SCHEDULED")]

    _leaf_completes(conductor, levels, new_leaf)
    _fork_join_completed(conductor, levels.mid_id, levels.task2)
    _fork_join_completed(conductor, levels.root_id, levels.task2)


def test_fork_join_rerun_of_the_leaf_resumes_its_parents(conductor: Conductor) -> None:
    # HierarchicalForkJoinSubworkflowRerunSpec "Test rerun on the leaf-level in a 3-level
    # subworkflow"
    levels = _fork_join_levels(conductor)
    _rerun(conductor, levels.leaf_id, from_task=False)

    leaf = conductor.wait_tasks(levels.leaf_id, 1)
    assert leaf["status"] == "RUNNING"
    assert _shape(leaf) == [(levels.task1, "SCHEDULED")]
    # "verify that the mid-level workflow is updated" / "... the root workflow is updated":
    # the JOIN CANCELED or already IN_PROGRESS again
    either = ("CANCELED", "IN_PROGRESS")
    mid = _fork_join_running(conductor, levels.mid_id, "COMPLETED", either)
    root = _fork_join_running(conductor, levels.root_id, "COMPLETED", either)
    assert mid["tasks"][1]["subWorkflowId"] == levels.leaf_id
    assert root["tasks"][1]["subWorkflowId"] == levels.mid_id
    # after the sweep: "the JOIN is updated"
    for workflow_id in (levels.mid_id, levels.root_id):
        run = _fork_join_running(conductor, workflow_id, "COMPLETED", ("IN_PROGRESS",))
        assert not run["tasks"][1].get("subworkflowChanged")

    _leaf_completes(conductor, levels, levels.leaf_id)
    _fork_join_completed(conductor, levels.mid_id, levels.task2)
    _fork_join_completed(conductor, levels.root_id, levels.task2)
