"""Rate and concurrency limits of a task definition, as conductor-oss's test-harness
``TaskLimitsWorkflowSpec`` asserts them.

The spec's task definitions (WorkflowTestUtil): ``test_task_with_rateLimits`` and
``test_simple_task_with_rateLimits`` allow one execution per 10 s
(``rateLimitPerFrequency`` 1, ``rateLimitFrequencyInSeconds`` 10);
``test_task_with_concurrency_limit`` one at a time (``concurrentExecLimit`` 1). Each
workflow (test-harness resources) is that one task.

Translations:

* The system-task case uses the test harness's ``USER_TASK``, a Java system task of the
  spec's own (Stepway has no user-defined system tasks: docs/conductor-compatibility.md,
  ``USER_DEFINED``). Here it is an HTTP task, the asynchronous system task Conductor's
  ``HTTPTaskMapper`` copies a task definition's rate limits onto, so that
  ``AsyncSystemTaskExecutor`` postpones it when the limit is reached. Conductor runs it
  when the spec calls ``asyncSystemTaskExecutor.execute``; Stepway on its own.
* ``queueDAO.resetOffsetTime`` (make a postponed message visible at once) has no API.
  A poll refused by a limit puts the message back with a delay: 60 s in Conductor
  (``taskExecutionPostponeDuration``); in Stepway no longer than the type's rate-limit
  window (control_plane/services/task_handout.py, ``_limit_delay``), so the rate-limit
  case waits the 10 s window out instead of resetting it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, echo_server, simple, types, unique, workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

#: a rate-limited poll's message comes back after the 10 s window (see above), plus a
#: margin
REQUEUE_SECONDS = 25.0


def _taskdef(name: str, **limits: Any) -> dict[str, Any]:
    return {"name": name, "ownerEmail": "test@harness.com", **limits}


def _pairs(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["taskType"], t["status"]) for t in run["tasks"]]


def test_the_rate_limit_of_a_system_task_is_honored(conductor: Conductor) -> None:
    # "Verify that the rate limiting for system tasks is honored"
    task_name, name = unique("test_task_with_rateLimits"), unique("test_rate_limit_system_task")
    conductor.taskdefs(_taskdef(task_name, rateLimitFrequencyInSeconds=10, rateLimitPerFrequency=1))
    with echo_server() as url:
        conductor.register(
            workflow(
                name,
                [
                    {
                        "name": task_name,
                        "taskReferenceName": "test_task_with_rateLimits",
                        "type": "HTTP",
                        "inputParameters": {
                            "http_request": {"uri": url, "method": "POST", "body": {"n": 1}}
                        },
                    }
                ],
                ownerEmail="test@harness.com",
                timeoutPolicy="ALERT_ONLY",
                timeoutSeconds=0,
            )
        )
        # the first run: its task runs and the run completes (the spec checks it
        # SCHEDULED before executing it; Stepway runs it by itself)
        workflow_id = conductor.start(name)
        run = conductor.wait_status(workflow_id, "COMPLETED")
        assert run["status"] == "COMPLETED"
        assert _pairs(run) == [("HTTP", "COMPLETED")]

        # a second run within the 10 s window: its task is not run; the run waits
        second_id = conductor.start(name)
        run = conductor.wait_tasks(second_id, 1)
        assert (run["status"], _pairs(run)) == ("RUNNING", [("HTTP", "SCHEDULED")])
        # "execute the user task on the second workflow": it is still rate limited
        run = conductor.wait(second_id, lambda r: False, seconds=3)
        assert run["status"] == "RUNNING"
        assert _pairs(run) == [("HTTP", "SCHEDULED")]
        # once the window has ended the engine makes the call (no attempt was spent)
        run = conductor.wait_status(second_id, "COMPLETED", seconds=25)
        assert run["status"] == "COMPLETED"
        assert [(t["status"], t["retryCount"]) for t in run["tasks"]] == [("COMPLETED", 0)]


def test_the_rate_limit_of_a_simple_task_is_honored(conductor: Conductor) -> None:
    # "Verify that the rate limiting for simple tasks is honored"
    # ~10 s: the refused poll's message comes back when the 10 s window ends
    task_type = unique("test_simple_task_with_rateLimits")
    name = unique("test_rate_limit_simple_task")
    conductor.taskdefs(_taskdef(task_type, rateLimitFrequencyInSeconds=10, rateLimitPerFrequency=1))
    conductor.register(
        workflow(
            name,
            [simple(task_type, "test_simple_task_with_rateLimits")],
            ownerEmail="test@harness.com",
            timeoutPolicy="ALERT_ONLY",
            timeoutSeconds=0,
        )
    )
    workflow_id = conductor.start(name)
    run = conductor.wait_tasks(workflow_id, 1)
    assert (run["status"], _pairs(run)) == ("RUNNING", [(task_type, "SCHEDULED")])

    polled = conductor.poll_and_complete(task_type, worker="rate.limit.test.worker")
    assert polled["workflowInstanceId"] == workflow_id  # polled and acknowledged
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], _pairs(run)) == ("COMPLETED", [(task_type, "COMPLETED")])

    second_id = conductor.start(name)
    run = conductor.wait_tasks(second_id, 1)
    assert (run["status"], _pairs(run)) == ("RUNNING", [(task_type, "SCHEDULED")])

    # polling within the 10 s window: no task is returned
    assert conductor.poll(task_type, "rate.limit.test.worker", seconds=1) is None

    # once the window has passed (and the postponed message is back), the task is handed out
    polled = conductor.poll_and_complete(
        task_type, worker="rate.limit.test.worker", seconds=REQUEUE_SECONDS
    )
    assert polled["workflowInstanceId"] == second_id
    run = conductor.wait_status(second_id, "COMPLETED")
    assert (run["status"], _pairs(run)) == ("COMPLETED", [(task_type, "COMPLETED")])


def test_the_concurrency_limit_of_a_task_is_honored(conductor: Conductor) -> None:
    # "Verify that concurrency limited tasks are honored during workflow execution"
    task_type, name = unique("test_task_with_concurrency_limit"), unique("test_concurrency_wf")
    conductor.taskdefs(_taskdef(task_type, concurrentExecLimit=1))
    conductor.register(
        workflow(
            name,
            [simple(task_type, "test_task_with_concurrency_limit")],
            ownerEmail="test@harness.com",
            timeoutPolicy="ALERT_ONLY",
            timeoutSeconds=0,
        )
    )
    workflow_id = conductor.start(name)
    run = conductor.wait_tasks(workflow_id, 1)
    assert run["status"] == "RUNNING"
    assert (types(run), [t["status"] for t in run["tasks"]]) == ([task_type], ["SCHEDULED"])

    # the task is polled and acknowledged
    polled1 = conductor.poll_one(task_type, "test_task_worker")
    assert polled1["taskType"] == task_type
    assert polled1["workflowInstanceId"] == workflow_id

    second_id = conductor.start(name)
    run = conductor.wait_tasks(second_id, 1)
    assert (run["status"], _pairs(run)) == ("RUNNING", [(task_type, "SCHEDULED")])

    # the limit is reached: no task is returned
    assert conductor.poll(task_type, "test_task_worker", seconds=1) is None

    # the first task completes
    conductor.complete(polled1)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], _pairs(run)) == ("COMPLETED", [(task_type, "COMPLETED")])

    # polled again: the second run's task is returned, no task being in progress
    polled2 = conductor.poll_one(task_type, "test_task_worker", seconds=5)
    assert polled2["taskType"] == task_type
    assert polled2["workflowInstanceId"] == second_id
