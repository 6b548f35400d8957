"""Restarting and retrying a nested fork with a SUB_WORKFLOW, as conductor-oss's
test-harness ``NestedForkJoinSubWorkflowSpec`` asserts.

The spec's shape: a parent run of ``nested_fork_join_swf``, an outer FORK of (an inner
FORK of a SUB_WORKFLOW ``st1`` and a SIMPLE ``t2``, then ``inner_join``) and a SIMPLE
``t3``, then ``outer_join``; ``st1`` starts a child run of ``integration_test_wf``
(``t1``, ``t2``). The parent's ``t2`` and ``t3`` complete, the child's ``t1`` completes
and its ``t2`` fails (no retries): the child and the parent end FAILED, the parent's
JOINs CANCELED. Then, one case each:

* a restart of the child: the same child run starts again, and the parent is RUNNING
  again with its SUB_WORKFLOW task IN_PROGRESS (``updateAndPushParents(..., "restarted")``);
* a restart of the parent: every task again, a new child run;
* a retry of the parent: a new attempt of the SUB_WORKFLOW task (a new child run), the
  JOINs IN_PROGRESS again;
* a retry of the parent with ``resumeSubworkflowTasks``, and a retry of the child: the
  child's ``t2`` gets a new attempt, the parent's SUB_WORKFLOW task goes IN_PROGRESS in
  place;

and in every case the parent completes when the child does.

Conductor decides inside the API call, and its JOINs are asynchronous system tasks the
spec executes by hand (``asyncSystemTaskExecutor.execute(joinTask, ...)``): it reads a
parent whose SUB_WORKFLOW task COMPLETED while both JOINs are still IN_PROGRESS. Stepway
decides the JOINs right after the SUB_WORKFLOW task completes, without a call, so that
in-between state cannot be waited for reliably: the tests assert the settled state after
it (the parent COMPLETED), which is the spec's final assertion. ``subworkflowChanged`` is
always false in Stepway (docs/conductor-compatibility.md, "Run and task JSON"); the spec
asserts ``!subworkflowChanged`` only after a sweep reset it, which the tests assert.

The spec reads the parent's rows by index (``tasks[0]``..``tasks[7]``): their order is
asserted once (``test_setup_rows_come_in_conductors_order``: each JOIN right after its
fork's branch firsts, as Conductor's ForkJoinTaskMapper creates it); the other tests
compare the parent's rows by reference in that order (:func:`_by_ref`), each reference's
attempts in seq order; the retried ``st1``'s new attempt being the last row
(``tasks[7]``) is asserted by seq.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique
from tests.e2e.conductor.sub_workflow_shapes import (
    OWNER,
    SUB_WORKFLOW_INPUT,
    complete_leaf,
    first_task_scheduled,
    forked_task,
    integration_test_wf,
    leaf_retried,
    restart,
    retry,
    settle,
    settle_run,
    shape,
    sub_workflow_task,
    task_defs,
)

FORK, JOIN, SUB = "FORK", "JOIN", "SUB_WORKFLOW"


@dataclass
class Nested:
    parent_id: str
    child_id: str
    task1: str
    task2: str


#: the parent's task references in the order of Conductor's rows (``tasks[0..6]``)
REFS = ["outer_fork", "inner_fork", "st1", "t2", "inner_join", "t3", "outer_join"]


def _by_ref(run: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The parent's tasks as (ref, type, status) in the order of Conductor's rows, each
    reference's attempts in seq order (a retry's new attempt is the last row)."""
    rows = sorted(run["tasks"], key=lambda t: (REFS.index(t["referenceTaskName"]), t["seq"]))
    return [(t["referenceTaskName"], t["taskType"], t["status"]) for t in rows]


def _settle_parent(
    conductor: Conductor, workflow_id: str, status: str, rows: list[tuple[str, str, str]]
) -> dict[str, Any]:
    """The parent run once it has ``status`` and the task ``rows`` (by reference,
    :func:`_by_ref`); asserts both."""
    run = settle(conductor, workflow_id, lambda r: r["status"] == status and _by_ref(r) == rows)
    assert (run["status"], _by_ref(run)) == (status, rows), run.get("reasonForIncompletion")
    return run


def _parent(task2: str, sub: str, t2: str, joins: str) -> list[tuple[str, str, str]]:
    """The parent's seven tasks, the spec's ``tasks[0..6]``: outer FORK, inner FORK,
    ``st1`` (status ``sub``), ``t2`` and ``t3`` (``t2``), the JOINs (``joins``)."""
    return [
        ("outer_fork", FORK, "COMPLETED"),
        ("inner_fork", FORK, "COMPLETED"),
        ("st1", SUB, sub),
        ("t2", task2, t2),
        ("inner_join", JOIN, joins),
        ("t3", task2, t2),
        ("outer_join", JOIN, joins),
    ]


