"""A worker task given back with ``callbackAfterSeconds`` longer than its
``responseTimeoutSeconds`` does not time out while it waits to be handed out again:
conductor-oss sets it SCHEDULED (no response timeout applies) and, once a worker holds
it again, allows ``responseTimeoutSeconds`` plus ``callbackAfterSeconds`` from the last
update (DeciderService.isResponseTimedOut). A worker that then does not answer still
times it out."""

from __future__ import annotations

import time

import pytest

from tests.e2e.conductor.harness import Conductor

pytestmark = pytest.mark.timeout(120)


def test_a_callback_longer_than_the_response_timeout_is_waited_out(conductor: Conductor) -> None:
    task_type, name = conductor.one_task_workflow(
        "long_poll", responseTimeoutSeconds=1, retryCount=0, timeoutSeconds=0
    )
    workflow_id = conductor.start(name, version=1)
    polled = conductor.poll_one(task_type)
    r = conductor.update(polled, "IN_PROGRESS", {"checked": 1}, callbackAfterSeconds=3)
    assert r.status_code == 200, r.text
    time.sleep(2)  # twice the response timeout: before this change the run TIMED_OUT here
    run = conductor.run(workflow_id)
    # waiting to be handed out again: SCHEDULED, as conductor-oss shows it
    assert (run["status"], run["tasks"][0]["status"]) == ("RUNNING", "SCHEDULED")

    again = conductor.poll_one(task_type, seconds=5)
    assert again["taskId"] == polled["taskId"]
    # held and not answered: the response timeout (plus the callback) ends it
    run = conductor.wait_status(workflow_id, "TIMED_OUT", seconds=15)
    assert run["tasks"][0]["status"] == "TIMED_OUT"
    assert "responseTimeout" in (run["tasks"][0]["reasonForIncompletion"] or "")


def test_the_start_time_a_run_reads_stays_the_hand_out(conductor: Conductor) -> None:
    """The check that finds the task waiting out its callback moves only its response
    deadline: ``${t.startTime}`` stays the hand-out, as the task row shows it."""
    task_type, name = conductor.one_task_workflow(
        "start_read", responseTimeoutSeconds=1, retryCount=0, timeoutSeconds=0
    )
    conductor.register(
        {
            "name": name,
            "version": 2,
            "tasks": [{"name": task_type, "taskReferenceName": "t", "type": "SIMPLE"}],
            "outputParameters": {"started": "${t.startTime}"},
        }
    )
    workflow_id = conductor.start(name, version=2)
    polled = conductor.poll_one(task_type)
    r = conductor.update(polled, "IN_PROGRESS", {}, callbackAfterSeconds=3)
    assert r.status_code == 200, r.text
    time.sleep(2)  # the response deadline passed: the run checked the task
    assert conductor.update(polled, "COMPLETED", {"done": True}).status_code == 200
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["output"]["started"] == run["tasks"][0]["startTime"]
