"""A rerun of a run named by a task of one of its child runs, and a rerun from a task in
one branch of a fork while another branch got through: the parts of conductor-oss's
``rerunWF`` its e2e ``WorkflowRerunTests`` do not pin (those ports are in
``test_oss_workflow_rerun.py`` and ``test_oss_workflow_rerun_siblings.py``), and Stepway's
answers where it refuses what conductor-oss would half do.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique
from tests.e2e.conductor.oss_e2e import (
    active_of,
    await_active,
    await_first_task,
    await_sub_workflow_id,
    complete_task,
    definition,
    first_of,
    fork_join,
    join,
    rerun,
    simple_task,
    sub_workflow_task,
)
from tests.e2e.conductor.sub_workflow_shapes import (
    WORKER1,
    chain_completed,
    chain_failed,
    chain_resumed,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_root_rerun_from_a_task_two_levels_down_reruns_the_leaf_and_resumes_the_chain(
    conductor: Conductor,
) -> None:
    levels = chain_failed(conductor, "rerun_root_from_leaf_task")
    leaf = conductor.run(levels.leaf_id)
    failed = next(t for t in leaf["tasks"] if t["taskDefName"] == levels.task2)
    assert failed["status"] == "FAILED"

    rerun(
        conductor,
        levels.root_id,
        reRunFromTaskId=failed["taskId"],
        workflowInput={"again": True},
        correlationId="rerun_root_from_leaf_task_2",
        taskInput={"given": "by the rerun"},
    )

    # the leaf runs again from its t2 under its id; the mid-level run and the root wait
    # for the same children again
    again = conductor.wait_task(levels.leaf_id, "t2", "SCHEDULED")
    assert again["status"] == "RUNNING"
    assert first_of(again, "t1")["status"] == "COMPLETED"
    t2 = active_of(again, "t2")
    # conductor-oss's rerunWF resets the task in place: one t2 row, the failed one's id
    assert t2 is not None and t2["taskId"] == failed["taskId"]
    assert [t["taskId"] for t in again["tasks"] if t["referenceTaskName"] == "t2"] == [
        failed["taskId"]
    ]
    assert t2["inputData"] == {"given": "by the rerun"}
    chain_resumed(conductor, levels.mid_id, levels.leaf_id, levels.task1)
    root = chain_resumed(conductor, levels.root_id, levels.mid_id, levels.task1)
    # the request's workflowInput and correlationId are the named run's, not the leaf's
    assert root["input"] == {"again": True}
    assert root["correlationId"] == "rerun_root_from_leaf_task_2"
    assert conductor.run(levels.leaf_id)["correlationId"] != "rerun_root_from_leaf_task_2"

    conductor.poll_and_complete(levels.task2, {"op": "task2.done"}, WORKER1)
    assert conductor.wait_status(levels.leaf_id, "COMPLETED")["status"] == "COMPLETED"
    chain_completed(conductor, levels.mid_id, levels.task1)
    chain_completed(conductor, levels.root_id, levels.task1)


def _fork_of_two_children(conductor: Conductor) -> tuple[str, str, str, dict[str, Any]]:
    """A parent forking two runs of one child definition: the first child completes,
    the second fails, so the parent FAILS. Its id, the children's, and the completed
    child's task."""
    parent, child = unique("rerun-fork-parent"), unique("rerun-fork-child")
    conductor.register(definition(child, [simple_task("inner", unique("inner"))]))
    conductor.register(
        definition(
            parent,
            [
                fork_join(
                    "fork",
                    [[sub_workflow_task("first", child)], [sub_workflow_task("second", child)]],
                ),
                join("join", ["first", "second"]),
            ],
        )
    )
    workflow_id = conductor.start(parent, version=1)
    first = await_sub_workflow_id(conductor, workflow_id, "first")
    done = await_first_task(conductor, first)
    complete_task(conductor, done, "COMPLETED")
    assert conductor.wait_status(first, "COMPLETED")["status"] == "COMPLETED"
    second = await_sub_workflow_id(conductor, workflow_id, "second")
    complete_task(conductor, await_first_task(conductor, second), "FAILED")
    assert conductor.wait_status(workflow_id, "FAILED")["status"] == "FAILED"
    return workflow_id, first, second, done


