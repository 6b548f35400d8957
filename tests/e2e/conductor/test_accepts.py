"""What Conductor accepts, Stepway accepts (issue 12, point 9)."""

from __future__ import annotations

import pytest

from tests.e2e.conductor.harness import Conductor, simple, unique, workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_task_definition_naming_a_schema_by_reference(conductor: Conductor) -> None:
    """The SDK's TaskHandler links generated schemas as ``{"name", "version"}``
    (Conductor's SchemaDef); Conductor stores the reference."""
    name = unique("schema_ref")
    r = conductor.http.post(
        "/api/metadata/taskdefs",
        json=[
            {
                "name": name,
                "inputSchema": {"name": f"{name}_input", "version": 1, "type": "JSON"},
                "outputSchema": {"name": f"{name}_output", "version": 1},
            }
        ],
    )
    assert r.status_code == 200, r.text
    stored = conductor.http.get(f"/api/metadata/taskdefs/{name}").json()
    assert stored["inputSchema"] == {"name": f"{name}_input", "version": 1, "type": "JSON"}


def test_an_inline_task_definition_with_a_response_timeout_above_its_timeout(
    conductor: Conductor,
) -> None:
    """Conductor validates a workflow task's inline ``taskDefinition`` only for its own
    fields (TaskTimeoutConstraint applies to registered task definitions)."""
    task_type, name = unique("inline_rt"), unique("inline_rt_wf")
    step = simple(task_type, "t0")
    step["taskDefinition"] = {
        "name": task_type,
        "timeoutSeconds": 10,
        "responseTimeoutSeconds": 3600,
    }
    conductor.register(workflow(name, [step]))


def test_a_result_may_name_another_worker_id_than_the_poller(conductor: Conductor) -> None:
    """Conductor's updateTask does not compare ``workerId`` with the poller's."""
    task_type, name = unique("any_worker"), unique("any_worker_wf")
    conductor.taskdefs({"name": task_type, "retryCount": 0})
    conductor.register(workflow(name, [simple(task_type, "t0")]))
    workflow_id = conductor.start(name)
    polled = conductor.poll_one(task_type, "host-1")
    r = conductor.update(polled, "COMPLETED", {"ok": True}, worker="host-1-thread-7")
    assert r.status_code == 200, r.text
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["tasks"][0]["workerId"] == "host-1-thread-7"
