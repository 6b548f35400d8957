"""A SUB_WORKFLOW attempt its parent stops waiting for while the parent goes on (here: it
timed out, under its taskDefinition's timeoutSeconds) terminates its child run at once,
not when the parent ends; the child's own children are terminated with it."""

from __future__ import annotations

from typing import Any

from tests.e2e.conductor.harness import Conductor, task, unique, workflow


def _waiting_child() -> dict[str, Any]:
    """A child run that waits for a completion through the API (that never comes)."""
    return workflow(
        unique("waiting_child"), [{"name": "hold", "taskReferenceName": "hold", "type": "WAIT"}]
    )


def _sub(ref: str, child: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": child, "version": 1},
        **fields,
    }


def _timing_out(ref: str, child: str, retries: int) -> dict[str, Any]:
    """An optional SUB_WORKFLOW step whose attempts time out after 1 s."""
    return _sub(
        ref,
        child,
        optional=True,
        taskDefinition={
            "name": ref,
            "timeoutSeconds": 1,
            "timeoutPolicy": "RETRY",
            "retryCount": retries,
            "retryDelaySeconds": 0,
        },
    )


_APPROVE = {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"}


def _child_ids(run: dict[str, Any], ref: str) -> list[str]:
    return [t["subWorkflowId"] for t in run["tasks"] if t["referenceTaskName"] == ref]


def test_timed_out_sub_workflow_attempts_terminate_their_children_while_the_parent_runs(
    conductor: Conductor,
) -> None:
    child, parent = _waiting_child(), unique("impatient_parent")
    conductor.register(child, workflow(parent, [_timing_out("sub", child["name"], 1), _APPROVE]))
    parent_id = conductor.start(parent)

    run = conductor.wait_task(parent_id, "approve", "IN_PROGRESS")
    assert [(t["referenceTaskName"], t["status"]) for t in run["tasks"]] == [
        ("sub", "TIMED_OUT"),
        ("sub", "COMPLETED_WITH_ERRORS"),
        ("approve", "IN_PROGRESS"),
    ]
    children = _child_ids(run, "sub")
    assert len(set(children)) == 2 and all(children)
    for child_id in children:
        ended = conductor.wait_status(child_id, "TERMINATED")
        assert (ended["status"], ended["reasonForIncompletion"]) == (
            "TERMINATED",
            f"parent {parent_id} ended its SUB_WORKFLOW task sub",
        )
        assert task(ended, "hold")["status"] == "CANCELED"
    # the parent was not ended for it: it still waits for its HUMAN task
    assert conductor.run(parent_id)["status"] == "RUNNING"

    r = conductor.http.post(f"/api/tasks/{parent_id}/approve/COMPLETED", json={"ok": True})
    assert r.status_code < 300, r.text
    assert conductor.wait_status(parent_id, "COMPLETED")["status"] == "COMPLETED"


def test_a_terminated_child_terminates_its_own_children(conductor: Conductor) -> None:
    grandchild = _waiting_child()
    middle = workflow(unique("middle"), [_sub("inner", grandchild["name"])])
    parent = unique("impatient_grandparent")
    conductor.register(
        grandchild, middle, workflow(parent, [_timing_out("outer", middle["name"], 0), _APPROVE])
    )
    parent_id = conductor.start(parent)

    run = conductor.wait_task(parent_id, "approve", "IN_PROGRESS")
    (middle_id,) = _child_ids(run, "outer")
    ended = conductor.wait_status(middle_id, "TERMINATED")
    assert ended["status"] == "TERMINATED"
    (grandchild_id,) = _child_ids(ended, "inner")
    gone = conductor.wait_status(grandchild_id, "TERMINATED")
    assert (gone["status"], gone["reasonForIncompletion"]) == (
        "TERMINATED",
        f"parent {middle_id} ended",
    )
    assert conductor.run(parent_id)["status"] == "RUNNING"


def test_a_sub_workflow_task_canceled_with_its_parent_still_names_its_child(
    conductor: Conductor,
) -> None:
    # Conductor cancels a task by its status: its output, and with it the subWorkflowId a
    # client follows to the child, stays as it was
    child = _waiting_child()
    parent = unique("terminated_parent")
    conductor.register(child, workflow(parent, [_sub("sub", child["name"])]))
    parent_id = conductor.start(parent, {})
    run = conductor.wait_task(parent_id, "sub", "IN_PROGRESS")
    child_id = task(run, "sub")["subWorkflowId"]
    assert child_id

    r = conductor.http.delete(f"/api/workflow/{parent_id}", params={"reason": "stop it"})
    assert r.status_code < 300, r.text

    run = conductor.wait_status(parent_id, "TERMINATED")
    sub = task(run, "sub")
    assert (sub["status"], sub["subWorkflowId"]) == ("CANCELED", child_id)
    assert sub["outputData"] == {"subWorkflowId": child_id}
    assert conductor.wait_status(child_id, "TERMINATED")["status"] == "TERMINATED"
