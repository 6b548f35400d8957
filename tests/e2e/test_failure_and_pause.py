"""failureWorkflow, and pausing a run (DTS suspend/resume), over the real gRPC backend."""

from __future__ import annotations

import time
from typing import Any

from durabletask.client import OrchestrationStatus

from engine.language.definitions import RunStatus, TaskStatus


def test_failed_run_starts_its_failure_workflow(platform: Any) -> None:
    platform.register_task_def({"name": "doomed", "retryCount": 0})
    platform.register(
        {
            "name": "cleanup",
            "tasks": [
                {
                    "name": "note",
                    "taskReferenceName": "note",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"failed": "${workflow.input.workflowId}"},
                }
            ],
            "outputParameters": {
                "failed": "${workflow.variables.failed}",
                "status": "${workflow.input.failureStatus}",
            },
        }
    )
    platform.register(
        {
            "name": "fragile",
            "failureWorkflow": "cleanup",
            "tasks": [{"name": "doomed", "taskReferenceName": "doomed", "type": "WORKER"}],
        }
    )
    workflow_id = platform.start("fragile", {"order": 42})
    body = platform.take("doomed")
    platform.complete(body, status="FAILED", reason="disk full")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert run.failed_reference_task_names == ["doomed"]
    failure_id = f"{workflow_id}-failure"
    failure = platform.wait(failure_id)
    assert failure.name == "cleanup"
    # the seed's input (docs: workflowId, reason, failedTaskId, failureStatus,
    # workflowInput), and Conductor's terminateWorkflow's: the run's input merged in,
    # failureTaskId, failedWorkflow
    assert failure.input == {
        "order": 42,
        "workflowId": workflow_id,
        "reason": run.reason_for_incompletion,
        "failedTaskId": body["taskId"],
        "failureTaskId": body["taskId"],
        "failureStatus": "FAILED",
        "workflowInput": {"order": 42},
        "failedWorkflow": {
            "workflowId": workflow_id,
            "workflowName": "fragile",
            "workflowVersion": 1,
            "status": "FAILED",
            "reasonForIncompletion": run.reason_for_incompletion,
            "correlationId": None,
        },
    }
    # Conductor names the failure run in the failed run's output
    assert run.output == {"conductor.failure_workflow": failure_id}
    assert "disk full" in (run.reason_for_incompletion or "")
    assert failure.status == RunStatus.COMPLETED
    assert failure.output == {"failed": workflow_id, "status": "FAILED"}


def test_suspended_run_does_not_progress_until_resumed(platform: Any) -> None:
    platform.register_task_def({"name": "first", "retryCount": 0})
    platform.register_task_def({"name": "second", "retryCount": 0})
    platform.register(
        {
            "name": "pausable",
            "tasks": [
                {"name": "first", "taskReferenceName": "first", "type": "WORKER"},
                {
                    "name": "second",
                    "taskReferenceName": "second",
                    "type": "WORKER",
                    "inputParameters": {"v": "${first.output.v}"},
                },
            ],
        }
    )
    workflow_id = platform.start("pausable")
    body = platform.take("first")
    platform.client.suspend_orchestration(workflow_id)
    deadline = time.monotonic() + 10
    while platform.client.get_orchestration_state(workflow_id).runtime_status != (
        OrchestrationStatus.SUSPENDED
    ):
        assert time.monotonic() < deadline, "never suspended"
        time.sleep(0.05)
    platform.complete(body, {"v": 7})
    time.sleep(1.5)
    state = platform.client.get_orchestration_state(workflow_id)
    assert state.runtime_status == OrchestrationStatus.SUSPENDED
    assert platform.services.run_store.get_run(workflow_id).status == RunStatus.RUNNING
    assert "second" not in platform.tasks(workflow_id)
    assert platform.services.queue.depth("second").active == 0

    platform.client.resume_orchestration(workflow_id)
    second = platform.take("second")
    assert second["input"] == {"v": 7}
    platform.complete(second, {"done": True})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output == {"done": True}
    rows = platform.tasks(workflow_id)
    assert rows["first"].status == rows["second"].status == TaskStatus.COMPLETED
