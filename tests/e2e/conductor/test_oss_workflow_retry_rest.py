"""conductor-oss's Java e2e ``WorkflowRetryTests`` (``e2e/src/test/java/io/conductor/e2e/
workflow``), the tests ``test_sub_workflow_retry.py`` does not port already (it has
``testRetryWithResumeFlagInForkPlusSubWorkflowAcrossFailedStatuses``): retries
(``POST /workflow/{id}/retry``, with or without ``resumeSubworkflowTasks``, and
``POST /workflow/bulk/retry``) of a simple run, of a sub-workflow and its parent, of
SUB_WORKFLOW branches of a FORK (also inside a DO_WHILE, or of a FORK_JOIN_DYNAMIC) and of
three levels of nested forks, over Stepway's HTTP API.

Translations: the Java tests answer tasks from the test, by task id
(``TaskClient.updateTask``) or by reference (``updateTaskSync``), without polling; so do
these (``oss_e2e``). Conductor decides inside each call; Stepway a moment later, so the
tests wait for the state the Java test awaits (its ``await().untilAsserted``, here
``eventually`` or ``Conductor.wait``) before asserting it, within the harness's settle
time instead of the Java tests' 180 s. Workflow and task definition names are made unique
(the Java tests stamp them with the time; the shared ``simple`` and ``dynfork_prep`` task
definitions of the "exact shape" tests get a name of their own per test). The Java
tests' ``terminateExistingRunningWorkflows``/``terminateAll`` clean-ups, which search for
runs of their fixed names, have nothing to clean up here (unique names) and are left out.

Not ported: ``testRetryNestedSubWorkflowsReschedulesSiblingsAtEveryLevel``, ``@Disabled``
in conductor-oss (a race of its own engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique
from tests.e2e.conductor.oss_e2e import (
    active_of,
    await_active,
    await_sub_workflow_id,
    bulk_retry,
    complete_task,
    definition,
    eventually,
    first_of,
    fork_join,
    join,
    register_workflow_def,
    register_workflow_with_sub_workflow_def,
    simple_task,
    sub_workflow_task,
    update_task,
)
from tests.e2e.conductor.sub_workflow_shapes import retry

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


#: Conductor's terminal workflow statuses (``Workflow.WorkflowStatus.isTerminal``)
RUN_TERMINAL = frozenset({"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"})


# --- shared helpers ---------------------------------------------------------------------


def _await_status(conductor: Conductor, workflow_id: str, status: str, message: str = "") -> None:
    """``awaitWorkflowStatus``."""
    run = conductor.wait_status(workflow_id, status)
    assert run["status"] == status, message or f"{workflow_id} must reach {status}"


def _await_task_id(conductor: Conductor, workflow_id: str, index: int) -> dict[str, Any]:
    """``awaitTaskId``: ``tasks[index]`` once the run has more than ``index`` tasks."""
    run = conductor.wait_tasks(workflow_id, index + 1)
    assert len(run["tasks"]) > index, f"{workflow_id} has no task {index}"
    found: dict[str, Any] = run["tasks"][index]
    return found


def _only_task_by_ref(conductor: Conductor, workflow_id: str, ref: str) -> dict[str, Any]:
    """``onlyTaskByRef``: the one task of ``ref`` in the run."""
    matches = [t for t in conductor.run(workflow_id)["tasks"] if t["referenceTaskName"] == ref]
    assert len(matches) == 1, f"expected exactly one {ref} in {workflow_id}, got {len(matches)}"
    return matches[0]


def _complete_task_with_status(
    conductor: Conductor, workflow_id: str, task_id: str, status: str
) -> None:
    """``completeTaskWithStatus``: a TaskResult by id, with a reason when it fails."""
    reason = f"test-driven {status}" if status.startswith("FAILED") else None
    update_task(conductor, workflow_id, task_id, status, reason=reason)


def _complete_active_simple_ref(conductor: Conductor, child_id: str, status: str) -> None:
    """``completeActiveSimpleRef``."""
    found = await_active(conductor, child_id, "simple_ref")
    _complete_task_with_status(conductor, child_id, found["taskId"], status)


def _active_sub_workflow_id(run: dict[str, Any], ref: str) -> str | None:
    """``activeSubWorkflowId``: the child of the first non-terminal task of ``ref``."""
    found = active_of(run, ref)
    assert found is not None, f"no active {ref} task"
    child: str | None = found.get("subWorkflowId")
    return child


def _current_sub_workflow_id(run: dict[str, Any], ref: str, status: str) -> str | None:
    """``currentSubWorkflowId``: the child of the first task of ``ref`` with ``status``."""
    for t in run["tasks"]:
        if t["referenceTaskName"] == ref and t["status"] == status:
            child: str | None = t.get("subWorkflowId")
            return child
    raise AssertionError(f"no {ref} task with status {status}")


def _sub_workflow_id_at_iteration(conductor: Conductor, parent_id: str, ref: str, n: int) -> str:
    """``subWorkflowIdAtIteration``: the child of ``<ref>__<n>`` once it has one."""

    def probe() -> str:
        for t in conductor.run(parent_id)["tasks"]:
            if t["referenceTaskName"] == f"{ref}__{n}" and t.get("subWorkflowId"):
                return str(t["subWorkflowId"])
        raise AssertionError(f"{ref}__{n} not materialised yet")

    child: str = eventually(probe)
    return child


def _inline_preserved(
    conductor: Conductor, child_id: str, task_id: str, end_time: int, label: str
) -> None:
    """``assertInlinePreserved``."""
    inline = _only_task_by_ref(conductor, child_id, "inline_ref")
    assert inline["status"] == "COMPLETED", f"{label} inline_ref must remain COMPLETED"
    assert inline["taskId"] == task_id, f"{label} inline_ref taskId must be UNCHANGED"
    assert inline["endTime"] == end_time, f"{label} inline_ref endTime must be UNCHANGED"


def _exact_shape_child(conductor: Conductor, name: str) -> None:
    """The "exact shape" child: an INLINE ``inline_ref`` (``value1 + value2``), then a
    SIMPLE ``simple_ref`` of the ``simple`` task definition (retryCount 0)."""
    simple = unique("simple")
    conductor.taskdefs({"name": simple, "retryCount": 0, "ownerEmail": "test@conductor.io"})
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
    simple_ref = simple_task("simple_ref", simple)
    simple_ref.pop("inputParameters")
    conductor.register(definition(name, [inline, simple_ref]))


def _exact_shape_sub(ref: str, name: str, child: str) -> dict[str, Any]:
    """``buildSubWorkflowTask`` renamed: a SUB_WORKFLOW ``ref`` named ``name``."""
    return {
        "name": name,
        "taskReferenceName": ref,
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": child, "version": 1},
    }


def _exact_shape_parent(
    conductor: Conductor, name: str, child: str, number: int, branches: list[tuple[str, str]]
) -> None:
    """The "exact shape" parent: a DO_WHILE ``do_while_ref`` (``number`` iterations) over
    a FORK ``fork_ref`` of SUB_WORKFLOW branches, then a JOIN ``join_ref`` (no joinOn)."""
    fork = {
        "name": "fork",
        "taskReferenceName": "fork_ref",
        "type": "FORK_JOIN",
        "forkTasks": [[_exact_shape_sub(ref, task_name, child)] for ref, task_name in branches],
    }
    loop = {
        "name": "do_while",
        "taskReferenceName": "do_while_ref",
        "type": "DO_WHILE",
        "inputParameters": {"number": number},
        "loopCondition": (
            "(function () { if ($.do_while_ref['iteration'] < $.number) { return true; } "
            "return false; })();"
        ),
        "loopOver": [fork, {"name": "join", "taskReferenceName": "join_ref", "type": "JOIN"}],
    }
    conductor.register(definition(name, [loop], timeout=900))


# --- testRetrySimpleWorkflow, testRetryWithSubWorkflow(OptionalLevels) --------------------


def test_retry_simple_workflow(conductor: Conductor) -> None:
    # WorkflowRetryTests.testRetrySimpleWorkflow
    name, task_def = unique("retry-simple-workflow"), unique("retry-simple-task1")
    register_workflow_def(conductor, name, task_def, task_def)
    workflow_id = conductor.start(name, version=1)
    run = conductor.wait_tasks(workflow_id, 2)
    assert not len(run["tasks"]) < 2
    assert len(run["tasks"]) != 0
    update_task(conductor, workflow_id, run["tasks"][1]["taskId"], "FAILED", reason="failed")
    _await_status(conductor, workflow_id, "FAILED")

    retry(conductor, workflow_id)

    def retried() -> dict[str, Any]:
        run = conductor.run(workflow_id)
        assert run["status"] == "RUNNING"
        assert run["lastRetriedTime"] != 0
        assert len(run["tasks"]) > 2, [t["status"] for t in run["tasks"]]
        assert run["tasks"][2]["status"] == "SCHEDULED"
        return run

    run = eventually(retried)
    update_task(conductor, workflow_id, run["tasks"][2]["taskId"], "COMPLETED")
    _await_status(conductor, workflow_id, "COMPLETED")


def test_retry_with_sub_workflow(conductor: Conductor) -> None:
    # WorkflowRetryTests.testRetryWithSubWorkflow
    name, child, task_name = (
        unique(p) for p in ("retry-parent-with-sub-workflow", "retry-sub-workflow", "simple")
    )
    register_workflow_with_sub_workflow_def(conductor, name, child, task_name)
    workflow_id = conductor.start(name, version=1)
    child_id = await_sub_workflow_id(conductor, workflow_id)
    failed = _await_task_id(conductor, child_id, 0)
    update_task(conductor, child_id, failed["taskId"], "FAILED")
    _await_status(conductor, workflow_id, "FAILED")

    # retry the sub workflow
    retry(conductor, child_id)

    def child_retried() -> bool:
        run = conductor.run(child_id)
        assert run["status"] == "RUNNING"
        assert run["lastRetriedTime"] != 0
        assert run["tasks"][0]["status"] == "FAILED"
        assert len(run["tasks"]) > 1 and run["tasks"][1]["status"] == "SCHEDULED"
        return True

    eventually(child_retried)
    again = _await_task_id(conductor, child_id, 1)
    update_task(conductor, child_id, again["taskId"], "COMPLETED")
    _await_status(conductor, workflow_id, "COMPLETED", f"workflow {workflow_id} did not complete")

    # retry at the parent workflow's level
    new_workflow_id = conductor.start(name, version=1)
    new_child_id = await_sub_workflow_id(conductor, new_workflow_id)
    failed = _await_task_id(conductor, new_child_id, 0)
    update_task(conductor, new_child_id, failed["taskId"], "FAILED")
    _await_status(conductor, new_workflow_id, "FAILED")

    retry(conductor, new_workflow_id)
    _await_status(conductor, new_workflow_id, "RUNNING")

    # The Java test reads tasks[0]'s child here (awaitSubWorkflowId) and awaits its
    # tasks[1], which conductor-oss's own code does not make: a retry without
    # resumeSubworkflowTasks gives the parent a new SUB_WORKFLOW attempt
    # (WorkflowExecutorOps.taskToBeRescheduled: a copy with subWorkflowId null) that
    # starts a new child run. This asserts what conductor-oss does.
    def new_attempt() -> str:
        run = conductor.run(new_workflow_id)
        assert [t["status"] for t in run["tasks"]][:1] == ["FAILED"]
        assert run["tasks"][0]["subWorkflowId"] == new_child_id
        assert (
            len(run["tasks"]) == 2
            and run["tasks"][1]["retriedTaskId"] == (run["tasks"][0]["taskId"])
        )
        child = run["tasks"][1].get("subWorkflowId")
        assert child and child != new_child_id
        return str(child)

    retried_child = eventually(new_attempt)
    assert conductor.run(new_child_id)["status"] == "FAILED"
    again = _await_task_id(conductor, retried_child, 0)
    update_task(conductor, retried_child, again["taskId"], "COMPLETED")
    _await_status(conductor, new_workflow_id, "COMPLETED")


def test_retry_with_sub_workflow_optional_levels(conductor: Conductor) -> None:
    # WorkflowRetryTests.testRetryWithSubWorkflowOptionalLevels
    parent, child, task_name = (
        unique(p) for p in ("parent-wf-2level", "sub-wf-2level", "simple-task-2level")
    )
    register_workflow_def(conductor, child, task_name, task_name)
    # registerWorkflowWithSubWorkflowDef registers the child's name again (its one SIMPLE
    # task), over registerWorkflowDef's definition, in the Java test as here
    parent_def, _ = register_workflow_with_sub_workflow_def(conductor, parent, child, task_name)
    # the SUB_WORKFLOW task in the parent made optional
    parent_def["tasks"][0]["optional"] = True
    conductor.register(parent_def)

    parent_id = conductor.start(parent, version=1)
    child_id = await_sub_workflow_id(conductor, parent_id)
    child_task = _await_task_id(conductor, child_id, 0)
    update_task(conductor, child_id, child_task["taskId"], "FAILED")
    # the parent completes: its SUB_WORKFLOW task is optional
    _await_status(conductor, parent_id, "COMPLETED")

    retry(conductor, child_id)

    def child_running_parent_completed() -> bool:
        assert conductor.run(child_id)["status"] == "RUNNING"
        assert conductor.run(parent_id)["status"] == "COMPLETED"
        return True

    eventually(child_running_parent_completed)


# --- the "exact shape": a FORK of SUB_WORKFLOWs inside a DO_WHILE -----------------------


@dataclass
class Iter1Snapshot:
    workflow_end_time: int
    inline_task_id: str
    inline_end_time: int
    simple_task_id: str
    simple_end_time: int
    simple_retry_count: int


def _snapshot_iter1_child(conductor: Conductor, child_id: str) -> Iter1Snapshot:
    run = conductor.run(child_id)
    inline, simple = first_of(run, "inline_ref"), first_of(run, "simple_ref")
    return Iter1Snapshot(
        run["endTime"],
        inline["taskId"],
        inline["endTime"],
        simple["taskId"],
        simple["endTime"],
        simple["retryCount"],
    )


def _iter1_unchanged(conductor: Conductor, child_id: str, before: Iter1Snapshot) -> None:
    """``assertIter1Unchanged``."""
    run = conductor.run(child_id)
    assert run["status"] == "COMPLETED", f"{child_id} must stay COMPLETED"
    assert run["endTime"] == before.workflow_end_time, f"{child_id} endTime unchanged"
    inline = _only_task_by_ref(conductor, child_id, "inline_ref")
    simple = _only_task_by_ref(conductor, child_id, "simple_ref")
    assert inline["taskId"] == before.inline_task_id, f"{child_id} inline taskId unchanged"
    assert inline["endTime"] == before.inline_end_time, f"{child_id} inline endTime unchanged"
    assert simple["taskId"] == before.simple_task_id, f"{child_id} simple taskId unchanged"
    assert simple["endTime"] == before.simple_end_time, f"{child_id} simple endTime unchanged"
    assert simple["retryCount"] == before.simple_retry_count, f"{child_id} retryCount unchanged"


def test_retry_with_resume_flag_second_iteration_failure_in_fork_inside_do_while(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetryWithResumeFlagSecondIterationFailureInForkInsideDoWhile
    parent, child = unique("parent"), unique("sub")
    _exact_shape_child(conductor, child)
    _exact_shape_parent(
        conductor,
        parent,
        child,
        2,
        [("sub_workflow_ref_1", "sub_workflow_1"), ("sub_workflow_ref", "sub_workflow")],
    )
    parent_id = conductor.start(parent, version=1)

    iter1_a = _sub_workflow_id_at_iteration(conductor, parent_id, "sub_workflow_ref_1", 1)
    iter1_b = _sub_workflow_id_at_iteration(conductor, parent_id, "sub_workflow_ref", 1)
    _complete_active_simple_ref(conductor, iter1_a, "COMPLETED")
    _complete_active_simple_ref(conductor, iter1_b, "COMPLETED")
    _await_status(conductor, iter1_a, "COMPLETED")
    _await_status(conductor, iter1_b, "COMPLETED")
    snap_a = _snapshot_iter1_child(conductor, iter1_a)
    snap_b = _snapshot_iter1_child(conductor, iter1_b)

    iter2_a = _sub_workflow_id_at_iteration(conductor, parent_id, "sub_workflow_ref_1", 2)
    iter2_b = _sub_workflow_id_at_iteration(conductor, parent_id, "sub_workflow_ref", 2)
    eventually(lambda: _only_task_by_ref(conductor, iter2_b, "inline_ref")["status"] == "COMPLETED")
    iter2_b_inline_before = _only_task_by_ref(conductor, iter2_b, "inline_ref")

    _complete_active_simple_ref(conductor, iter2_a, "FAILED")
    _await_status(conductor, parent_id, "FAILED")

    retry(conductor, parent_id, resume=True)
    _await_status(conductor, parent_id, "RUNNING")

    _iter1_unchanged(conductor, iter1_a, snap_a)
    _iter1_unchanged(conductor, iter1_b, snap_b)

    def iter2_b_inline_kept() -> bool:
        inline_after = _only_task_by_ref(conductor, iter2_b, "inline_ref")
        assert inline_after["status"] == "COMPLETED", "iter 2 branchB inline must remain COMPLETED"
        assert inline_after["taskId"] == iter2_b_inline_before["taskId"]
        assert inline_after["endTime"] == iter2_b_inline_before["endTime"]
        return True

    eventually(iter2_b_inline_kept)

    _complete_active_simple_ref(conductor, iter2_a, "COMPLETED")
    _complete_active_simple_ref(conductor, iter2_b, "COMPLETED")
    _await_status(conductor, parent_id, "COMPLETED")


@dataclass
class Captured:
    parent_id: str
    child_failing: str
    child_cancelled: str
    child_completed: str
    inline_failing: tuple[str, int]
    inline_cancelled: tuple[str, int]
    inline_completed: tuple[str, int]


def _inline_of(conductor: Conductor, child_id: str) -> tuple[str, int]:
    inline = _only_task_by_ref(conductor, child_id, "inline_ref")
    return inline["taskId"], inline["endTime"]


def _setup_three_branch_scenario_and_fail(conductor: Conductor) -> Captured:
    """``setupThreeBranchScenarioAndFail``: a one-iteration DO_WHILE over a FORK of three
    SUB_WORKFLOWs; branch C (``sub_workflow_ref_2``) completes, branch B
    (``sub_workflow_ref``) fails with FAILED_WITH_TERMINAL_ERROR, branch A
    (``sub_workflow_ref_1``) is canceled."""
    parent, child = unique("parent_3br"), unique("sub_3br")
    _exact_shape_child(conductor, child)
    _exact_shape_parent(
        conductor,
        parent,
        child,
        1,
        [
            ("sub_workflow_ref_1", "sub_workflow_1"),
            ("sub_workflow_ref", "sub_workflow"),
            ("sub_workflow_ref_2", "sub_workflow_2"),
        ],
    )
    parent_id = conductor.start(parent, version=1)
    c_a = _sub_workflow_id_at_iteration(conductor, parent_id, "sub_workflow_ref_1", 1)
    c_b = _sub_workflow_id_at_iteration(conductor, parent_id, "sub_workflow_ref", 1)
    c_c = _sub_workflow_id_at_iteration(conductor, parent_id, "sub_workflow_ref_2", 1)

    _complete_active_simple_ref(conductor, c_c, "COMPLETED")
    _await_status(conductor, c_c, "COMPLETED")
    _complete_active_simple_ref(conductor, c_b, "FAILED_WITH_TERMINAL_ERROR")
    _await_status(conductor, parent_id, "FAILED")

    forks = [
        t for t in conductor.run(parent_id)["tasks"] if t["referenceTaskName"].startswith("fork_")
    ]
    assert forks, "fork task not found in parent"
    assert forks[0]["status"] == "COMPLETED", "FORK_JOIN must stay COMPLETED on branch failure"
    return Captured(
        parent_id,
        c_b,
        c_a,
        c_c,
        _inline_of(conductor, c_b),
        _inline_of(conductor, c_a),
        _inline_of(conductor, c_c),
    )


def _all_inlines_preserved(conductor: Conductor, c: Captured) -> None:
    for child_id, (task_id, end_time), label in (
        (c.child_failing, c.inline_failing, "failing branch child"),
        (c.child_cancelled, c.inline_cancelled, "cancelled branch child"),
        (c.child_completed, c.inline_completed, "completed branch child"),
    ):
        _inline_preserved(conductor, child_id, task_id, end_time, label)


def _fresh_children(
    conductor: Conductor,
    c: Captured,
    completed: str,
    failing: str,
    cancelled: str,
    originals_stay: bool = False,
) -> tuple[str, str]:
    """The Java tests' await after a retry without the flag: the COMPLETED branch keeps its
    child, the FAILED and CANCELED branches have new ones (and, ``originals_stay``, their
    former children stay FAILED and terminal); those new children."""

    def probe() -> tuple[str, str]:
        run = conductor.run(c.parent_id)
        assert _current_sub_workflow_id(run, completed, "COMPLETED") == c.child_completed, (
            "COMPLETED branch must keep its original subWorkflowId"
        )
        new_failing = _active_sub_workflow_id(run, failing)
        new_cancelled = _active_sub_workflow_id(run, cancelled)
        assert new_failing is not None, "a fresh child id for the FAILED branch"
        assert new_cancelled is not None, "a fresh child id for the CANCELED branch"
        assert new_failing != c.child_failing, "FAILED branch must have a NEW subWorkflowId"
        assert new_cancelled != c.child_cancelled, "CANCELED branch must have a NEW subWorkflowId"
        if originals_stay:
            assert conductor.run(c.child_failing)["status"] == "FAILED", (
                "original failing child must stay FAILED"
            )
            assert conductor.run(c.child_cancelled)["status"] in RUN_TERMINAL, (
                "original cancelled child must stay terminal"
            )
        return new_failing, new_cancelled

    found: tuple[str, str] = eventually(probe)
    return found


def _restored_in_place(
    conductor: Conductor, c: Captured, completed: str, failing: str, cancelled: str
) -> None:
    """The Java tests' await after a retry that resumes the branches in place."""

    def probe() -> bool:
        run = conductor.run(c.parent_id)
        assert _current_sub_workflow_id(run, completed, "COMPLETED") == c.child_completed, (
            "COMPLETED branch must keep its original subWorkflowId"
        )
        assert _active_sub_workflow_id(run, failing) == c.child_failing, (
            "FAILED branch subWorkflowId must be PRESERVED"
        )
        assert _active_sub_workflow_id(run, cancelled) == c.child_cancelled, (
            "CANCELED branch subWorkflowId must be PRESERVED"
        )
        assert conductor.run(c.child_failing)["status"] not in RUN_TERMINAL
        assert conductor.run(c.child_cancelled)["status"] not in RUN_TERMINAL
        _all_inlines_preserved(conductor, c)
        return True

    eventually(probe)


