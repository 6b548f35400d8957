"""Conductor's test-harness SubWorkflowSpec, "Test terminating a subworkflow terminates
parent workflow": once the child run exists, the parent's SUB_WORKFLOW task is
IN_PROGRESS and names it (``subWorkflowId``), so that a client can follow it; terminating
the child terminates the parent with the same reason, its SUB_WORKFLOW task CANCELED.
(The spec asserts the parent's reason equals the child's; Conductor's code ends the parent
through DeciderService.retry, whose reason quotes the task's, which quotes the child's:
the test asserts that it contains it.)"""

from __future__ import annotations

from typing import Any

from tests.e2e.conductor.harness import Conductor, simple, unique, workflow


def test_terminating_a_sub_workflow_terminates_its_parent(conductor: Conductor) -> None:
    first, inner = unique("integration_task_1"), unique("simple_task_in_sub_wf")
    child, parent = unique("sub_workflow"), unique("wf_with_sub_wf")
    conductor.register(
        workflow(child, [simple(inner, "t1")]),
        workflow(
            parent,
            [
                simple(first, "t1"),
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": child, "version": 1},
                },
            ],
        ),
    )
    parent_id = conductor.start(parent, {"param1": "p1 value", "param2": "p2 value"})
    conductor.poll_and_complete(first, {"op": "task1.done"})

    # the child exists: the parent's task says so, with the child's id
    run = conductor.wait_task(parent_id, "sub", "IN_PROGRESS")
    assert run["status"] == "RUNNING"
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [
        (first, "COMPLETED"),
        ("SUB_WORKFLOW", "IN_PROGRESS"),
    ]
    sub_workflow_id = run["tasks"][1]["subWorkflowId"]
    assert sub_workflow_id
    child_run = conductor.wait_tasks(sub_workflow_id, 1)
    assert child_run["status"] == "RUNNING"
    assert child_run["parentWorkflowId"] == parent_id
    assert [(t["taskType"], t["status"]) for t in child_run["tasks"]] == [(inner, "SCHEDULED")]

    reason = "terminating from a test case"
    r = conductor.http.delete(f"/api/workflow/{sub_workflow_id}", params={"reason": reason})
    assert r.status_code < 300, r.text

    child_run = conductor.wait_status(sub_workflow_id, "TERMINATED")
    assert child_run["status"] == "TERMINATED"
    assert child_run["reasonForIncompletion"] == reason
    assert [(t["taskType"], t["status"]) for t in child_run["tasks"]] == [(inner, "CANCELED")]

    # Conductor's SubWorkflow maps the TERMINATED child to a CANCELED task, which ends the
    # parent TERMINATED (DeciderService.retry), its reason naming the child's
    run = conductor.wait_status(parent_id, "TERMINATED")
    assert run["status"] == "TERMINATED"
    assert reason in run["reasonForIncompletion"]
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [
        (first, "COMPLETED"),
        ("SUB_WORKFLOW", "CANCELED"),
    ]


def test_a_timed_out_child_times_its_task_out_and_the_task_is_retried(
    conductor: Conductor,
) -> None:
    # Conductor's SubWorkflow gives the task the child's TIMED_OUT, and DeciderService.retry
    # retries a TIMED_OUT task per its retry count, then times the run out
    child, parent = unique("slow_child"), unique("waits_on_slow_child")
    conductor.register(
        workflow(
            child,
            [{"name": "hold", "taskReferenceName": "hold", "type": "WAIT"}],
            timeoutSeconds=1,
            timeoutPolicy="TIME_OUT_WF",
        ),
        workflow(
            parent,
            [
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": child, "version": 1},
                    "taskDefinition": {"name": "sub", "retryCount": 1, "retryDelaySeconds": 0},
                }
            ],
        ),
    )
    parent_id = conductor.start(parent)
    run = conductor.wait_status(parent_id, "TIMED_OUT", seconds=30)
    assert run["status"] == "TIMED_OUT"
    subs = [t for t in run["tasks"] if t["referenceTaskName"] == "sub"]
    assert [t["status"] for t in subs] == ["TIMED_OUT", "TIMED_OUT"]  # retried once
    for t in subs:
        assert conductor.run(t["subWorkflowId"])["status"] == "TIMED_OUT"


def test_a_tasks_sub_workflow_id_names_its_own_child_whatever_the_childs_output(
    conductor: Conductor,
) -> None:
    # Conductor's Task.subWorkflowId is the field SubWorkflow.start sets; the child's
    # output merged into the task's output may carry a subWorkflowId of its own (a
    # child whose last task is a SUB_WORKFLOW and that maps no output)
    work = unique("leaf_work")
    leaf, mid, root = unique("leaf"), unique("mid"), unique("root")

    def sub(name: str) -> dict[str, Any]:
        return {
            "name": "sub",
            "taskReferenceName": "sub",
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {"name": name, "version": 1},
        }

    conductor.register(
        workflow(leaf, [simple(work, "w")]), workflow(mid, [sub(leaf)]), workflow(root, [sub(mid)])
    )
    root_id = conductor.start(root)
    run = conductor.wait_task(root_id, "sub", "IN_PROGRESS")
    mid_id = run["tasks"][0]["subWorkflowId"]
    leaf_id = conductor.wait_task(mid_id, "sub", "IN_PROGRESS")["tasks"][0]["subWorkflowId"]
    assert leaf_id != mid_id
    conductor.poll_and_complete(work, {"done": True})
    run = conductor.wait_status(root_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    [task] = run["tasks"]
    assert task["subWorkflowId"] == mid_id
    # the mid-level run's output (its last task's) came with the leaf's id, as in Conductor
    assert task["outputData"]["subWorkflowId"] == leaf_id
    r = conductor.http.get(f"/api/tasks/{task['taskId']}")
    assert r.status_code == 200 and r.json()["subWorkflowId"] == mid_id
