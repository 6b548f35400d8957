"""conductor-oss's Java e2e ``WorkflowRerunTests``, third part (PR #3458, #3596): a
SUB_WORKFLOW in a FORK (also inside a DO_WHILE, or a FORK_JOIN_DYNAMIC) fails, the parent
FAILS and the other branches' SUB_WORKFLOW tasks are CANCELED (their children
terminated); a task is rerun (``POST /workflow/{id}/rerun``) in the failed child, in a
canceled child or in the parent, and the tests check which children run again under
their ids, over Stepway's HTTP API. See ``test_oss_workflow_rerun.py`` and
``test_oss_workflow_rerun_forks.py``.

A rerun of a child takes its parent back to RUNNING, the parent's SUB_WORKFLOW tasks
that did not get through resumed in place with their children (Conductor's
``updateAndPushParents``; Stepway documents the same walk-up, docs/conductor-
compatibility.md, "retry" and "rerun").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique
from tests.e2e.conductor.oss_e2e import (
    TERMINAL,
    active_of,
    await_active,
    complete_task,
    definition,
    eventually,
    first_of,
    fork_join,
    join,
    rerun,
    simple_task,
    sub_workflow_task,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_rerun_from_task_inside_all_sub_workflow_fork(conductor: Conductor) -> None:
    # WorkflowRerunTests.testRerunFromTaskInsideAllSubWorkflowFork
    failing_child, cancelled_child, parent = (
        unique(f"rerun-allsubwf-{p}") for p in ("failing", "cancelled", "parent")
    )
    failing_inner, cancelled_inner = "task_in_failing_sub_rerun", "task_in_cancelled_sub_rerun"
    failing, cancelled = "failing_sub_ref_rerun", "cancelled_sub_ref_rerun"
    conductor.register(definition(failing_child, [simple_task(failing_inner, unique("f"))]))
    conductor.register(definition(cancelled_child, [simple_task(cancelled_inner, unique("c"))]))
    conductor.register(
        definition(
            parent,
            [
                fork_join(
                    "fork_allsubwf_rerun",
                    [
                        [sub_workflow_task(failing, failing_child)],
                        [sub_workflow_task(cancelled, cancelled_child)],
                    ],
                ),
                join("join_allsubwf_rerun", [failing, cancelled]),
            ],
        )
    )
    workflow_id = conductor.start(parent, version=1)
    children = _children(conductor, workflow_id, failing, cancelled)
    failed = await_active(conductor, children[failing], failing_inner)
    complete_task(conductor, failed, "FAILED")

    def failed_parent() -> bool:
        run = conductor.run(workflow_id)
        assert run["status"] == "FAILED"
        assert first_of(run, cancelled)["status"] == "CANCELED"
        assert first_of(run, failing)["reasonForIncompletion"] is not None
        return True

    eventually(failed_parent)

    rerun(
        conductor,
        children[failing],
        reRunFromWorkflowId=children[failing],
        reRunFromTaskId=failed["taskId"],
    )
    assert conductor.wait_status(workflow_id, "RUNNING")["status"] == "RUNNING"

    def resumed() -> bool:
        run = conductor.run(workflow_id)
        sibling = active_of(run, cancelled)
        assert sibling is not None, "Expected active cancelled_sub_ref after rerun"
        assert sibling["subWorkflowId"] == children[cancelled], "retried in place"
        again = active_of(run, failing)
        assert again is not None, "failing_sub_ref must be active after rerun"
        assert again["reasonForIncompletion"] is None
        return True

    eventually(resumed)


def _children(conductor: Conductor, workflow_id: str, *refs: str) -> dict[str, str]:
    """The child run ids of the active SUB_WORKFLOW tasks ``refs``, once each has one."""

    def probe() -> dict[str, str]:
        run = conductor.run(workflow_id)
        found = {ref: (active_of(run, ref) or {}).get("subWorkflowId") for ref in refs}
        assert all(found.values()), f"missing children: {found}"
        return {ref: str(child) for ref, child in found.items()}

    children: dict[str, str] = eventually(probe)
    return children


# --- the three-branch fork of cases 1-4 ------------------------------------------------

FAILING_SUB, CANCELLED_SUB, COMPLETED_SUB = (
    "failing_sub_ref",
    "cancelled_sub_ref",
    "completed_sub_ref",
)
FAILING_INNER, CANCELLED_INNER, COMPLETED_INNER = (
    "failing_inner_task",
    "cancelled_inner_task",
    "completed_inner_task",
)


@dataclass
class ForkScenario:
    parent_id: str
    failing_child: str
    cancelled_child: str
    completed_child: str


def _fork_with_failed_and_cancelled_and_completed(
    conductor: Conductor, suffix: str
) -> ForkScenario:
    """``forkWithFailedAndCancelledAndCompleted``: branch C completes, then branch A's
    inner task FAILED_WITH_TERMINAL_ERROR; the parent FAILED, B CANCELED."""
    names = {
        ref: unique(f"rerun-{suffix}-{ref}") for ref in (FAILING_SUB, CANCELLED_SUB, COMPLETED_SUB)
    }
    for ref, inner in (
        (FAILING_SUB, FAILING_INNER),
        (CANCELLED_SUB, CANCELLED_INNER),
        (COMPLETED_SUB, COMPLETED_INNER),
    ):
        conductor.register(definition(names[ref], [simple_task(inner, unique(inner))]))
    parent = unique(f"rerun-{suffix}-parent")
    conductor.register(
        definition(
            parent,
            [
                fork_join(
                    f"fork_{suffix}", [[sub_workflow_task(ref, names[ref])] for ref in names]
                ),
                join(f"join_{suffix}", list(names)),
            ],
        )
    )
    parent_id = conductor.start(parent, version=1)
    children = _children(conductor, parent_id, FAILING_SUB, CANCELLED_SUB, COMPLETED_SUB)
    complete_task(
        conductor, await_active(conductor, children[COMPLETED_SUB], COMPLETED_INNER), "COMPLETED"
    )
    conductor.wait_task(parent_id, COMPLETED_SUB, "COMPLETED")
    assert first_of(conductor.run(parent_id), COMPLETED_SUB)["status"] == "COMPLETED"
    complete_task(
        conductor,
        await_active(conductor, children[FAILING_SUB], FAILING_INNER),
        "FAILED_WITH_TERMINAL_ERROR",
    )

    def failed() -> bool:
        run = conductor.run(parent_id)
        assert run["status"] == "FAILED"
        assert first_of(run, FAILING_SUB)["status"] == "FAILED"
        assert first_of(run, CANCELLED_SUB)["status"] == "CANCELED"
        assert first_of(run, COMPLETED_SUB)["status"] == "COMPLETED"
        return True

    eventually(failed)
    return ForkScenario(
        parent_id, children[FAILING_SUB], children[CANCELLED_SUB], children[COMPLETED_SUB]
    )


def _completed_sibling_untouched(conductor: Conductor, s: ForkScenario) -> None:
    """``assertCompletedSiblingUntouched``."""
    run = conductor.run(s.parent_id)
    assert first_of(run, COMPLETED_SUB)["status"] == "COMPLETED"
    assert first_of(run, COMPLETED_SUB)["subWorkflowId"] == s.completed_child
    assert conductor.run(s.completed_child)["status"] == "COMPLETED"


def _drive_both_branches_to_completion(
    conductor: Conductor, parent_id: str, failing_child: str, cancelled_child: str
) -> None:
    """``driveBothBranchesToCompletion``."""
    complete_task(conductor, await_active(conductor, failing_child, FAILING_INNER), "COMPLETED")
    complete_task(conductor, await_active(conductor, cancelled_child, CANCELLED_INNER), "COMPLETED")
    run = conductor.wait_status(parent_id, "COMPLETED")
    assert run["status"] == "COMPLETED", "Parent should reach COMPLETED"


def test_rerun_failed_task_in_failing_sub_workflow_reschedules_cancelled_sibling(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunFailedTaskInFailingSubWorkflowReschedulesCancelledSibling
    s = _fork_with_failed_and_cancelled_and_completed(conductor, "case1")
    failed = first_of(conductor.run(s.failing_child), FAILING_INNER)
    rerun(
        conductor,
        s.failing_child,
        reRunFromWorkflowId=s.failing_child,
        reRunFromTaskId=failed["taskId"],
    )
    assert conductor.wait_status(s.parent_id, "RUNNING")["status"] == "RUNNING"

    def resumed() -> bool:
        run = conductor.run(s.parent_id)
        failing, cancelled = active_of(run, FAILING_SUB), active_of(run, CANCELLED_SUB)
        assert failing is not None and cancelled is not None
        assert failing["subWorkflowId"] == s.failing_child, "failing branch retried in place"
        assert failing["reasonForIncompletion"] is None
        assert cancelled["subWorkflowId"] == s.cancelled_child, "cancelled branch in place"
        _completed_sibling_untouched(conductor, s)
        return True

    eventually(resumed)
    _drive_both_branches_to_completion(conductor, s.parent_id, s.failing_child, s.cancelled_child)


def test_rerun_cancelled_sub_workflow_task_in_parent_reschedules_failed_sibling(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunCancelledSubWorkflowTaskInParentReschedulesFailedSibling
    s = _fork_with_failed_and_cancelled_and_completed(conductor, "case3")
    cancelled = first_of(conductor.run(s.parent_id), CANCELLED_SUB)
    rerun(
        conductor, s.parent_id, reRunFromWorkflowId=s.parent_id, reRunFromTaskId=cancelled["taskId"]
    )
    assert conductor.wait_status(s.parent_id, "RUNNING")["status"] == "RUNNING"
    children: dict[str, str] = {}

    def resumed() -> bool:
        run = conductor.run(s.parent_id)
        failing, again = active_of(run, FAILING_SUB), active_of(run, CANCELLED_SUB)
        assert failing is not None, "failing_sub_ref must be active after rerun"
        assert failing["reasonForIncompletion"] is None
        assert failing.get("subWorkflowId"), "a fresh child id for failing_sub_ref"
        assert again is not None and again.get("subWorkflowId"), "a child for cancelled_sub_ref"
        _completed_sibling_untouched(conductor, s)
        children.update(
            {FAILING_SUB: failing["subWorkflowId"], CANCELLED_SUB: again["subWorkflowId"]}
        )
        return True

    eventually(resumed, seconds=10)
    _drive_both_branches_to_completion(
        conductor, s.parent_id, children[FAILING_SUB], children[CANCELLED_SUB]
    )


def test_rerun_cancelled_task_inside_sibling_sub_workflow_reschedules_failed_sibling(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunCancelledTaskInsideSiblingSubWorkflowReschedulesFailedSibling
    s = _fork_with_failed_and_cancelled_and_completed(conductor, "case4")
    cancelled = first_of(conductor.run(s.cancelled_child), CANCELLED_INNER)
    rerun(
        conductor,
        s.cancelled_child,
        reRunFromWorkflowId=s.cancelled_child,
        reRunFromTaskId=cancelled["taskId"],
    )
    assert conductor.wait_status(s.parent_id, "RUNNING")["status"] == "RUNNING"

    def resumed() -> bool:
        run = conductor.run(s.parent_id)
        failing, again = active_of(run, FAILING_SUB), active_of(run, CANCELLED_SUB)
        assert again is not None and failing is not None
        assert again["subWorkflowId"] == s.cancelled_child, "cancelled branch in place"
        assert failing["subWorkflowId"] == s.failing_child, "failing branch retried in place"
        assert failing["reasonForIncompletion"] is None
        _completed_sibling_untouched(conductor, s)
        return True

    eventually(resumed)
    _drive_both_branches_to_completion(conductor, s.parent_id, s.failing_child, s.cancelled_child)


# --- FORK inside DO_WHILE, FORK_JOIN_DYNAMIC ---------------------------------------------


def _containing(run: dict[str, Any], part: str, active: bool) -> dict[str, Any] | None:
    """The first task whose ref contains ``part`` (a loop's ``ref__1`` too): with a child
    run, or (``active``) non-terminal."""
    tasks: list[dict[str, Any]] = run["tasks"]
    for t in tasks:
        wanted = t["status"] not in TERMINAL if active else t.get("subWorkflowId")
        if part in t["referenceTaskName"] and wanted:
            return t
    return None


def test_rerun_sub_workflow_task_inside_fork_inside_do_while_preserves_cancelled_sibling(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunSubWorkflowTaskInsideForkInsideDoWhilePreservesCancelledSibling
    parent, failing_child, cancelled_child = (
        unique(f"rerun-dw-fork-{p}") for p in ("parent", "failing", "cancelled")
    )
    failing_inner, cancelled_inner = unique("failing_inner_dw"), unique("cancelled_inner_dw")
    branch_a, branch_b, dw = unique("branchA_dw"), unique("branchB_dw"), unique("dw_loop")
    conductor.register(definition(failing_child, [simple_task(failing_inner)]))
    conductor.register(definition(cancelled_child, [simple_task(cancelled_inner)]))
    fork = fork_join(
        unique("fork_inside_dw"),
        [
            [sub_workflow_task(branch_a, failing_child)],
            [sub_workflow_task(branch_b, cancelled_child)],
        ],
    )
    loop = {
        "name": dw,
        "taskReferenceName": dw,
        "type": "DO_WHILE",
        "loopCondition": f"if ($.{dw}['iteration'] < 1) {{ true; }} else {{ false; }}",
        "loopOver": [fork, join(unique("join_inside_dw"), [branch_a, branch_b])],
    }
    conductor.register(definition(parent, [loop], timeout=900))
    parent_id = conductor.start(parent, version=1)

    def started() -> tuple[str, str]:
        run = conductor.run(parent_id)
        a, b = _containing(run, branch_a, False), _containing(run, branch_b, False)
        assert a is not None and b is not None, "branch SUB_WORKFLOW tasks must materialize"
        assert conductor.run(a["subWorkflowId"])["tasks"], "failing child must have its task"
        return a["subWorkflowId"], b["subWorkflowId"]

    failing_id, cancelled_id = eventually(started)
    failed = await_active(conductor, failing_id, failing_inner)
    complete_task(conductor, failed, "FAILED")
    assert conductor.wait_status(parent_id, "FAILED")["status"] == "FAILED"
    ended = conductor.wait(
        cancelled_id, lambda r: r["status"] in ("FAILED", "TERMINATED", "TIMED_OUT")
    )
    assert ended["status"] in ("FAILED", "TERMINATED", "TIMED_OUT")

    rerun(conductor, failing_id, reRunFromWorkflowId=failing_id, reRunFromTaskId=failed["taskId"])
    assert conductor.wait_status(parent_id, "RUNNING")["status"] == "RUNNING"

    def resumed() -> bool:
        run = conductor.run(parent_id)
        b = _containing(run, branch_b, True)
        assert b is not None, "An active branchB SUB_WORKFLOW task must exist after rerun walk-up"
        assert b["subWorkflowId"] == cancelled_id, "branchB subWorkflowId must be PRESERVED"
        assert conductor.run(cancelled_id)["status"] == "RUNNING", "resumed child non-terminal"
        a = _containing(run, branch_a, True)
        assert a is not None, "An active branchA SUB_WORKFLOW task must exist after rerun"
        assert a["subWorkflowId"] == failing_id, "branchA subWorkflowId must be PRESERVED"
        assert a["reasonForIncompletion"] is None
        return True

    eventually(resumed)
    complete_task(conductor, await_active(conductor, failing_id, failing_inner), "COMPLETED")
    complete_task(conductor, await_active(conductor, cancelled_id, cancelled_inner), "COMPLETED")
    assert conductor.wait_status(parent_id, "COMPLETED")["status"] == "COMPLETED"


def _inline_then_simple(simple: str) -> list[dict[str, Any]]:
    """The child of the exact-shape and dynamic-fork tests: INLINE ``inline_ref`` (1 + 2)
    then SIMPLE ``simple_ref``."""
    inline = {
        "name": "inline",
        "taskReferenceName": "inline_ref",
        "type": "INLINE",
        "inputParameters": {
            "evaluatorType": "graaljs",
            "expression": "(function () { return $.value1 + $.value2; })();",
            "value1": 1,
            "value2": 2,
        },
    }
    return [inline, simple_task("simple_ref", simple)]


def _only(conductor: Conductor, workflow_id: str, ref: str) -> dict[str, Any]:
    """``onlyTaskByRef``."""
    found = [t for t in conductor.run(workflow_id)["tasks"] if t["referenceTaskName"] == ref]
    assert len(found) == 1, f"expected exactly one {ref} in {workflow_id}, got {len(found)}"
    only: dict[str, Any] = found[0]
    return only


def test_rerun_second_iteration_failure_in_fork_inside_do_while(conductor: Conductor) -> None:
    # WorkflowRerunTests.testRerunSecondIterationFailureInForkInsideDoWhile
    parent, child, simple = unique("parent_rerun"), unique("sub_rerun"), unique("simple")
    conductor.register(definition(child, _inline_then_simple(simple)))
    fork = fork_join(
        "fork_ref",
        [
            [sub_workflow_task("sub_workflow_ref_1", child) | {"name": "sub_workflow_1"}],
            [sub_workflow_task("sub_workflow_ref", child) | {"name": "sub_workflow"}],
        ],
    ) | {"name": "fork"}
    loop = {
        "name": "do_while",
        "taskReferenceName": "do_while_ref",
        "type": "DO_WHILE",
        "inputParameters": {"number": 2},
        "loopCondition": "(function () { if ($.do_while_ref['iteration'] < $.number) "
        "{ return true; } return false; })();",
        "loopOver": [fork, join("join_ref", []) | {"name": "join"}],
    }
    conductor.register(definition(parent, [loop], timeout=900))
    parent_id = conductor.start(parent, version=1)

    def children_at(iteration: int) -> tuple[str, str]:
        def probe() -> tuple[str, str]:
            run = conductor.run(parent_id)
            ids = []
            for ref in ("sub_workflow_ref_1", "sub_workflow_ref"):
                found = [
                    t
                    for t in run["tasks"]
                    if t["referenceTaskName"] == f"{ref}__{iteration}" and t.get("subWorkflowId")
                ]
                assert found, f"{ref}__{iteration} not materialised yet"
                ids.append(found[0]["subWorkflowId"])
            return ids[0], ids[1]

        found: tuple[str, str] = eventually(probe)
        return found

    iter1 = children_at(1)
    for child_id in iter1:
        complete_task(conductor, await_active(conductor, child_id, "simple_ref"), "COMPLETED")
    for child_id in iter1:
        assert conductor.wait_status(child_id, "COMPLETED")["status"] == "COMPLETED"
    snapshots = [_iter1_snapshot(conductor, child_id) for child_id in iter1]

    iter2_a, iter2_b = children_at(2)
    eventually(lambda: _only(conductor, iter2_b, "inline_ref")["status"] == "COMPLETED")
    inline_before = _only(conductor, iter2_b, "inline_ref")
    failed = await_active(conductor, iter2_a, "simple_ref")
    complete_task(conductor, failed, "FAILED")
    assert conductor.wait_status(parent_id, "FAILED")["status"] == "FAILED"

    rerun(conductor, iter2_a, reRunFromWorkflowId=iter2_a, reRunFromTaskId=failed["taskId"])
    assert conductor.wait_status(parent_id, "RUNNING")["status"] == "RUNNING"
    # iteration 1 untouched
    for child_id, before in zip(iter1, snapshots, strict=True):
        assert _iter1_snapshot(conductor, child_id) == before, f"{child_id} changed"
    # iteration 2 branch B's INLINE kept

    def inline_kept() -> bool:
        after = _only(conductor, iter2_b, "inline_ref")
        assert after["status"] == "COMPLETED"
        assert after["taskId"] == inline_before["taskId"]
        assert after["endTime"] == inline_before["endTime"]
        return True

    eventually(inline_kept)
    complete_task(conductor, await_active(conductor, iter2_a, "simple_ref"), "COMPLETED")
    complete_task(conductor, await_active(conductor, iter2_b, "simple_ref"), "COMPLETED")
    assert conductor.wait_status(parent_id, "COMPLETED")["status"] == "COMPLETED"


def _iter1_snapshot(conductor: Conductor, child_id: str) -> tuple[Any, ...]:
    """``snapshotRerunIter1Child``/``assertRerunIter1Unchanged``: the child COMPLETED, its
    end time, its INLINE's id and end time, its SIMPLE's id, end time and retry count."""
    run = conductor.run(child_id)
    inline, simple = (
        _only(conductor, child_id, "inline_ref"),
        _only(conductor, child_id, "simple_ref"),
    )
    return (
        run["status"],
        run["endTime"],
        inline["taskId"],
        inline["endTime"],
        simple["taskId"],
        simple["endTime"],
        simple["retryCount"],
    )


def test_rerun_in_dynamic_fork_preserves_cancelled_and_failing_siblings(
    conductor: Conductor,
) -> None:
    # WorkflowRerunTests.testRerunInDynamicForkPreservesCancelledAndFailingSiblings
    parent, child = unique("parent_dynfork_rerun"), unique("sub_dynfork_rerun")
    simple, prep = unique("simple"), unique("dynfork_prep")
    failing, cancelled, completed = (
        unique(f"branch_{p}_rerun") for p in ("failing", "cancelled", "completed")
    )
    conductor.register(definition(child, _inline_then_simple(simple)))
    dyn_fork = {
        "name": "dyn_fork",
        "taskReferenceName": "dyn_fork_ref",
        "type": "FORK_JOIN_DYNAMIC",
        "inputParameters": {
            "dynamicTasks": "${prep_ref.output.dynamicTasks}",
            "dynamicTasksInput": "${prep_ref.output.dynamicTasksInput}",
        },
        "dynamicForkTasksParam": "dynamicTasks",
        "dynamicForkTasksInputParamName": "dynamicTasksInput",
    }
    dyn_join = {"name": "dyn_join", "taskReferenceName": "dyn_join_ref", "type": "JOIN"}
    conductor.register(
        definition(parent, [simple_task("prep_ref", prep), dyn_fork, dyn_join], timeout=900)
    )
    parent_id = conductor.start(parent, version=1)
    prep_task = await_active(conductor, parent_id, "prep_ref")
    branches = [sub_workflow_task(ref, child) for ref in (failing, cancelled, completed)]
    output = {
        "dynamicTasks": branches,
        "dynamicTasksInput": {failing: {}, cancelled: {}, completed: {}},
    }
    r = conductor.http.post(
        "/api/tasks",
        json={
            "workflowInstanceId": parent_id,
            "taskId": prep_task["taskId"],
            "status": "COMPLETED",
            "outputData": output,
        },
    )
    assert r.status_code == 200, r.text

    def children() -> dict[str, str]:
        run = conductor.run(parent_id)
        found = {}
        for ref in (failing, cancelled, completed):
            with_child = [
                t for t in run["tasks"] if t["referenceTaskName"] == ref and t.get("subWorkflowId")
            ]
            assert with_child, f"{ref} not materialised"
            found[ref] = with_child[0]["subWorkflowId"]
        return found

    ids: dict[str, str] = eventually(children)
    complete_task(conductor, await_active(conductor, ids[completed], "simple_ref"), "COMPLETED")
    assert conductor.wait_status(ids[completed], "COMPLETED")["status"] == "COMPLETED"
    failed = await_active(conductor, ids[failing], "simple_ref")
    complete_task(conductor, failed, "FAILED_WITH_TERMINAL_ERROR")
    assert conductor.wait_status(parent_id, "FAILED")["status"] == "FAILED"
    # every child's INLINE, to show that none runs again
    inlines = {ref: _only(conductor, ids[ref], "inline_ref") for ref in ids}

    rerun(
        conductor, ids[failing], reRunFromWorkflowId=ids[failing], reRunFromTaskId=failed["taskId"]
    )
    assert conductor.wait_status(parent_id, "RUNNING")["status"] == "RUNNING"

    def preserved() -> bool:
        run = conductor.run(parent_id)
        for ref in (failing, cancelled):
            active = active_of(run, ref)
            assert active is not None, f"active {ref} missing"
            assert active["subWorkflowId"] == ids[ref], f"{ref} subWorkflowId must be PRESERVED"
        done = [
            t
            for t in run["tasks"]
            if t["referenceTaskName"] == completed and t["status"] == "COMPLETED"
        ]
        assert done and done[0]["subWorkflowId"] == ids[completed], "completed branch UNCHANGED"
        for ref, before in inlines.items():
            after = _only(conductor, ids[ref], "inline_ref")
            assert (after["taskId"], after["endTime"]) == (before["taskId"], before["endTime"])
        return True

    eventually(preserved)
    for ref in (failing, cancelled):
        complete_task(conductor, await_active(conductor, ids[ref], "simple_ref"), "COMPLETED")
    assert conductor.wait_status(parent_id, "COMPLETED")["status"] == "COMPLETED"