def test_retry_without_resume_flag_spawns_fresh_children_for_unsuccessful_sub_workflow_siblings(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetryWithoutResumeFlagSpawnsFreshChildrenForUnsuccessfulSubWorkflowSiblings  # noqa: E501
    c = _setup_three_branch_scenario_and_fail(conductor)
    bulk_retry(conductor, c.parent_id)
    _await_status(conductor, c.parent_id, "RUNNING")

    new_failing, new_cancelled = _fresh_children(
        conductor,
        c,
        "sub_workflow_ref_2__1",
        "sub_workflow_ref__1",
        "sub_workflow_ref_1__1",
        originals_stay=True,
    )
    _complete_active_simple_ref(conductor, new_failing, "COMPLETED")
    _complete_active_simple_ref(conductor, new_cancelled, "COMPLETED")
    _await_status(conductor, c.parent_id, "COMPLETED")


def test_retry_with_resume_flag_restores_unsuccessful_sub_workflow_siblings_in_place(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetryWithResumeFlagRestoresUnsuccessfulSubWorkflowSiblingsInPlace
    c = _setup_three_branch_scenario_and_fail(conductor)
    retry(conductor, c.parent_id, resume=True)
    _await_status(conductor, c.parent_id, "RUNNING")
    _restored_in_place(
        conductor, c, "sub_workflow_ref_2__1", "sub_workflow_ref__1", "sub_workflow_ref_1__1"
    )
    _complete_active_simple_ref(conductor, c.child_failing, "COMPLETED")
    _complete_active_simple_ref(conductor, c.child_cancelled, "COMPLETED")
    _await_status(conductor, c.parent_id, "COMPLETED")


# --- FORK_JOIN_DYNAMIC of SUB_WORKFLOWs ---------------------------------------------------


@dataclass
class DynamicCaptured(Captured):
    failing_ref: str
    cancelled_ref: str
    completed_ref: str


def _setup_dynamic_fork_scenario_and_fail(conductor: Conductor) -> DynamicCaptured:
    """``setupDynamicForkScenarioAndFail``: ``prep_ref`` answers three SUB_WORKFLOW
    branches for the FORK_JOIN_DYNAMIC; one completes, one fails with
    FAILED_WITH_TERMINAL_ERROR, one is canceled."""
    parent, child = unique("parent_dynfork"), unique("sub_dynfork")
    failing_ref, cancelled_ref, completed_ref = (
        unique(p) for p in ("branch_failing", "branch_cancelled", "branch_completed")
    )
    _exact_shape_child(conductor, child)
    prep = unique("dynfork_prep")
    conductor.taskdefs({"name": prep, "retryCount": 0, "ownerEmail": "test@conductor.io"})
    prep_task = simple_task("prep_ref", prep)
    prep_task.pop("inputParameters")
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
    conductor.register(definition(parent, [prep_task, dyn_fork, dyn_join], timeout=900))
    parent_id = conductor.start(parent, version=1)

    prep_row = await_active(conductor, parent_id, "prep_ref")
    refs = (failing_ref, cancelled_ref, completed_ref)
    output = {
        "dynamicTasks": [
            {
                "name": child,
                "taskReferenceName": ref,
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": child, "version": 1},
            }
            for ref in refs
        ],
        "dynamicTasksInput": {ref: {} for ref in refs},
    }
    update_task(conductor, parent_id, prep_row["taskId"], "COMPLETED", output=output)

    def children() -> dict[str, str]:
        run = conductor.run(parent_id)
        found: dict[str, str] = {}
        for ref in refs:
            with_child = [
                t for t in run["tasks"] if t["referenceTaskName"] == ref and t.get("subWorkflowId")
            ]
            assert with_child, f"{ref} not materialised"
            found[ref] = with_child[0]["subWorkflowId"]
        return found

    ids: dict[str, str] = eventually(children)
    c_f, c_ca, c_co = ids[failing_ref], ids[cancelled_ref], ids[completed_ref]
    _complete_active_simple_ref(conductor, c_co, "COMPLETED")
    _await_status(conductor, c_co, "COMPLETED")
    _complete_active_simple_ref(conductor, c_f, "FAILED_WITH_TERMINAL_ERROR")
    _await_status(conductor, parent_id, "FAILED")

    dyn_fork_now = _only_task_by_ref(conductor, parent_id, "dyn_fork_ref")
    assert dyn_fork_now["status"] == "COMPLETED", (
        "FORK_JOIN_DYNAMIC must stay COMPLETED on branch failure (does not propagate)"
    )
    return DynamicCaptured(
        parent_id,
        c_f,
        c_ca,
        c_co,
        _inline_of(conductor, c_f),
        _inline_of(conductor, c_ca),
        _inline_of(conductor, c_co),
        failing_ref,
        cancelled_ref,
        completed_ref,
    )


def test_retry_with_resume_flag_in_dynamic_fork_restores_unsuccessful_branches_in_place(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetryWithResumeFlagInDynamicForkRestoresUnsuccessfulBranchesInPlace
    c = _setup_dynamic_fork_scenario_and_fail(conductor)
    retry(conductor, c.parent_id, resume=True)
    _await_status(conductor, c.parent_id, "RUNNING")
    _restored_in_place(conductor, c, c.completed_ref, c.failing_ref, c.cancelled_ref)
    _complete_active_simple_ref(conductor, c.child_failing, "COMPLETED")
    _complete_active_simple_ref(conductor, c.child_cancelled, "COMPLETED")
    _await_status(conductor, c.parent_id, "COMPLETED")


def test_retry_without_resume_flag_in_dynamic_fork_spawns_fresh_children_for_unsuccessful_branches(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetryWithoutResumeFlagInDynamicForkSpawnsFreshChildrenForUnsuccessfulBranches  # noqa: E501
    c = _setup_dynamic_fork_scenario_and_fail(conductor)
    bulk_retry(conductor, c.parent_id)
    _await_status(conductor, c.parent_id, "RUNNING")
    new_failing, new_cancelled = _fresh_children(
        conductor, c, c.completed_ref, c.failing_ref, c.cancelled_ref
    )
    _complete_active_simple_ref(conductor, new_failing, "COMPLETED")
    _complete_active_simple_ref(conductor, new_cancelled, "COMPLETED")
    _await_status(conductor, c.parent_id, "COMPLETED")


def test_retry_on_failing_child_sub_workflow_in_dynamic_fork_preserves_cancelled_sibling(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetryOnFailingChildSubWorkflowInDynamicForkPreservesCancelledSibling
    c = _setup_dynamic_fork_scenario_and_fail(conductor)
    bulk_retry(conductor, c.child_failing)
    _await_status(conductor, c.parent_id, "RUNNING")
    _restored_in_place(conductor, c, c.completed_ref, c.failing_ref, c.cancelled_ref)
    _complete_active_simple_ref(conductor, c.child_failing, "COMPLETED")
    _complete_active_simple_ref(conductor, c.child_cancelled, "COMPLETED")
    _await_status(conductor, c.parent_id, "COMPLETED")


# --- retries of a failed child: canceled SUB_WORKFLOW siblings resumed in place ----------


def test_retry_sub_workflow_reschedules_all_sub_workflow_siblings_in_fork(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetrySubWorkflowReschedulesAllSubWorkflowSiblingsInFork
    parent, failing_child, cancelled_child = (
        unique(f"rerun-allsubwf-{p}") for p in ("parent", "failing-child", "cancelled-child")
    )
    failing_inner, cancelled_inner = "task_in_failing_sub", "task_in_cancelled_sub"
    failing, cancelled = "failing_sub_ref", "cancelled_sub_ref"
    conductor.register(definition(failing_child, [simple_task(failing_inner, unique("f"))]))
    conductor.register(definition(cancelled_child, [simple_task(cancelled_inner, unique("c"))]))
    conductor.register(
        definition(
            parent,
            [
                fork_join(
                    "fork_allsubwf",
                    [
                        [sub_workflow_task(failing, failing_child)],
                        [sub_workflow_task(cancelled, cancelled_child)],
                    ],
                ),
                join("join_allsubwf", [failing, cancelled]),
            ],
        )
    )
    workflow_id = conductor.start(parent, version=1)

    def started() -> dict[str, str]:
        run = conductor.run(workflow_id)
        subs = {ref: active_of(run, ref) for ref in (failing, cancelled)}
        for ref, sub in subs.items():
            assert sub is not None, f"{ref} not found"
            assert sub.get("subWorkflowId")
            assert conductor.run(sub["subWorkflowId"])["tasks"]
        return {ref: str(sub["subWorkflowId"]) for ref, sub in subs.items() if sub}

    children: dict[str, str] = eventually(started)
    failing_id, original_cancelled_id = children[failing], children[cancelled]
    complete_task(conductor, await_active(conductor, failing_id, failing_inner), "FAILED")

    def failed() -> bool:
        run = conductor.run(workflow_id)
        assert run["status"] == "FAILED", "Parent should be FAILED"
        assert first_of(run, cancelled)["status"] == "CANCELED"
        assert first_of(run, failing)["reasonForIncompletion"] is not None
        return True

    eventually(failed)

    bulk_retry(conductor, failing_id)
    _await_status(conductor, workflow_id, "RUNNING", "Parent should be RUNNING after retry")

    def resumed() -> bool:
        run = conductor.run(workflow_id)
        sibling = active_of(run, cancelled)
        assert sibling is not None, "Expected an active cancelled_sub_ref task after retry"
        assert sibling["subWorkflowId"] == original_cancelled_id, "subWorkflowId PRESERVED"
        resumed_child = conductor.run(sibling["subWorkflowId"])
        assert resumed_child["status"] not in RUN_TERMINAL, "Resumed child must be non-terminal"
        assert resumed_child["tasks"], "Resumed child must still have its tasks"
        again = active_of(run, failing)
        assert again is not None, "failing_sub_ref must be active after retry"
        assert again["reasonForIncompletion"] is None
        return True

    eventually(resumed)

    complete_task(
        conductor, await_active(conductor, original_cancelled_id, cancelled_inner), "COMPLETED"
    )
    complete_task(conductor, await_active(conductor, failing_id, failing_inner), "COMPLETED")
    _await_status(conductor, workflow_id, "COMPLETED", "Parent workflow should reach COMPLETED")


def test_retry_nested_fork_with_simple_and_sub_workflow_siblings(conductor: Conductor) -> None:
    # WorkflowRetryTests.testRetryNestedForkWithSimpleAndSubWorkflowSiblings
    top, mid, grandchild, leaf, top_cancelled = (
        unique(f"rerun-3lvl-{p}") for p in ("top", "mid", "grandchild", "leaf", "top-cancelled")
    )
    leaf_task, grandchild_simple = "task_in_failing_leaf", "grandchild_cancelled_simple"
    mid_simple, top_cancelled_task = "mid_cancelled_simple", "task_in_top_cancelled"
    conductor.register(definition(leaf, [simple_task(leaf_task, unique("leaf"))]))
    conductor.register(definition(top_cancelled, [simple_task(top_cancelled_task, unique("tc"))]))
    conductor.register(
        definition(
            grandchild,
            [
                fork_join(
                    "grandchild_fork",
                    [
                        [sub_workflow_task("failing_leaf_ref", leaf)],
                        [simple_task(grandchild_simple, unique("gc"))],
                    ],
                ),
                join("grandchild_join", ["failing_leaf_ref", grandchild_simple]),
            ],
        )
    )
    conductor.register(
        definition(
            mid,
            [
                fork_join(
                    "mid_fork",
                    [
                        [sub_workflow_task("grandchild_ref", grandchild)],
                        [simple_task(mid_simple, unique("mc"))],
                    ],
                ),
                join("mid_join", ["grandchild_ref", mid_simple]),
            ],
        )
    )
    conductor.register(
        definition(
            top,
            [
                fork_join(
                    "top_fork",
                    [
                        [sub_workflow_task("mid_ref", mid)],
                        [sub_workflow_task("top_cancelled_ref", top_cancelled)],
                    ],
                ),
                join("top_join", ["mid_ref", "top_cancelled_ref"]),
            ],
            timeout=900,
        )
    )
    top_id = conductor.start(top, version=1)

    def levels() -> tuple[str, str, str, str]:
        top_run = conductor.run(top_id)
        mid_id = first_of(top_run, "mid_ref").get("subWorkflowId")
        top_cancelled_id = first_of(top_run, "top_cancelled_ref").get("subWorkflowId")
        assert mid_id and top_cancelled_id
        grandchild_id = first_of(conductor.run(mid_id), "grandchild_ref").get("subWorkflowId")
        assert grandchild_id
        leaf_id = first_of(conductor.run(grandchild_id), "failing_leaf_ref").get("subWorkflowId")
        assert leaf_id
        assert conductor.run(leaf_id)["tasks"]
        return mid_id, grandchild_id, leaf_id, top_cancelled_id

    mid_id, grandchild_id, leaf_id, original_top_cancelled_id = eventually(levels)
    complete_task(conductor, first_of(conductor.run(leaf_id), leaf_task), "FAILED")

    def failed() -> bool:
        top_run = conductor.run(top_id)
        assert top_run["status"] == "FAILED", "Top should be FAILED"
        assert first_of(top_run, "top_cancelled_ref")["status"] == "CANCELED"
        assert first_of(top_run, "mid_ref")["reasonForIncompletion"] is not None
        mid_run = conductor.run(mid_id)
        assert mid_run["status"] == "FAILED", "Mid should be FAILED"
        assert first_of(mid_run, mid_simple)["status"] == "CANCELED"
        assert first_of(mid_run, "grandchild_ref")["reasonForIncompletion"] is not None
        grandchild_run = conductor.run(grandchild_id)
        assert grandchild_run["status"] == "FAILED", "Grandchild should be FAILED"
        assert first_of(grandchild_run, grandchild_simple)["status"] == "CANCELED"
        assert first_of(grandchild_run, "failing_leaf_ref")["reasonForIncompletion"] is not None
        return True

    eventually(failed)

    bulk_retry(conductor, leaf_id)
    _await_status(conductor, top_id, "RUNNING", "Top must resume to RUNNING")
    _await_status(conductor, mid_id, "RUNNING", "Mid must resume to RUNNING")
    _await_status(conductor, grandchild_id, "RUNNING", "Grandchild must resume to RUNNING")

    def resumed(run_id: str, simple_ref: str, sub_ref: str) -> bool:
        run = conductor.run(run_id)
        assert active_of(run, simple_ref) is not None, f"Expected an active {simple_ref}"
        sub = active_of(run, sub_ref)
        assert sub is not None, f"{sub_ref} must be active after retry"
        assert sub["reasonForIncompletion"] is None
        return True

    eventually(lambda: resumed(grandchild_id, grandchild_simple, "failing_leaf_ref"))
    eventually(lambda: resumed(mid_id, mid_simple, "grandchild_ref"))

    def top_resumed() -> bool:
        run = conductor.run(top_id)
        sibling = active_of(run, "top_cancelled_ref")
        assert sibling is not None, "Expected an active top_cancelled_ref after retry"
        assert sibling["subWorkflowId"] == original_top_cancelled_id, "subWorkflowId PRESERVED"
        assert conductor.run(sibling["subWorkflowId"])["status"] not in RUN_TERMINAL
        again = active_of(run, "mid_ref")
        assert again is not None, "mid_ref must be active after retry"
        assert again["reasonForIncompletion"] is None
        return True

    eventually(top_resumed)

    complete_task(conductor, await_active(conductor, grandchild_id, grandchild_simple), "COMPLETED")
    complete_task(conductor, await_active(conductor, mid_id, mid_simple), "COMPLETED")
    complete_task(
        conductor,
        await_active(conductor, original_top_cancelled_id, top_cancelled_task),
        "COMPLETED",
    )
    complete_task(conductor, await_active(conductor, leaf_id, leaf_task), "COMPLETED")
    _await_status(conductor, top_id, "COMPLETED", "Top workflow should reach COMPLETED end-to-end")


def test_retry_in_place_preserves_completed_tasks_inside_cancelled_child(
    conductor: Conductor,
) -> None:
    # WorkflowRetryTests.testRetryInPlacePreservesCompletedTasksInsideCancelledChild
    parent, failing_child, cancelled_child = (
        unique(f"rerun-preserve-completed-{p}") for p in ("parent", "failing", "cancelled")
    )
    failing_inner, task_a, task_b = "task_in_failing_pc", "task_a_in_cancelled_pc", "task_b_pc"
    failing, cancelled = "failing_sub_ref_pc", "cancelled_sub_ref_pc"
    conductor.register(definition(failing_child, [simple_task(failing_inner, unique("f"))]))
    conductor.register(
        definition(
            cancelled_child,
            [simple_task(task_a, unique("a")), simple_task(task_b, unique("b"))],
        )
    )
    conductor.register(
        definition(
            parent,
            [
                fork_join(
                    "fork_pc",
                    [
                        [sub_workflow_task(failing, failing_child)],
                        [sub_workflow_task(cancelled, cancelled_child)],
                    ],
                ),
                join("join_pc", [failing, cancelled]),
            ],
        )
    )
    workflow_id = conductor.start(parent, version=1)

    def started() -> tuple[str, str]:
        run = conductor.run(workflow_id)
        sibling = active_of(run, cancelled)
        assert sibling is not None and sibling.get("subWorkflowId"), "cancelled sibling missing"
        assert active_of(conductor.run(sibling["subWorkflowId"]), task_a) is not None
        failing_sub = active_of(run, failing)
        assert failing_sub is not None and failing_sub.get("subWorkflowId")
        return str(failing_sub["subWorkflowId"]), str(sibling["subWorkflowId"])

    failing_id, original_cancelled_id = eventually(started)
    complete_task(conductor, await_active(conductor, original_cancelled_id, task_a), "COMPLETED")

    def a_done() -> dict[str, Any]:
        child = conductor.run(original_cancelled_id)
        assert first_of(child, task_a)["status"] == "COMPLETED"
        assert active_of(child, task_b) is not None, "taskB should be active"
        return next(
            t
            for t in child["tasks"]
            if t["referenceTaskName"] == task_a and t["status"] == "COMPLETED"
        )

    original_a = eventually(a_done)
    complete_task(conductor, await_active(conductor, failing_id, failing_inner), "FAILED")

    def failed() -> bool:
        run = conductor.run(workflow_id)
        assert run["status"] == "FAILED"
        child = conductor.run(original_cancelled_id)
        assert child["status"] in RUN_TERMINAL, f"Cancelled child should be terminal: {child}"
        assert first_of(child, task_a)["status"] == "COMPLETED"
        assert first_of(run, failing)["reasonForIncompletion"] is not None
        return True

    eventually(failed)

    bulk_retry(conductor, failing_id)

    def resumed() -> bool:
        run = conductor.run(workflow_id)
        sibling = active_of(run, cancelled)
        assert sibling is not None, "cancelled sibling task should be active after retry"
        assert sibling["subWorkflowId"] == original_cancelled_id, "subWorkflowId must be PRESERVED"
        child = conductor.run(original_cancelled_id)
        assert child["status"] not in RUN_TERMINAL, "Resumed child must be non-terminal"
        again = active_of(run, failing)
        assert again is not None, "failing_sub_ref must be active after retry"
        assert again["reasonForIncompletion"] is None
        kept = [
            t
            for t in child["tasks"]
            if t["referenceTaskName"] == task_a and t["status"] == "COMPLETED"
        ]
        assert kept, "taskA must remain COMPLETED after retry"
        assert kept[0]["taskId"] == original_a["taskId"], "taskA must be the same task instance"
        assert kept[0]["endTime"] == original_a["endTime"], "taskA's endTime must be unchanged"
        return True

    eventually(resumed)


def test_retry_sub_workflow_retries_failed_inner_task(conductor: Conductor) -> None:
    # WorkflowRetryTests.testRetrySubWorkflowRetriesFailedInnerTask
    parent, child = unique("retry-subwf-inner-parent"), unique("retry-subwf-inner-child")
    inner, sub_ref = "inner_task_retry_inner", "sub_ref_retry_inner"
    conductor.register(definition(child, [simple_task(inner, unique("inner"))]))
    conductor.register(definition(parent, [sub_workflow_task(sub_ref, child)]))
    workflow_id = conductor.start(parent, version=1)

    def started() -> str:
        sub = active_of(conductor.run(workflow_id), sub_ref)
        assert sub is not None and sub.get("subWorkflowId"), "sub task should be active"
        assert active_of(conductor.run(sub["subWorkflowId"]), inner) is not None
        return str(sub["subWorkflowId"])

    child_id: str = eventually(started)
    inner_task = await_active(conductor, child_id, inner)
    failed_task_id = inner_task["taskId"]
    complete_task(conductor, inner_task, "FAILED")

    _await_status(conductor, workflow_id, "FAILED", "Parent should be FAILED")
    _await_status(conductor, child_id, "FAILED", "Child should be FAILED")
    assert first_of(conductor.run(workflow_id), sub_ref)["reasonForIncompletion"] is not None

    bulk_retry(conductor, child_id)
    _await_status(conductor, child_id, "RUNNING", "Child must be RUNNING after retry")
    _await_status(conductor, workflow_id, "RUNNING", "Parent must be RUNNING after retry")

    def retried() -> bool:
        again = active_of(conductor.run(child_id), inner)
        assert again is not None, "A fresh attempt of inner_task must be active after retry"
        assert again["taskId"] != failed_task_id, "a new attempt (different taskId)"
        sub = active_of(conductor.run(workflow_id), sub_ref)
        assert sub is not None, "parent sub_ref must be active"
        assert sub["subWorkflowId"] == child_id, "still the same child"
        assert sub["reasonForIncompletion"] is None
        return True

    eventually(retried)
    complete_task(conductor, await_active(conductor, child_id, inner), "COMPLETED")
    _await_status(conductor, workflow_id, "COMPLETED", "Parent should reach COMPLETED")
