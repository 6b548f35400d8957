"""A WORKER task queued, and a step's rows recorded, in the orchestration's work item that
reaches them, where the engine hosts the activities too (engine/runtime/interpreter.py,
``LocalDispatch``, ``LocalRecord``), on the embedded backend over its gRPC protocol: no
dispatch or record activity in the history, replays (with every work item replayed in
full) that follow it, and a dispatch that fails there taken over by the dispatch
activity."""

from __future__ import annotations

from typing import Any

import pytest
from durabletask import history

from engine.language.definitions import RunStatus, TaskStatus
from engine.ports.run_store import RunStoreUnavailable
from engine.runtime.activities import RunActivities
from engine.runtime.activity_io import (
    ACTIVITY_DISPATCH,
    ACTIVITY_RECORD,
    DispatchInput,
    DispatchResult,
)

STEPS = 3


def _register(platform: Any) -> None:
    platform.register_task_def({"name": "step", "retryCount": 0})
    platform.register(
        {
            "name": "three_workers",
            "version": 1,
            "tasks": [
                {
                    "name": "step",
                    "taskReferenceName": f"s{i}",
                    "type": "WORKER",
                    "inputParameters": {"i": i},
                }
                for i in range(STEPS)
            ],
            "outputParameters": {"last": f"${{s{STEPS - 1}.output.i}}"},
        }
    )


def _run(platform: Any) -> str:
    workflow_id: str = platform.start("three_workers")
    for _ in range(STEPS):
        platform.work("step", lambda task_input: {"i": task_input["i"]})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"last": STEPS - 1}
    rows = platform.tasks(workflow_id)
    assert {ref: (row.status, row.attempt) for ref, row in rows.items()} == {
        f"s{i}": (TaskStatus.COMPLETED, 1) for i in range(STEPS)
    }
    return workflow_id


def _activities(platform: Any, workflow_id: str) -> list[str]:
    return [
        event.name
        for event in platform.client.get_orchestration_history(workflow_id)
        if isinstance(event, history.TaskScheduledEvent)
    ]


def test_worker_tasks_are_queued_by_their_work_items_and_replays_follow(platform: Any) -> None:
    """Every work item replayed in full (no sessions): each replays the dispatches the
    work items before it did, and the run completes with no dispatch activity."""
    platform.engine.sessions.capacity = 0
    _register(platform)

    workflow_id = _run(platform)

    assert ACTIVITY_DISPATCH not in _activities(platform, workflow_id)
    assert platform.engine.sessions.misses >= STEPS  # each work item a full replay


def test_a_dispatch_that_fails_in_its_work_item_goes_to_the_dispatch_activity(
    platform: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run store refuses the second step's first dispatch (the one in the work item):
    the dispatch activity queues it with its retries, and the run goes on; the other
    steps are queued in their work items."""
    _register(platform)
    dispatch = RunActivities._dispatch
    refused: list[int] = []

    def once_refused(
        self: RunActivities, data: DispatchInput, traceparent: str | None = None
    ) -> DispatchResult:
        if data.task.ref == "s1" and not refused:
            refused.append(1)
            raise RunStoreUnavailable("locked")
        return dispatch(self, data, traceparent)

    monkeypatch.setattr(RunActivities, "_dispatch", once_refused)

    workflow_id = _run(platform)

    assert refused == [1]
    assert _activities(platform, workflow_id).count(ACTIVITY_DISPATCH) == 1


def test_the_rows_of_steps_with_no_io_are_recorded_by_their_work_items(platform: Any) -> None:
    """Two approvals and a fork whose branches end apart: each step's rows are written by
    its work item (no record activity), with every work item replayed in full."""
    platform.engine.sessions.capacity = 0
    platform.register_task_def({"name": "step", "retryCount": 0})
    platform.register(
        {
            "name": "approvals",
            "version": 1,
            "tasks": [
                {"name": "approve", "taskReferenceName": "h1", "type": "HUMAN"},
                {
                    "name": "fork",
                    "taskReferenceName": "f",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [{"name": "approve", "taskReferenceName": "h2", "type": "HUMAN"}],
                        [{"name": "step", "taskReferenceName": "w", "type": "WORKER"}],
                    ],
                },
                {"name": "join", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["h2", "w"]},
            ],
            "outputParameters": {"by": "${h1.output.by}", "then": "${h2.output.by}"},
        }
    )
    workflow_id = platform.start("approvals")
    platform.complete_ref(workflow_id, "h1", {"by": "ann"})
    platform.work("step", lambda task_input: {})  # the branch ends; the JOIN waits for h2
    platform.complete_ref(workflow_id, "h2", {"by": "bob"})
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"by": "ann", "then": "bob"}
    rows = platform.tasks(workflow_id)
    assert {ref: rows[ref].status for ref in ("h1", "h2", "w", "j")} == dict.fromkeys(
        ("h1", "h2", "w", "j"), TaskStatus.COMPLETED
    )
    assert ACTIVITY_RECORD not in _activities(platform, workflow_id)