def test_a_rerun_from_a_task_of_a_child_that_got_through_is_refused(
    conductor: Conductor,
) -> None:
    workflow_id, first, second, done = _fork_of_two_children(conductor)
    r = conductor.http.post(
        f"/api/workflow/{workflow_id}/rerun", json={"reRunFromTaskId": done["taskId"]}
    )
    assert r.status_code == 409, r.text
    assert first in r.json()["message"]
    # nothing was run again
    assert conductor.run(workflow_id)["status"] == "FAILED"
    assert conductor.run(first)["status"] == "COMPLETED"
    assert conductor.run(second)["status"] == "FAILED"


def test_a_rerun_from_a_task_of_another_run_is_not_found(conductor: Conductor) -> None:
    workflow_id, _, _, _ = _fork_of_two_children(conductor)
    other, _, _, elsewhere = _fork_of_two_children(conductor)
    r = conductor.http.post(
        f"/api/workflow/{workflow_id}/rerun", json={"reRunFromTaskId": elsewhere["taskId"]}
    )
    assert r.status_code == 400, r.text
    assert elsewhere["taskId"] in r.json()["message"]
    assert conductor.run(workflow_id)["status"] == "FAILED"
    assert conductor.run(other)["status"] == "FAILED"


def test_a_rerun_from_a_task_in_a_branch_keeps_the_branch_that_got_through(
    conductor: Conductor,
) -> None:
    name = unique("rerun-branch")
    a1, a2, b1, after = (unique(p) for p in ("a1", "a2", "b1", "after"))
    conductor.register(
        definition(
            name,
            [
                fork_join(
                    "fork",
                    [
                        [simple_task("a1", a1), simple_task("a2", a2)],
                        [simple_task("b1", b1)],
                    ],
                ),
                join("join", ["a2", "b1"]),
                simple_task("after", after),
            ],
        )
    )
    workflow_id = conductor.start(name, version=1)
    run = conductor.wait_tasks(workflow_id, 2)
    # b1 was scheduled after a1: its row comes after the task the rerun starts from
    assert first_of(run, "b1")["seq"] > first_of(run, "a1")["seq"]
    complete_task(conductor, await_active(conductor, workflow_id, "b1"), "COMPLETED")
    completed_b1 = conductor.wait_task(workflow_id, "b1", "COMPLETED")
    complete_task(conductor, await_active(conductor, workflow_id, "a1"), "FAILED")
    failed = conductor.wait_status(workflow_id, "FAILED")
    failed_a1 = first_of(failed, "a1")

    rerun(conductor, workflow_id, reRunFromTaskId=failed_a1["taskId"])

    again = conductor.wait_task(workflow_id, "a1", "SCHEDULED")
    # reset in place, as conductor-oss's rerunWF does: the same id, one a1 row
    assert active_of(again, "a1")["taskId"] == failed_a1["taskId"]  # type: ignore[index]
    assert [t["referenceTaskName"] for t in again["tasks"]].count("a1") == 1
    # the parallel branch that got through stands: its row, its id, its output
    b1_rows = [t for t in again["tasks"] if t["referenceTaskName"] == "b1"]
    assert [(t["taskId"], t["status"]) for t in b1_rows] == [
        (first_of(completed_b1, "b1")["taskId"], "COMPLETED")
    ]
    for ref in ("a1", "a2", "after"):
        complete_task(conductor, await_active(conductor, workflow_id, ref), "COMPLETED")
    done = conductor.wait_status(workflow_id, "COMPLETED")
    assert [t["referenceTaskName"] for t in done["tasks"]].count("b1") == 1
