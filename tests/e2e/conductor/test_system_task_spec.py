"""An asynchronous system task with ``asyncComplete``, as conductor-oss's test-harness
``SystemTaskSpec`` asserts it.

The spec's workflow (``simple_workflow_with_async_complete_system_task_integration_test
.json``, ``async_complete_integration_test_wf``): a SIMPLE ``t1``
(``integration_task_1``), then ``user_task``, a system task with ``asyncComplete: true``.
The system task starts, goes IN_PROGRESS and stays so (a sweep changes nothing) until an
update from outside (``workflowExecutor.updateTask``) completes it; the run then
completes.

Translations:

* ``USER_TASK`` is a Java system task of the test harness's own (``UserTask``: with
  ``asyncComplete`` its ``start`` only sets IN_PROGRESS). Stepway has no user-defined
  system tasks (docs/conductor-compatibility.md, ``USER_DEFINED``); here it is an HTTP
  task with ``asyncComplete: true`` (the asynchronous system task whose ``asyncComplete``
  Stepway reads, as ``test_task_limits_spec.py`` translates the same task), posting
  ``user_task``'s input ``{input: ${t1.output.op}}`` to a local server. Its row's type is
  ``HTTP`` where the spec reads ``USER_TASK``. It keeps the spec's task name
  ``user_task`` (made unique) and the harness's task definition of that name
  (WorkflowTestUtil: 20 s timeouts, 1 retry, RETRY, 10 s retry delay).
* The spec pops the task's queue message and runs ``asyncSystemTaskExecutor.execute``
  by hand, so it reads the task SCHEDULED before it runs; Stepway runs it by itself at
  once, so that read accepts SCHEDULED or IN_PROGRESS (already run), and the test then
  waits for IN_PROGRESS, the state the spec asserts after its ``execute``.
* ``sweep`` is ``PUT /workflow/decide/{id}``, and "workflow state is unchanged" is read
  after a moment (0.5 s) in which the engine could have changed it.
* ``workflowExecutor.updateTask`` is ``POST /tasks`` with the task's id.
* The task types and workflow name are ``unique()``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, echo_server, unique, workflow
from tests.e2e.conductor.sub_workflow_shapes import OWNER, SIMPLE_INPUT, WORKER1

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _pairs(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["taskType"], t["status"]) for t in run["tasks"]]


def _async_complete_integration_test_wf(
    name: str, task1: str, user_task: str, url: str
) -> dict[str, Any]:
    """``simple_workflow_with_async_complete_system_task_integration_test.json``, its
    ``USER_TASK`` an asyncComplete HTTP task posting the task's input to ``url``."""
    return workflow(
        name,
        [
            {
                "name": task1,
                "taskReferenceName": "t1",
                "type": "SIMPLE",
                "inputParameters": {**SIMPLE_INPUT, "p3": "${CPEWF_TASK_ID}", "someNullKey": None},
                "asyncComplete": False,
            },
            {
                "name": user_task,
                "taskReferenceName": "user_task",
                "type": "HTTP",
                "inputParameters": {
                    "input": "${t1.output.op}",
                    "http_request": {
                        "uri": url,
                        "method": "POST",
                        "body": {"input": "${t1.output.op}"},
                    },
                },
                "asyncComplete": True,
            },
        ],
        description="async_complete_integration_test_wf",
        inputParameters=["param1", "param2"],
        outputParameters={
            "o1": "${workflow.input.param1}",
            "o2": "${user_task.output.uuid}",
            "o3": "${t1.output.op}",
        },
        restartable=True,
        workflowStatusListenerEnabled=False,
        timeoutPolicy="ALERT_ONLY",
        timeoutSeconds=0,
        ownerEmail=OWNER,
    )


def test_system_task_with_async_complete_set_to_true(conductor: Conductor) -> None:
    # SystemTaskSpec."Test system task with asyncComplete set to true"
    task1, user_task, name = (
        unique("integration_task_1"),
        unique("user_task"),
        unique("async_complete_integration_test_wf"),
    )
    conductor.taskdefs(
        {
            "name": task1,
            "retryCount": 1,
            "timeoutSeconds": 120,
            "responseTimeoutSeconds": 120,
            "ownerEmail": OWNER,
        },
        {
            "name": user_task,
            "timeoutSeconds": 20,
            "responseTimeoutSeconds": 20,
            "retryCount": 1,
            "timeoutPolicy": "RETRY",
            "retryDelaySeconds": 10,
            "ownerEmail": OWNER,
        },
    )
    with echo_server() as url:
        conductor.register(_async_complete_integration_test_wf(name, task1, user_task, url))

        # when: "the workflow is started"
        workflow_id = conductor.start(
            name,
            {"param1": "p1 value", "param2": "p2 value"},
            version=1,
            correlation_id=unique("async_complete_test"),
        )
        # then: "ensure that the workflow has started"
        run = conductor.wait_tasks(workflow_id, 1)
        assert run["status"] == "RUNNING"
        assert _pairs(run) == [(task1, "SCHEDULED")]

        # when: "poll and complete the integration_task_1 task"
        polled = conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)
        # then: verifyPolledAndAcknowledgedTask
        assert polled["workflowInstanceId"] == workflow_id

        # and: "the 'integration_task1' is complete and the next task is in SCHEDULED
        # state" (Stepway may have run it already: see the module's docstring)
        run = conductor.wait_tasks(workflow_id, 2)
        assert run["status"] == "RUNNING"
        assert len(run["tasks"]) == 2
        assert (run["tasks"][0]["taskType"], run["tasks"][0]["status"]) == (task1, "COMPLETED")
        assert run["tasks"][1]["taskType"] == "HTTP"
        assert run["tasks"][1]["status"] in ("SCHEDULED", "IN_PROGRESS")

        # when: "the system task is started"; then: "the system task is in IN_PROGRESS"
        run = conductor.wait_task(workflow_id, "user_task", "IN_PROGRESS")
        assert run["status"] == "RUNNING"
        assert _pairs(run) == [(task1, "COMPLETED"), ("HTTP", "IN_PROGRESS")]

        # when: "sweeper evaluates the workflow"
        r = conductor.http.put(f"/api/workflow/decide/{workflow_id}")
        assert r.status_code < 300, r.text
        time.sleep(0.5)
        # then: "workflow state is unchanged"
        run = conductor.run(workflow_id)
        assert run["status"] == "RUNNING"
        assert _pairs(run) == [(task1, "COMPLETED"), ("HTTP", "IN_PROGRESS")]

        # when: "result of the user task is curated" and "external signal is simulated with
        # this output to complete the system task"
        user = run["tasks"][1]
        assert user["referenceTaskName"] == "user_task"
        r = conductor.update(user, "COMPLETED", {"op": "user.task.done"})
        assert r.status_code == 200, r.text

        # then: "the system task is COMPLETED and workflow is COMPLETED"
        run = conductor.wait_status(workflow_id, "COMPLETED")
        assert run["status"] == "COMPLETED", run.get("reasonForIncompletion")
        assert _pairs(run) == [(task1, "COMPLETED"), ("HTTP", "COMPLETED")]
