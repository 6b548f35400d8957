"""A SUB_WORKFLOW task started by the engine's own system-task path, as conductor-oss's
test-harness ``AsyncSystemTaskWorkerSpec`` asserts it.

The spec's parent (``workflow_with_sub_workflow_1_integration_test.json``,
``integration_test_wf_with_sub_wf``): a SIMPLE ``t1``, then a SUB_WORKFLOW ``t2`` that
starts the workflow its input names ``subwf``, here ``sub_workflow``
(``simple_one_task_sub_workflow_integration_test.json``: one SIMPLE
``simple_task_in_sub_wf``). Conductor's spec runs the real ``SystemTaskWorker`` (every
other sub-workflow spec calls ``asyncSystemTaskExecutor.execute`` by hand): after ``t1``
completes, nothing is driven by hand and the child run must start. Stepway's engine
always starts the child by itself, which is what is observable through the API.

Translations:

* ``conditions.eventually`` (Spock's PollingConditions, 10 s) is ``Conductor.wait``.
* ``sweep`` is ``PUT /workflow/decide/{id}``; what follows the five sweeps is read
  0.5 s later, time for the engine to act on them.
* ``workflowExecutionService.getRunningWorkflows(name, 1)`` is
  ``GET /workflow/running/{name}?version=1``; the workflows and task types are
  ``unique()``, so it counts this test's runs only (the spec's ``cleanup`` terminates
  every run between features; here each test terminates its own).
* The definitions are ``sub_workflow_shapes``'s (``integration_test_wf_with_sub_wf``, the
  harness's ``integration_task_1``/``_2`` task definitions) and ``sub_workflow`` with the
  harness's ``simple_task_in_sub_wf`` task definition (0 retries).

Not ported (Conductor-internal, no effect visible through the REST API): the last
assertion of "repeated sweeps do not duplicate an in-flight SUB_WORKFLOW task",
``!queueDAO.containsMessage(SUB_WORKFLOW, taskId)`` (the in-flight task's queue message
was removed and a sweep's repair did not put it back, conductor-oss #202/#630): Stepway
has no queue for system tasks, and a message of one task id cannot be read over the API.
Its visible consequence, that repeated sweeps start no second child and no second
SUB_WORKFLOW task, is asserted.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, simple, unique, workflow
from tests.e2e.conductor.sub_workflow_shapes import (
    OWNER,
    WORKER1,
    integration_test_wf_with_sub_wf,
    task_defs,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _setup(conductor: Conductor) -> tuple[str, str, str, str]:
    """The spec's ``setup``: ``sub_workflow`` and ``integration_test_wf_with_sub_wf``
    registered. Their names, ``integration_task_1``'s and ``simple_task_in_sub_wf``'s."""
    task1, _ = task_defs(conductor)
    in_sub = unique("simple_task_in_sub_wf")
    conductor.taskdefs({"name": in_sub, "retryCount": 0, "ownerEmail": OWNER})
    sub, parent = unique("sub_workflow"), unique("integration_test_wf_with_sub_wf")
    conductor.register(
        workflow(
            sub,
            [simple(in_sub, "t1")],
            description="sub_workflow",
            inputParameters=[],
            outputParameters={},
            restartable=True,
            workflowStatusListenerEnabled=False,
            timeoutPolicy="ALERT_ONLY",
            timeoutSeconds=0,
            ownerEmail=OWNER,
        ),
        integration_test_wf_with_sub_wf(parent, task1),
    )
    return parent, sub, task1, in_sub


def _start(conductor: Conductor, parent: str, sub: str, correlation_id: str) -> str:
    return conductor.start(
        parent,
        {"param1": "p1 value", "param2": "p2 value", "subwf": sub},
        version=1,
        correlation_id=correlation_id,
    )


def _sub_workflow_started(run: dict[str, Any]) -> bool:
    """The spec's eventually: the parent's second task a SUB_WORKFLOW, IN_PROGRESS, with
    its child's id."""
    return (
        len(run["tasks"]) == 2
        and run["tasks"][1]["taskType"] == "SUB_WORKFLOW"
        and run["tasks"][1]["status"] == "IN_PROGRESS"
        and run["tasks"][1].get("subWorkflowId") is not None
    )