def _nested_fork_join_swf(name: str, task2: str) -> dict[str, Any]:
    """``nested_fork_join_swf.json``."""
    inner_fork = {
        "name": "inner_fork",
        "taskReferenceName": "inner_fork",
        "inputParameters": SUB_WORKFLOW_INPUT,
        "type": "FORK_JOIN",
        "forkTasks": [
            # the spec's "sub_workflow_task"; a name of its own, so no task definition
            # registered under that name by another test applies
            [sub_workflow_task("st1", unique("sub_workflow_task"))],
            [forked_task(task2, "t2")],
        ],
    }
    return {
        "name": name,
        "description": "nested_fork_join_swf",
        "version": 1,
        "tasks": [
            {
                "name": "outer_fork",
                "taskReferenceName": "outer_fork",
                "inputParameters": SUB_WORKFLOW_INPUT,
                "type": "FORK_JOIN",
                "forkTasks": [
                    [
                        inner_fork,
                        {
                            "name": "inner_join",
                            "taskReferenceName": "inner_join",
                            "type": "JOIN",
                            "joinOn": ["st1", "t2"],
                        },
                    ],
                    [forked_task(task2, "t3")],
                ],
            },
            {
                "name": "join",
                "taskReferenceName": "outer_join",
                "inputParameters": {},
                "type": "JOIN",
                "joinOn": ["inner_join", "t3"],
            },
        ],
        "inputParameters": ["param1", "param2", "subwf"],
        "schemaVersion": 2,
        "restartable": True,
        "workflowStatusListenerEnabled": False,
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
        "ownerEmail": OWNER,
    }


def _register(conductor: Conductor) -> tuple[str, str, str, str]:
    """``nested_fork_join_swf.json`` and ``simple_workflow_1_integration_test.json``
    under names of their own; ``integration_task_2`` with 0 retries (the spec's
    setup), ``integration_task_1`` as the harness registers it (1 retry, 120 s)."""
    task1, task2 = task_defs(conductor)
    nested, leaf = unique("nested_fork_join_swf"), unique("integration_test_wf")
    conductor.register(
        _nested_fork_join_swf(nested, task2),
        integration_test_wf(
            leaf,
            task1,
            task2,
            failureWorkflow="$workflow.input.failureWfName",
            workflowStatusListenerEnabled=False,
        ),
    )
    return nested, leaf, task1, task2


def _start(conductor: Conductor) -> tuple[str, str, str]:
    """Register and start the parent: (parent id, task1, task2)."""
    nested, leaf, task1, task2 = _register(conductor)
    parent_id = conductor.start(
        nested,
        {"param1": "p1 value", "param2": "p2 value", "subwf": leaf},
        correlation_id="retry_on_root_in_3level_wf",
    )
    return parent_id, task1, task2


def _nested_failed(conductor: Conductor) -> Nested:
    """The spec's ``setup()``: the parent and its child FAILED by the child's ``t2``."""
    parent_id, task1, task2 = _start(conductor)
    _settle_parent(
        conductor, parent_id, "RUNNING", _parent(task2, "IN_PROGRESS", "SCHEDULED", "IN_PROGRESS")
    )

    # the parent's t2 and t3
    conductor.poll_and_complete(task2, {"op": "task1.done"})
    conductor.poll_and_complete(task2, {"op": "task1.done"})
    run = _settle_parent(
        conductor, parent_id, "RUNNING", _parent(task2, "IN_PROGRESS", "COMPLETED", "IN_PROGRESS")
    )
    child_id = run["tasks"][[t["referenceTaskName"] for t in run["tasks"]].index("st1")][
        "subWorkflowId"
    ]
    assert child_id
    first_task_scheduled(conductor, child_id, task1)

    conductor.poll_and_complete(task1, {"op": "task1.done"})
    conductor.poll_and_fail(task2, "task2 failed")
    settle_run(conductor, child_id, "FAILED", [(task1, "COMPLETED"), (task2, "FAILED")])
    _settle_parent(
        conductor, parent_id, "FAILED", _parent(task2, "FAILED", "COMPLETED", "CANCELED")
    )
    return Nested(parent_id, child_id, task1, task2)


