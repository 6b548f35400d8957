"""conductor-oss's Java e2e ``WorkflowRerunTests``, second part (PR #3458): a SUB_WORKFLOW
in a FORK fails, the parent FAILS and its other branches are CANCELED; the child run is
retried (``retryWorkflow``, ``POST /workflow/bulk/retry``) and what becomes of the
parent's CANCELED siblings, over Stepway's HTTP API. See ``test_oss_workflow_rerun.py``
(first part) and ``test_oss_workflow_rerun_siblings.py`` (third part).

A retry of the child takes the parent back to RUNNING (Conductor's
``updateAndPushParents``; Stepway documents the same walk-up, docs/conductor-
compatibility.md, "retry"). Conductor resets a CANCELED SIMPLE or DO_WHILE sibling in
place (the same row SCHEDULED / IN_PROGRESS), so the Java tests read the sibling as the
*first* task of its reference. Stepway retries the parent, and a retry gives a canceled
task a new attempt, "a new row with a new id, retriedTaskId naming the old one"
(documented): the old CANCELED row stays first, so these tests read the sibling's
*latest* row (``task``), noting it where the Java test reads the first. (A DO_WHILE
container is decided again under its own row, which the tests read as the Java does.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, task, unique
from tests.e2e.conductor.oss_e2e import (
    TERMINAL,
    active_of,
    await_active,
    bulk_retry,
    complete_task,
    definition,
    eventually,
    first_of,
    fork_join,
    join,
    simple_task,
    sub_workflow_task,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ACTIVE = ("SCHEDULED", "IN_PROGRESS")


def _fork_parent(
    conductor: Conductor,
    prefix: str,
    child_tasks: list[dict[str, Any]],
    siblings: list[dict[str, Any]],
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """Register a child of ``child_tasks`` and a parent ``[before] -> FORK(sub_wf_task |
    each sibling) -> JOIN -> [after]``, start the parent and complete ``before``; the
    parent id and the child run id, once the child has a task."""
    child, parent = unique(f"{prefix}-child"), unique(f"{prefix}-parent")
    conductor.register(definition(child, child_tasks))
    sub = sub_workflow_task("sub_wf_task", child)
    refs = ["sub_wf_task"] + [s["taskReferenceName"] for s in siblings]
    tasks = [fork_join("fork", [[sub]] + [[s] for s in siblings]), join("join", refs)]
    conductor.register(
        definition(parent, ([before] if before else []) + tasks + ([after] if after else []))
    )
    workflow_id = conductor.start(parent, version=1)
    if before:
        complete_task(conductor, await_active(conductor, workflow_id, "task_before"), "COMPLETED")

    def child_started() -> str | None:
        found = [
            t
            for t in conductor.run(workflow_id)["tasks"]
            if t["referenceTaskName"] == "sub_wf_task"
        ]
        child_id = found[0].get("subWorkflowId") if found else None
        return child_id if child_id and conductor.run(child_id)["tasks"] else None

    return workflow_id, eventually(child_started, message="sub_wf_task not started")


def _failed_with_canceled(conductor: Conductor, workflow_id: str, *siblings: str) -> None:
    """The parent FAILED, each sibling CANCELED (its first row, as the Java tests read)."""

    def reached() -> bool:
        run = conductor.run(workflow_id)
        assert run["status"] == "FAILED", f"Parent should be FAILED. Got: {run['status']}"
        for ref in siblings:
            assert first_of(run, ref)["status"] == "CANCELED", f"{ref} should be CANCELLED"
        return True

    eventually(reached)


def _resumed(conductor: Conductor, workflow_id: str) -> dict[str, Any]:
    run = conductor.wait_status(workflow_id, "RUNNING")
    assert run["status"] == "RUNNING", f"Parent should be RUNNING after retry. Got: {run['status']}"
    return run


def test_rerun_sub_workflow_task_reschedules_cancelled_parent_sibling_task(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunSubWorkflowTaskReschedulesCancelledParentSiblingTask
    inner = simple_task("task_in_sub", unique("task_in_sub"))
    sibling = simple_task("sibling_task", unique("sibling_task"))
    workflow_id, child_id = _fork_parent(conductor, "cancelled-sibling", [inner], [sibling])
    complete_task(conductor, first_of(conductor.run(child_id), "task_in_sub"), "FAILED")
    _failed_with_canceled(conductor, workflow_id, "sibling_task")

    bulk_retry(conductor, child_id)
    run = _resumed(conductor, workflow_id)
    # KEY ASSERTION: sibling_task rescheduled, not stuck CANCELLED (Java: the first row;
    # here the latest, see the module's docstring)
    assert task(run, "sibling_task")["status"] in ACTIVE

    complete_task(conductor, await_active(conductor, workflow_id, "sibling_task"), "COMPLETED")
    complete_task(conductor, await_active(conductor, child_id, "task_in_sub"), "COMPLETED")
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


def test_rerun_sub_workflow_reschedules_multiple_cancelled_siblings(conductor: Conductor) -> None:
    # WorkflowRerunTests.testRerunSubWorkflowReschedulesMultipleCancelledSiblings
    inner = simple_task("task_in_sub_multi", unique("task_in_sub_multi"))
    siblings = [simple_task(ref, unique(ref)) for ref in ("sibling_task_1", "sibling_task_2")]
    workflow_id, child_id = _fork_parent(conductor, "multi-sibling", [inner], siblings)
    complete_task(conductor, conductor.run(child_id)["tasks"][0], "FAILED")
    _failed_with_canceled(conductor, workflow_id, "sibling_task_1", "sibling_task_2")

    bulk_retry(conductor, child_id)
    run = _resumed(conductor, workflow_id)
    # KEY ASSERTION: both siblings rescheduled (latest rows: see the module's docstring)
    for ref in ("sibling_task_1", "sibling_task_2"):
        assert task(run, ref)["status"] in ACTIVE, f"{ref} should be SCHEDULED after rerun"

    for ref in ("sibling_task_1", "sibling_task_2"):
        complete_task(conductor, await_active(conductor, workflow_id, ref), "COMPLETED")
    retried = active_of(conductor.run(child_id), "task_in_sub_multi")
    assert retried is not None, "Active inner task not found after rerun"
    complete_task(conductor, retried, "COMPLETED")
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


def test_rerun_second_task_in_sub_workflow_reschedules_cancelled_sibling(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunSecondTaskInSubWorkflowReschedulesCancelledSibling
    first = simple_task("first_task_in_sub", unique("first_task_in_sub"))
    second = simple_task("second_task_in_sub", unique("second_task_in_sub"))
    sibling = simple_task("sibling_seq_task", unique("sibling_seq_task"))
    workflow_id, child_id = _fork_parent(
        conductor,
        "seq",
        [first, second],
        [sibling],
        before=simple_task("task_before", unique("task_before_seq_fork")),
        after=simple_task("task_after", unique("task_after_seq_join")),
    )
    first_task = await_active(conductor, child_id, "first_task_in_sub")
    complete_task(conductor, first_task, "COMPLETED")
    complete_task(conductor, await_active(conductor, child_id, "second_task_in_sub"), "FAILED")
    _failed_with_canceled(conductor, workflow_id, "sibling_seq_task")

    bulk_retry(conductor, child_id)
    run = _resumed(conductor, workflow_id)
    # ASSERTION 1: sibling rescheduled (latest row: see the module's docstring)
    assert task(run, "sibling_seq_task")["status"] in ACTIVE
    # ASSERTION 2: task_before still COMPLETED
    assert first_of(run, "task_before")["status"] == "COMPLETED"
    # ASSERTION 3: first_task inside the child still COMPLETED, the same instance
    kept = [t for t in conductor.run(child_id)["tasks"] if t["taskId"] == first_task["taskId"]]
    assert kept, "first_task original instance not found"
    assert kept[0]["status"] == "COMPLETED"

    complete_task(conductor, await_active(conductor, workflow_id, "sibling_seq_task"), "COMPLETED")
    complete_task(conductor, await_active(conductor, child_id, "second_task_in_sub"), "COMPLETED")
    complete_task(conductor, await_active(conductor, workflow_id, "task_after"), "COMPLETED")
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


def test_rerun_sub_workflow_multiple_rerun_cycles(conductor: Conductor) -> None:
    # WorkflowRerunTests.testRerunSubWorkflowMultipleRerunCycles
    inner = simple_task("task_in_sub_cycle", unique("task_in_sub_cycle"))
    sibling = simple_task("sibling_cycle_task", unique("sibling_cycle_task"))
    workflow_id, child_id = _fork_parent(conductor, "multi-cycle", [inner], [sibling])

    # cycle 1: fail -> retry
    complete_task(conductor, conductor.run(child_id)["tasks"][0], "FAILED")
    _failed_with_canceled(conductor, workflow_id, "sibling_cycle_task")
    bulk_retry(conductor, child_id)
    run = _resumed(conductor, workflow_id)
    assert task(run, "sibling_cycle_task")["status"] in ACTIVE  # latest row (docstring)

    # cycle 2: fail again -> retry again
    complete_task(conductor, await_active(conductor, child_id, "task_in_sub_cycle"), "FAILED")

    def failed_again() -> bool:
        run = conductor.run(workflow_id)
        assert run["status"] == "FAILED", "Cycle 2: parent should be FAILED after second failure"
        # Java: the first row CANCELLED again (it was reset in place); here the latest
        assert task(run, "sibling_cycle_task")["status"] == "CANCELED"
        return True

    eventually(failed_again)
    bulk_retry(conductor, child_id)
    run = _resumed(conductor, workflow_id)
    assert task(run, "sibling_cycle_task")["status"] in ACTIVE  # latest row (docstring)

    # cycle 3: complete
    complete_task(
        conductor, await_active(conductor, workflow_id, "sibling_cycle_task"), "COMPLETED"
    )
    complete_task(conductor, await_active(conductor, child_id, "task_in_sub_cycle"), "COMPLETED")
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


def test_rerun_sub_workflow_reschedules_do_while_sibling_cancelled_by_fork(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunSubWorkflowReschedulesDoWhileSiblingCancelledByFork
    inner = simple_task("task_in_sub_dowhile", unique("task_in_sub_dowhile"))
    body_name = unique("loop_body_task")
    loop = {
        "name": "do_while_sibling",
        "taskReferenceName": "do_while_sibling",
        "type": "DO_WHILE",
        "loopCondition": "if ($.do_while_sibling['iteration'] < 1) { true; } else { false; }",
        "loopOver": [simple_task("loop_body_task", body_name)],
    }
    workflow_id, child_id = _fork_parent(conductor, "dowhile", [inner], [loop])

    def loop_row(run: dict[str, Any]) -> dict[str, Any]:
        return next(t for t in run["tasks"] if t["taskType"] == "DO_WHILE")

    run = conductor.wait(
        workflow_id, lambda r: any(t["taskType"] == "DO_WHILE" for t in r["tasks"])
    )
    assert loop_row(run)["status"] == "IN_PROGRESS", "DO_WHILE should be IN_PROGRESS initially"
    complete_task(conductor, first_of(conductor.run(child_id), "task_in_sub_dowhile"), "FAILED")

    def failed() -> bool:
        run = conductor.run(workflow_id)
        assert run["status"] == "FAILED", f"Parent should be FAILED. Got: {run['status']}"
        assert loop_row(run)["status"] == "CANCELED", "DO_WHILE task should be CANCELLED"
        return True

    eventually(failed)

    bulk_retry(conductor, child_id)
    run = _resumed(conductor, workflow_id)
    # KEY ASSERTION: the DO_WHILE IN_PROGRESS again, not CANCELLED or SCHEDULED
    assert loop_row(run)["status"] == "IN_PROGRESS"

    def body_active() -> dict[str, Any] | None:
        return next(
            (
                t
                for t in conductor.run(workflow_id)["tasks"]
                if t["taskDefName"] == body_name
                and t["iteration"] == 1
                and t["status"] not in TERMINAL
            ),
            None,
        )

    complete_task(conductor, eventually(body_active), "COMPLETED")
    run = conductor.wait(workflow_id, lambda r: loop_row(r)["status"] == "COMPLETED")
    assert loop_row(run)["status"] == "COMPLETED"
    complete_task(conductor, await_active(conductor, child_id, "task_in_sub_dowhile"), "COMPLETED")
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"
