"""Workflow and task timeouts, optional tasks, over the real gRPC backend."""

from __future__ import annotations

import time
from typing import Any

import pytest

from engine.language.definitions import RunStatus, TaskStatus
from engine.ports.run_store import TaskUpdate


def _one_worker(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "tasks": [{"name": "job", "taskReferenceName": "job", "type": "WORKER"}],
        **extra,
    }


def _depth(platform: Any, queue: str) -> tuple[int, int, int]:
    depth = platform.services.queue.depth(queue)
    return depth.active, depth.scheduled, depth.deferred


@pytest.mark.slow
def test_workflow_timeout_time_out_wf(platform: Any) -> None:
    platform.register_task_def({"name": "job", "retryCount": 0})
    platform.register(_one_worker("wf_timeout", timeoutSeconds=2, timeoutPolicy="TIME_OUT_WF"))
    started = time.monotonic()
    workflow_id = platform.start("wf_timeout")
    body = platform.take("job")  # taken, never answered
    run = platform.wait(workflow_id)
    assert time.monotonic() - started >= 1.9
    assert run.status == RunStatus.TIMED_OUT
    assert "timed out after 2s" in (run.reason_for_incompletion or "")
    row = platform.tasks(workflow_id)["job"]
    assert row.status == TaskStatus.CANCELED
    assert _depth(platform, "job") == (0, 0, 0)
    platform.complete(body, {"late": True})  # a late answer changes nothing
    assert platform.tasks(workflow_id)["job"].status == TaskStatus.CANCELED


@pytest.mark.slow
def test_workflow_timeout_alert_only(platform: Any) -> None:
    platform.register_task_def({"name": "job", "retryCount": 0})
    platform.register(_one_worker("wf_alert", timeoutSeconds=1, timeoutPolicy="ALERT_ONLY"))
    workflow_id = platform.start("wf_alert")
    body = platform.take("job")
    time.sleep(2)
    assert platform.services.run_store.get_run(workflow_id).status == RunStatus.RUNNING
    platform.complete(body, {"done": 1})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output == {"done": 1}
    logs = [entry.log for entry in platform.services.run_store.list_task_logs(workflow_id)]
    assert logs == ["WARNING: workflow timeout of 1s elapsed (ALERT_ONLY)"]


@pytest.mark.slow
def test_response_timeout_retries_when_the_worker_dies(platform: Any) -> None:
    platform.register_task_def(
        {
            "name": "job",
            "retryCount": 1,
            "retryDelaySeconds": 0,
            "responseTimeoutSeconds": 2,
            "timeoutPolicy": "RETRY",
        }
    )
    platform.register(_one_worker("response_timeout"))
    workflow_id = platform.start("response_timeout")
    first = platform.take("job")  # the worker took it and died
    taken = time.monotonic()
    second = platform.take("job", timeout=10)
    assert time.monotonic() - taken >= 1.9
    assert second["attempt"] == 2 and second["taskId"] != first["taskId"]
    assert _depth(platform, "job") == (0, 0, 1)  # attempt 1's message settled
    platform.complete(second, {"ok": True})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    rows = platform.services.run_store.list_tasks(workflow_id)
    assert [(r.status, r.attempt, r.retry_count) for r in rows] == [
        (TaskStatus.TIMED_OUT, 1, 0),
        (TaskStatus.COMPLETED, 2, 1),
    ]
    assert _depth(platform, "job") == (0, 0, 0)


def test_response_timeout_without_a_started_event(platform: Any) -> None:
    """The run is not told of the hand-out: when the earliest response deadline is due it
    reads the attempt from the run store, finds it taken and unanswered, and retries."""
    platform.register_task_def(
        {"name": "job", "retryCount": 1, "retryDelaySeconds": 0, "responseTimeoutSeconds": 2}
    )
    platform.register(_one_worker("response_timeout_quiet"))
    workflow_id = platform.start("response_timeout_quiet")
    first = platform.take("job", signal=False)  # the worker took it and died
    second = platform.take("job", timeout=10, signal=False)
    assert second["attempt"] == 2 and second["taskId"] != first["taskId"]
    platform.complete(second, {"ok": True})
    assert platform.wait(workflow_id).status == RunStatus.COMPLETED
    rows = platform.services.run_store.list_tasks(workflow_id)
    assert [(r.status, r.attempt) for r in rows] == [
        (TaskStatus.TIMED_OUT, 1),
        (TaskStatus.COMPLETED, 2),
    ]
    assert "responseTimeout: 2 exceeded" in (rows[0].reason_for_incompletion or "")