def _terminate(conductor: Conductor, workflow_id: str) -> None:
    """The spec's ``cleanup`` (``clearWorkflows``): the parent, and with it its child."""
    r = conductor.http.delete(f"/api/workflow/{workflow_id}", params={"reason": "test done"})
    assert r.status_code < 300, r.text


def test_the_real_system_task_worker_polls_and_starts_the_sub_workflow_task(
    conductor: Conductor,
) -> None:
    # AsyncSystemTaskWorkerSpec."the real system task worker polls and starts the
    # SUB_WORKFLOW task"
    parent, sub, task1, in_sub = _setup(conductor)

    # when: "the parent workflow is started"
    root_id = _start(conductor, parent, sub, "worker_poll_execute")

    # then: "the first task is scheduled"
    run = conductor.wait(
        root_id, lambda r: len(r["tasks"]) == 1 and r["tasks"][0]["status"] == "SCHEDULED"
    )
    assert run["status"] == "RUNNING"
    assert len(run["tasks"]) == 1
    assert run["tasks"][0]["taskType"] == task1
    assert run["tasks"][0]["status"] == "SCHEDULED"

    # when: "the first task completes - and nothing else is driven by hand"
    conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)

    # then: "the SystemTaskWorker pops the SUB_WORKFLOW message and starts the child
    # workflow"
    run = conductor.wait(root_id, _sub_workflow_started)
    assert len(run["tasks"]) == 2
    assert run["tasks"][1]["taskType"] == "SUB_WORKFLOW"
    assert run["tasks"][1]["status"] == "IN_PROGRESS"
    sub_workflow_id = run["tasks"][1]["subWorkflowId"]
    assert sub_workflow_id is not None

    # and: "the child workflow is running its own first task"
    child = conductor.wait_tasks(sub_workflow_id, 1)
    assert child["status"] == "RUNNING"
    assert len(child["tasks"]) == 1
    assert child["tasks"][0]["taskType"] == in_sub

    _terminate(conductor, root_id)


def test_repeated_sweeps_do_not_duplicate_an_in_flight_sub_workflow_task(
    conductor: Conductor,
) -> None:
    # AsyncSystemTaskWorkerSpec."repeated sweeps do not duplicate an in-flight SUB_WORKFLOW
    # task"
    parent, sub, task1, _ = _setup(conductor)

    # given: "a parent workflow whose SUB_WORKFLOW task the worker has already started"
    root_id = _start(conductor, parent, sub, "worker_no_duplicate")
    run = conductor.wait(
        root_id, lambda r: len(r["tasks"]) == 1 and r["tasks"][0]["status"] == "SCHEDULED"
    )
    assert len(run["tasks"]) == 1
    assert run["tasks"][0]["status"] == "SCHEDULED"
    conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)

    run = conductor.wait(root_id, _sub_workflow_started)
    assert _sub_workflow_started(run), [(t["taskType"], t["status"]) for t in run["tasks"]]
    sub_workflow_id = run["tasks"][1]["subWorkflowId"]

    # when: "the parent is swept repeatedly while the SUB_WORKFLOW task is in flight"
    for _ in range(5):
        r = conductor.http.put(f"/api/workflow/decide/{root_id}")
        assert r.status_code < 300, r.text
    # Conductor's sweep acts inside the call; Stepway's engine would act a moment later
    time.sleep(0.5)

    # then: "exactly one child workflow exists - repair did not re-queue the running task"
    r = conductor.http.get(f"/api/workflow/running/{sub}", params={"version": 1})
    assert r.status_code == 200, r.text
    assert r.json() == [sub_workflow_id]

    # and: "the parent still holds a single SUB_WORKFLOW task pointing at the same child"
    run = conductor.run(root_id)
    subs = [t for t in run["tasks"] if t["taskType"] == "SUB_WORKFLOW"]
    assert len(subs) == 1
    assert subs[0]["subWorkflowId"] == sub_workflow_id

    # and: "the in-flight task has no queue message" (queueDAO.containsMessage): not
    # observable through the API (see the module's docstring)

    _terminate(conductor, root_id)
