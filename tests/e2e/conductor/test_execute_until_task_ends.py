"""``POST /workflow/execute/{name}/{version}?waitUntilTaskRef=...`` when the task it waits
for is a worker's and the worker fails it: conductor-oss answers after the decision that
took the task's end in, so a failure that fails the run answers the run FAILED, and one
that is retried answers with the retry scheduled. A worker's update ends the task's row
before the run's interpreter decides; the answer waits for that decision
(control_plane/services/signals.py, ``RunWaits._undecided``)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def _execute_while_a_worker_fails(
    conductor: Conductor, name: str, task_type: str
) -> dict[str, Any]:
    """Execute ``name`` waiting for its task ``t``; meanwhile a worker polls the task and
    fails it. The answer."""
    answer: dict[str, Any] = {}

    def execute() -> None:
        r = conductor.http.post(
            f"/api/workflow/execute/{name}/1",
            params={"requestId": str(uuid.uuid4()), "waitUntilTaskRef": "t", "waitForSeconds": 20},
            json={"name": name, "version": 1, "input": {}},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        answer.update(r.json())

    caller = threading.Thread(target=execute)
    caller.start()
    conductor.poll_and_fail(task_type, "the worker gave up")
    caller.join(30)
    assert answer, "execute did not answer"
    return answer


def test_a_failure_that_fails_the_run_answers_the_run_failed(conductor: Conductor) -> None:
    task_type, name = conductor.one_task_workflow("exec_fail", retryCount=0)
    answer = _execute_while_a_worker_fails(conductor, name, task_type)
    assert answer["status"] == "FAILED", answer
    assert answer["signalTimeout"] is False
    assert [t["status"] for t in answer["tasks"]] == ["FAILED"]


def test_a_failure_that_is_retried_answers_with_the_retry(conductor: Conductor) -> None:
    task_type, name = conductor.one_task_workflow(
        "exec_retry", retryCount=1, retryLogic="FIXED", retryDelaySeconds=0
    )
    answer = _execute_while_a_worker_fails(conductor, name, task_type)
    assert answer["status"] == "RUNNING", answer
    assert answer["signalTimeout"] is False
    assert [t["status"] for t in answer["tasks"]] == ["FAILED", "SCHEDULED"]
    conductor.poll_and_complete(task_type)
    assert conductor.wait_status(answer["workflowId"], "COMPLETED")["status"] == "COMPLETED"
