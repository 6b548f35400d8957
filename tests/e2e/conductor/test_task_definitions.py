"""Task definitions are optional, as in Conductor (issue 12, point 1).

Conductor runs a SIMPLE task whose type has no registered task definition with a default
one (``MetadataMapperService`` populates ``new TaskDef(name)``: retryCount 3, FIXED,
retryDelaySeconds 60, responseTimeoutSeconds 3600, timeoutPolicy TIME_OUT_WF); its
test-harness asserts it in WorkflowAndTaskConfigurationSpec "Test task def created if
not exist". Queues are made on first use and for any domain a start request names.
"""

from __future__ import annotations

import pytest

from tests.e2e.conductor.harness import (
    Conductor,
    simple,
    statuses,
    task,
    types,
    unique,
    workflow,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_workflow_whose_task_type_has_no_definition_registers_and_runs(
    conductor: Conductor,
) -> None:
    """WorkflowAndTaskConfigurationSpec: "Test task def created if not exist"."""
    task_type, name = unique("task_not_registered"), unique("test_workflow")
    conductor.register(workflow(name, [simple(task_type, "t0", x="${workflow.input.x}")]))

    workflow_id = conductor.start(name, {"x": 1})
    run = conductor.wait_tasks(workflow_id, 1)
    assert run["status"] == "RUNNING"
    assert len(run["tasks"]) == 1
    assert run["tasks"][0]["taskDefName"] == task_type

    polled = conductor.poll_one(task_type)
    assert polled["inputData"] == {"x": 1}
    conductor.complete(polled, {"done": True})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert run["output"] == {"done": True}


def test_a_type_without_definition_gets_conductors_default_task_definition(
    conductor: Conductor,
) -> None:
    """``new TaskDef(name)``: responseTimeoutSeconds 3600 and 3 retries, so a failed
    attempt is followed by a new SCHEDULED attempt with retryCount 1."""
    task_type, name = unique("no_def"), unique("defaults")
    conductor.register(workflow(name, [simple(task_type, "t0")]))
    workflow_id = conductor.start(name)

    polled = conductor.poll_one(task_type)
    assert polled["responseTimeoutSeconds"] == 3600
    conductor.fail(polled, "try again")
    run = conductor.wait_tasks(workflow_id, 2)
    assert run["status"] == "RUNNING"
    assert statuses(run) == ["FAILED", "SCHEDULED"]
    assert [t["retryCount"] for t in run["tasks"]] == [0, 1]


def test_an_inline_task_definition_is_the_tasks_definition(conductor: Conductor) -> None:
    """The workflow task's own ``taskDefinition`` (retryCount 0 here) governs the task;
    nothing is registered for the type."""
    task_type, name = unique("inline_def"), unique("inline_def_wf")
    step = simple(task_type, "t0")
    step["taskDefinition"] = {"name": task_type, "retryCount": 0, "responseTimeoutSeconds": 30}
    conductor.register(workflow(name, [step]))
    workflow_id = conductor.start(name)

    polled = conductor.poll_one(task_type)
    assert polled["responseTimeoutSeconds"] == 30
    conductor.fail(polled, "no retries allowed")
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert statuses(run) == ["FAILED"]
    assert run["reasonForIncompletion"] == (
        f"Task {polled['taskId']} failed with status: FAILED and reason: 'no retries allowed'"
    )


def test_polling_a_type_nobody_defined_answers_no_task(conductor: Conductor) -> None:
    """Conductor's poll of an unknown type is an empty list (batch) or 204 (single)."""
    task_type = unique("never_defined")
    batch = conductor.http.get(f"/api/tasks/poll/batch/{task_type}", params={"timeout": 10})
    assert (batch.status_code, batch.json()) == (200, [])
    single = conductor.http.get(f"/api/tasks/poll/{task_type}")
    assert single.status_code == 204


def test_a_start_request_maps_a_type_to_a_domain_nobody_declared(conductor: Conductor) -> None:
    """``taskToDomain`` names a domain only the start request knows: the task goes to the
    queue of that domain and a worker polling with ``domain=cool`` gets it."""
    task_type, name = unique("domained"), unique("domain_wf")
    conductor.register(workflow(name, [simple(task_type, "t0")]))
    workflow_id = conductor.start(name, task_to_domain={task_type: "cool"})

    assert conductor.poll(task_type, seconds=1) is None  # not on the default queue
    polled = conductor.poll_one(task_type, domain="cool")
    assert polled["domain"] == "cool"
    conductor.complete(polled, {"where": "cool"})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert task(run, "t0")["domain"] == "cool"
    assert types(run) == [task_type]
