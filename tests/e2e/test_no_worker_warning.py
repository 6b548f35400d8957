"""A WORKER task queued for a type no worker has polled lately says so in its task log
(engine/runtime/activities.py, the dispatch activity), so that a run waiting for a worker
that was never deployed is told apart from one waiting for a busy worker."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from engine.ports.run_store import TaskRecord


def _one_step(platform: Any, task_type: str) -> str:
    platform.register_task_def({"name": task_type, "retryCount": 0, "responseTimeoutSeconds": 60})
    platform.register(
        {
            "name": f"{task_type}_flow",
            "version": 1,
            "tasks": [{"name": task_type, "taskReferenceName": "w", "type": "WORKER"}],
        }
    )
    workflow_id: str = platform.start(f"{task_type}_flow")
    return workflow_id


def _queued(platform: Any, workflow_id: str) -> TaskRecord:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = platform.tasks(workflow_id).get("w")
        if row is not None and row.queue_name:
            return row  # type: ignore[no-any-return]
        time.sleep(0.02)
    raise AssertionError("the task was never queued")


def _logs(platform: Any, row: TaskRecord) -> list[str]:
    return [entry.log for entry in platform.services.run_store.list_task_logs(row.task_id)]


def _logged(platform: Any, row: TaskRecord) -> list[str]:
    """The task's log once it has one (the dispatch writes it after queueing the task)."""
    deadline = time.monotonic() + 20
    while not (logs := _logs(platform, row)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return logs


def test_a_task_of_a_type_no_worker_polled_is_logged_with_a_warning(platform: Any) -> None:
    workflow_id = _one_step(platform, "never_polled")

    row = _queued(platform, workflow_id)

    assert _logged(platform, row) == [
        "WARNING: no worker polled task type 'never_polled' in the last 10 s; task queued "
        "on 'never_polled'"
    ]
    platform.work("never_polled", lambda _: {})
    assert platform.wait(workflow_id).status.value == "COMPLETED"


def test_a_task_of_a_type_a_worker_polls_is_queued_without_one(platform: Any) -> None:
    platform.services.run_store.record_poll("polled", None, "w1", int(time.time() * 1000))
    workflow_id = _one_step(platform, "polled")

    row = _queued(platform, workflow_id)
    platform.work("polled", lambda _: {})
    assert platform.wait(workflow_id).status.value == "COMPLETED"

    time.sleep(0.3)  # the dispatch's last step, had it found no poll, is long over
    assert _logs(platform, row) == []


def test_a_burst_of_such_tasks_is_one_line_of_the_process_log(
    platform: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Each task's log says it; the process log once per window (log_limits.py), not
    once per task as a burst of starts while a type's workers are down would."""
    caplog.set_level(logging.WARNING, logger="engine.runtime.activities")
    first = _one_step(platform, "burst_never_polled")
    rows = [_queued(platform, first)]
    rows += [_queued(platform, platform.start("burst_never_polled_flow")) for _ in range(3)]

    for row in rows:
        assert _logged(platform, row) == [
            "WARNING: no worker polled task type 'burst_never_polled' in the last 10 s; "
            "task queued on 'burst_never_polled'"
        ]
    lines = [r.getMessage() for r in caplog.records if "'burst_never_polled'" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{first}: no worker polled task type 'burst_never_polled'")
