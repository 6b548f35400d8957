"""Timeout rules as Conductor's DeciderService applies them (issue 12, point 2).

* ``responseTimeoutSeconds``: an IN_PROGRESS attempt with no update for that long is
  TIMED_OUT whatever the ``timeoutPolicy`` (``isResponseTimedOut`` + ``timeoutTask``) and
  retried per ``retryCount`` (``retry``); a retry is a new task with ``retryCount`` + 1.
  When no retry is left the run ends TIMED_OUT.
* ``timeoutSeconds``: governed by ``timeoutPolicy`` (``timeoutTaskWithTimeoutPolicy``):
  RETRY times the attempt out and retries it, TIME_OUT_WF ends the run TIMED_OUT.
* the workflow's ``timeoutSeconds`` with TIME_OUT_WF ends the run TIMED_OUT and cancels
  its tasks; ``retry`` of such a run schedules the canceled task again.

Scenarios from the test-harness specs SimpleWorkflowSpec ("Test Simple Workflow with
response timeout") and WorkflowAndTaskConfigurationSpec ("Test simple workflow with task
time out configuration", "Test workflow timeout configurations", "Test retrying a timed
out workflow due to workflow timeout"), with timeouts of one or two seconds.
"""

from __future__ import annotations

import pytest

from tests.e2e.conductor.harness import Conductor, simple, statuses, unique, workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _taskdef(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "ownerEmail": "test@example.com", "retryDelaySeconds": 0, **fields}


@pytest.mark.parametrize("policy", ["RETRY", "TIME_OUT_WF", "ALERT_ONLY"])
def test_a_dead_workers_task_goes_to_another_worker_after_the_response_timeout(
    conductor: Conductor, policy: str
) -> None:
    """The must-show of issue 12: worker A takes the task and dies; after
    ``responseTimeoutSeconds`` worker B gets it, and the run completes with B's result,
    under every ``timeoutPolicy``."""
    task_type, name = unique("rt_task"), unique("rt_wf")
    conductor.taskdefs(
        _taskdef(task_type, responseTimeoutSeconds=1, retryCount=1, timeoutPolicy=policy)
    )
    conductor.register(
        workflow(name, [simple(task_type, "t1")], outputParameters={"by": "${t1.output.by}"})
    )
    workflow_id = conductor.start(name)

    first = conductor.poll_one(task_type, "worker-a")  # ... and worker A dies
    second = conductor.poll_one(task_type, "worker-b")
    assert second["workflowInstanceId"] == workflow_id
    assert second["retryCount"] == 1
    conductor.complete(second, {"by": "worker-b"})

    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert run["output"] == {"by": "worker-b"}
    assert first["retryCount"] == 0


@pytest.mark.xfail(strict=True, reason="issue 12: task JSON lacks retriedTaskId")
def test_a_response_timeout_times_out_the_attempt_and_schedules_a_new_task(
    conductor: Conductor,
) -> None:
    """SimpleWorkflowSpec "Test Simple Workflow with response timeout"."""
    task_type, second_type, name = unique("task_rt"), unique("task_2"), unique("RTOWF")
    conductor.taskdefs(
        _taskdef(task_type, responseTimeoutSeconds=1, retryCount=1, timeoutPolicy="TIME_OUT_WF")
    )
    conductor.register(workflow(name, [simple(task_type, "task_rt"), simple(second_type, "t2")]))
    workflow_id = conductor.start(name)
    run = conductor.wait_tasks(workflow_id, 1)
    assert (run["status"], statuses(run)) == ("RUNNING", ["SCHEDULED"])

    first = conductor.poll_one(task_type, "worker-a")
    assert first["status"] == "IN_PROGRESS"
    assert conductor.poll(task_type, "worker-a", seconds=0) is None

    run = conductor.wait_tasks(workflow_id, 2)
    assert run["status"] == "RUNNING"
    assert statuses(run) == ["TIMED_OUT", "SCHEDULED"]
    assert run["tasks"][0]["taskId"] == first["taskId"]
    assert run["tasks"][1]["retriedTaskId"] == first["taskId"]
    assert run["tasks"][1]["retryCount"] == 1

    conductor.poll_and_complete(task_type, {"op": "task1.done"}, "worker-b")
    conductor.poll_and_complete(second_type)
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


