"""The end of a run, recorded by the engine process that hosts the activities in the
work item that reaches it (engine/runtime/interpreter.py, ``LocalFinish``), as the
finish activity records it."""

from __future__ import annotations

from typing import Any

from durabletask.client import OrchestrationStatus

from engine.language.definitions import RunStatus, TaskStatus
from engine.runtime.activity_io import ACTIVITY_FINISH
from protocol.runs import ORCHESTRATOR_NAME, RunInput

_ONE_STEP = {
    "name": "one_step_end",
    "version": 1,
    "tasks": [
        {
            "name": "set",
            "taskReferenceName": "s",
            "type": "SET_VARIABLE",
            "inputParameters": {"seen": "${workflow.input.n}"},
        }
    ],
    "outputParameters": {"n": "${workflow.input.n}", "seen": "${workflow.variables.seen}"},
}


def test_a_run_started_without_a_row_gets_one_with_its_end(platform: Any) -> None:
    """A run scheduled straight on the durable backend (no run row, as a client of the
    backend may start one): its end creates the row and ends it with the output."""
    platform.register(_ONE_STEP)
    platform.client.schedule_new_orchestration(
        ORCHESTRATOR_NAME,
        input=RunInput(name="one_step_end", version=1, input={"n": 7}).wire(),
        instance_id="no-row-run",
    )

    state = platform.client.wait_for_orchestration_completion("no-row-run", timeout=30)

    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    row = platform.services.run_store.get_run("no-row-run")
    assert row is not None
    assert (row.name, row.version, row.status) == ("one_step_end", 1, RunStatus.COMPLETED)
    assert row.output == {"n": 7, "seen": 7}
    assert row.end_time is not None
    assert [t.status for t in platform.services.run_store.list_tasks("no-row-run")] == [
        TaskStatus.COMPLETED
    ]


def test_a_run_ended_in_its_last_work_item_has_no_finish_activity(platform: Any) -> None:
    """stepway dev's engine hosts the activities: the run's end costs no activity."""
    platform.register(_ONE_STEP)
    workflow_id = platform.start("one_step_end", {"n": 3})

    row = platform.wait(workflow_id)

    assert row.status == RunStatus.COMPLETED and row.output == {"n": 3, "seen": 3}
    scheduled = [
        getattr(event, "name", None)
        for event in platform.client.get_orchestration_history(workflow_id)
        if type(event).__name__ == "TaskScheduledEvent"
    ]
    assert scheduled == []


def test_a_failed_run_ended_in_its_work_item_starts_its_failure_workflow(platform: Any) -> None:
    """The end recorded in the work item does all the finish activity does: the failure
    workflow the definition names is started (Conductor's failureWorkflow)."""
    platform.register(_ONE_STEP)  # the failure workflow
    platform.register_task_def({"name": "breaks", "retryCount": 0, "responseTimeoutSeconds": 60})
    platform.register(
        {
            "name": "fails_once",
            "version": 1,
            "failureWorkflow": "one_step_end",
            "tasks": [{"name": "breaks", "taskReferenceName": "b", "type": "WORKER"}],
        }
    )
    workflow_id = platform.start("fails_once", {"n": 5})
    platform.complete(platform.take("breaks"), status="FAILED", reason="broken")

    state = platform.client.wait_for_orchestration_completion(workflow_id, timeout=30)
    assert state is not None
    row = platform.services.run_store.get_run(workflow_id)
    assert row is not None and row.status == RunStatus.FAILED
    scheduled = [
        getattr(event, "name", None)
        for event in platform.client.get_orchestration_history(workflow_id)
        if type(event).__name__ == "TaskScheduledEvent"
    ]
    assert ACTIVITY_FINISH not in scheduled, scheduled
    failure = platform.client.wait_for_orchestration_completion(
        f"{workflow_id}-failure", timeout=30
    )
    assert failure is not None and failure.runtime_status == OrchestrationStatus.COMPLETED
    failure_row = platform.services.run_store.get_run(f"{workflow_id}-failure")
    assert failure_row is not None and failure_row.status == RunStatus.COMPLETED
    assert failure_row.input["workflowId"] == workflow_id
    assert failure_row.input["failureStatus"] == "FAILED"