@pytest.mark.slow
def test_a_lease_extension_moves_the_response_timeout_without_an_event(platform: Any) -> None:
    """A worker that extends its lease keeps its attempt past the first response
    deadline: the run reads the extension (the lease's new start) from the run store."""
    platform.register_task_def(
        {"name": "job", "retryCount": 1, "retryDelaySeconds": 0, "responseTimeoutSeconds": 3}
    )
    platform.register(_one_worker("lease_extension"))
    workflow_id = platform.start("lease_extension")
    body = platform.take("job", signal=False)
    time.sleep(2)
    now = int(time.time() * 1000)
    store = platform.services.run_store
    assert store.extend_lease(
        body["taskId"], body["attempt"], "test-worker", expires_at=now + 3000, now=now
    )
    time.sleep(2)  # past the first deadline, before the extended one
    platform.complete(body, {"ok": True})
    assert platform.wait(workflow_id).status == RunStatus.COMPLETED
    [row] = store.list_tasks(workflow_id)
    assert (row.status, row.attempt) == (TaskStatus.COMPLETED, 1)


@pytest.mark.slow
def test_poll_timeout_spares_a_task_taken_without_a_started_event(platform: Any) -> None:
    platform.register_task_def(
        {"name": "job", "retryCount": 0, "pollTimeoutSeconds": 1, "timeoutPolicy": "TIME_OUT_WF"}
    )
    platform.register(_one_worker("poll_timeout_taken"))
    workflow_id = platform.start("poll_timeout_taken")
    body = platform.take("job", signal=False)
    time.sleep(2)  # past the poll deadline: the run finds the task taken
    platform.complete(body, {"ok": True})
    assert platform.wait(workflow_id).status == RunStatus.COMPLETED
    assert platform.tasks(workflow_id)["job"].status == TaskStatus.COMPLETED


def test_a_result_whose_event_was_lost_is_read_when_the_deadline_is_due(platform: Any) -> None:
    """The result is recorded but its event never reaches the run (the Task API could not
    raise it): at the response deadline the run reads the result instead of timing out."""
    platform.register_task_def({"name": "job", "retryCount": 0, "responseTimeoutSeconds": 1})
    platform.register(_one_worker("lost_result", outputParameters={"ok": "${job.output.ok}"}))
    workflow_id = platform.start("lost_result")
    body = platform.take("job", signal=False)
    now = int(time.time() * 1000)
    store = platform.services.run_store
    assert store.finish_task(
        body["taskId"],
        body["attempt"],
        TaskUpdate(status=TaskStatus.COMPLETED, output_data={"ok": True}, end_time=now),
        now,
        holder="test-worker",
    )
    run = platform.wait(workflow_id)
    assert (run.status, run.output) == (RunStatus.COMPLETED, {"ok": True})
    assert platform.tasks(workflow_id)["job"].status == TaskStatus.COMPLETED


@pytest.mark.slow
def test_poll_timeout(platform: Any) -> None:
    platform.register_task_def(
        {"name": "job", "retryCount": 0, "pollTimeoutSeconds": 1, "timeoutPolicy": "TIME_OUT_WF"}
    )
    platform.register(_one_worker("poll_timeout"))
    workflow_id = platform.start("poll_timeout")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.TIMED_OUT
    row = platform.tasks(workflow_id)["job"]
    assert row.status == TaskStatus.TIMED_OUT
    assert "Task poll timed out" in (row.reason_for_incompletion or "")
    assert run.failed_reference_task_names == ["job"]


def _run_optional(platform: Any) -> str:
    platform.register_task_def({"name": "maybe", "retryCount": 0})
    platform.register_task_def({"name": "job", "retryCount": 0})
    platform.register(
        {
            "name": "optional",
            "tasks": [
                {"name": "maybe", "taskReferenceName": "maybe", "type": "WORKER", "optional": True},
                {
                    "name": "job",
                    "taskReferenceName": "job",
                    "type": "WORKER",
                    "inputParameters": {
                        "why": "${maybe.reasonForIncompletion}",
                        "status": "${maybe.status}",
                    },
                },
            ],
        }
    )
    workflow_id: str = platform.start("optional")
    platform.complete(platform.take("maybe"), status="FAILED", reason="not today")
    job = platform.take("job")
    assert job["input"] == {"why": "not today", "status": "COMPLETED_WITH_ERRORS"}
    platform.complete(job, {"ok": True})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert platform.tasks(workflow_id)["job"].status == TaskStatus.COMPLETED
    # the failed attempt's message was settled (dead-lettered with the reason)
    assert _depth(platform, "maybe") == (0, 0, 0)
    return workflow_id


def test_optional_task_failure_lets_the_run_continue(platform: Any) -> None:
    workflow_id = _run_optional(platform)
    row = platform.tasks(workflow_id)["maybe"]
    assert row.reason_for_incompletion == "not today"
    # the worker's FAILED is written first; the engine's verdict replaces it
    assert row.status == TaskStatus.COMPLETED_WITH_ERRORS