def test_a_task_timeout_under_retry_retries_and_then_times_the_run_out(
    conductor: Conductor,
) -> None:
    """WorkflowAndTaskConfigurationSpec "Test simple workflow with task time out
    configuration": timeoutSeconds 1, policy RETRY, retryCount 1."""
    task_type, name = unique("task_to"), unique("task_to_wf")
    conductor.taskdefs(
        _taskdef(
            task_type,
            timeoutSeconds=1,
            responseTimeoutSeconds=1,
            retryCount=1,
            timeoutPolicy="RETRY",
        )
    )
    conductor.register(workflow(name, [simple(task_type, "t1")]))
    workflow_id = conductor.start(name)

    conductor.poll_one(task_type)
    run = conductor.wait_tasks(workflow_id, 2)
    assert run["status"] == "RUNNING"
    assert statuses(run) == ["TIMED_OUT", "SCHEDULED"]

    conductor.poll_one(task_type)
    run = conductor.wait_status(workflow_id, "TIMED_OUT")
    assert run["status"] == "TIMED_OUT"
    assert statuses(run) == ["TIMED_OUT", "TIMED_OUT"]


def test_a_task_timeout_under_time_out_wf_times_the_run_out(conductor: Conductor) -> None:
    task_type, name = unique("task_towf"), unique("task_towf_wf")
    conductor.taskdefs(
        _taskdef(
            task_type,
            timeoutSeconds=1,
            responseTimeoutSeconds=1,
            retryCount=2,
            timeoutPolicy="TIME_OUT_WF",
        )
    )
    conductor.register(workflow(name, [simple(task_type, "t1")]))
    workflow_id = conductor.start(name)

    conductor.poll_one(task_type)
    run = conductor.wait_status(workflow_id, "TIMED_OUT")
    assert run["status"] == "TIMED_OUT"
    assert statuses(run) == ["TIMED_OUT"]


def test_the_workflow_timeout_times_the_run_out_and_cancels_its_task(
    conductor: Conductor,
) -> None:
    """WorkflowAndTaskConfigurationSpec "Test workflow timeout configurations"."""
    task_type, name = unique("wf_to_task"), unique("wf_to")
    conductor.taskdefs(_taskdef(task_type, responseTimeoutSeconds=60))
    conductor.register(
        workflow(name, [simple(task_type, "t1")], timeoutPolicy="TIME_OUT_WF", timeoutSeconds=2)
    )
    workflow_id = conductor.start(name)
    conductor.poll_one(task_type)

    run = conductor.wait_status(workflow_id, "TIMED_OUT")
    assert run["status"] == "TIMED_OUT"
    assert statuses(run) == ["CANCELED"]


@pytest.mark.xfail(strict=True, reason="issue 12: run JSON lacks lastRetriedTime")
def test_retrying_a_run_that_timed_out_schedules_its_canceled_task_again(
    conductor: Conductor,
) -> None:
    """WorkflowAndTaskConfigurationSpec "Test retrying a timed out workflow due to
    workflow timeout": the retried run is RUNNING with [CANCELED, SCHEDULED]."""
    first_type, second_type, name = unique("wf_to_a"), unique("wf_to_b"), unique("wf_to_retry")
    conductor.taskdefs(_taskdef(first_type), _taskdef(second_type))
    conductor.register(
        workflow(
            name,
            [simple(first_type, "t1"), simple(second_type, "t2")],
            timeoutPolicy="TIME_OUT_WF",
            timeoutSeconds=2,
        )
    )
    workflow_id = conductor.start(name)
    conductor.poll_one(first_type)
    assert conductor.wait_status(workflow_id, "TIMED_OUT")["status"] == "TIMED_OUT"

    r = conductor.http.post(f"/api/workflow/{workflow_id}/retry")
    assert r.status_code == 204, r.text
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert statuses(run) == ["CANCELED", "SCHEDULED"]
    assert run["lastRetriedTime"] > 0