def _st1(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The parent's ``st1`` attempts, in seq order."""
    return [t for t in run["tasks"] if t["referenceTaskName"] == "st1"]


def _st1_retried(run: dict[str, Any]) -> dict[str, Any]:
    """The parent's two ``st1`` attempts: the first retried by the second, which is the
    last row (the spec's ``tasks[7]``); the second."""
    old, new = _st1(run)
    assert old["retried"] is True
    assert new["retriedTaskId"] == old["taskId"]
    assert run["tasks"][-1]["taskId"] == new["taskId"]
    return new


def _parent_complete(conductor: Conductor, nested: Nested) -> dict[str, Any]:
    """The spec's ``assertParentWorkflowIsComplete``."""
    return _settle_parent(
        conductor,
        nested.parent_id,
        "COMPLETED",
        _parent(nested.task2, "COMPLETED", "COMPLETED", "COMPLETED"),
    )


def _parent_resumed(conductor: Conductor, nested: Nested) -> None:
    """The parent RUNNING again, its SUB_WORKFLOW task IN_PROGRESS (in place: the same
    task, waiting for the same child run), its JOINs IN_PROGRESS."""
    run = _settle_parent(
        conductor,
        nested.parent_id,
        "RUNNING",
        _parent(nested.task2, "IN_PROGRESS", "COMPLETED", "IN_PROGRESS"),
    )
    sub = _st1(run)[0]
    assert sub["subWorkflowId"] == nested.child_id
    assert not sub.get("subworkflowChanged")


def test_setup_rows_come_in_conductors_order(conductor: Conductor) -> None:
    # setup() of every case: the parent's rows right after the start, in row order
    parent_id, _, task2 = _start(conductor)
    run = settle(conductor, parent_id, lambda r: len(r["tasks"]) >= 7)
    assert [t["referenceTaskName"] for t in run["tasks"]] == REFS
    assert shape(run) == [
        (FORK, "COMPLETED"),
        (FORK, "COMPLETED"),
        (SUB, "IN_PROGRESS"),
        (task2, "SCHEDULED"),
        (JOIN, "IN_PROGRESS"),
        (task2, "SCHEDULED"),
        (JOIN, "IN_PROGRESS"),
    ]


def test_restart_on_the_sub_workflow(conductor: Conductor) -> None:
    # "test restart on the sub workflow in a nested fork join workflow"
    nested = _nested_failed(conductor)
    restart(conductor, nested.child_id)

    # the same child run starts again, and its parent waits for it again
    first_task_scheduled(conductor, nested.child_id, nested.task1)
    _parent_resumed(conductor, nested)

    complete_leaf(conductor, nested.child_id, nested.task1, nested.task2)
    run = _parent_complete(conductor, nested)
    assert _st1(run)[0]["subWorkflowId"] == nested.child_id
    assert not _st1(run)[0].get("subworkflowChanged")


def test_restart_on_the_parent_workflow(conductor: Conductor) -> None:
    # "test restart on the parent workflow in a nested fork join workflow"
    nested = _nested_failed(conductor)
    restart(conductor, nested.parent_id)

    task2 = nested.task2
    _settle_parent(
        conductor,
        nested.parent_id,
        "RUNNING",
        _parent(task2, "IN_PROGRESS", "SCHEDULED", "IN_PROGRESS"),
    )
    conductor.poll_and_complete(task2, {"op": "task2.done"})
    conductor.poll_and_complete(task2, {"op": "task2.done"})
    run = _settle_parent(
        conductor,
        nested.parent_id,
        "RUNNING",
        _parent(task2, "IN_PROGRESS", "COMPLETED", "IN_PROGRESS"),
    )

    # a new instance of the sub workflow
    new_child = _st1(run)[0]["subWorkflowId"]
    assert new_child and new_child != nested.child_id
    first_task_scheduled(conductor, new_child, nested.task1)
    complete_leaf(conductor, new_child, nested.task1, nested.task2)

    run = _parent_complete(conductor, nested)
    assert _st1(run)[0]["subWorkflowId"] == new_child
    assert not _st1(run)[0].get("subworkflowChanged")


def test_retry_on_the_parent_workflow(conductor: Conductor) -> None:
    # "test retry on the parent workflow in a nested fork join workflow"
    nested = _nested_failed(conductor)
    retry(conductor, nested.parent_id)

    task2 = nested.task2

    def retried(sub: str, joins: str) -> list[tuple[str, str, str]]:
        # the spec's tasks[0..6] with st1 FAILED, and tasks[7]: st1's new attempt
        rows = _parent(task2, "FAILED", "COMPLETED", joins)
        return [*rows[:3], ("st1", SUB, sub), *rows[3:]]

    run = _settle_parent(
        conductor, nested.parent_id, "RUNNING", retried("IN_PROGRESS", "IN_PROGRESS")
    )
    new = _st1_retried(run)
    assert len(run["tasks"]) == 8

    # a new instance of the sub workflow
    new_child = new["subWorkflowId"]
    assert new_child and new_child != nested.child_id
    first_task_scheduled(conductor, new_child, nested.task1)
    complete_leaf(conductor, new_child, nested.task1, nested.task2)

    run = _settle_parent(
        conductor, nested.parent_id, "COMPLETED", retried("COMPLETED", "COMPLETED")
    )
    _st1_retried(run)


@pytest.mark.parametrize(
    "retried", ["parent", "sub_workflow"], ids=["with_resume_on_the_parent", "on_the_sub_workflow"]
)
def test_retry_retries_the_sub_workflows_task_in_place(conductor: Conductor, retried: str) -> None:
    # "test retry with resume on the parent workflow in a nested fork join workflow" and
    # "test retry on the sub workflow in a nested fork join workflow"
    nested = _nested_failed(conductor)
    if retried == "parent":
        retry(conductor, nested.parent_id, resume=True)
    else:
        retry(conductor, nested.child_id)

    leaf_retried(conductor, nested.child_id, nested.task1, nested.task2)
    _parent_resumed(conductor, nested)

    conductor.poll_and_complete(nested.task2, {"op": "task2.done"})
    leaf_retried(conductor, nested.child_id, nested.task1, nested.task2, "COMPLETED")
    run = _parent_complete(conductor, nested)
    assert _st1(run)[0]["subWorkflowId"] == nested.child_id
