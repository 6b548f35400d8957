"""What a run and its tasks report, read through the official Conductor Python SDK's
clients (``conductor-python`` 2.x) against ``stepway dev``, compared with what Conductor
OSS 3.x reports for the same calls. Only the SDK's clients are used (no TaskHandler):
each test drives the run itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from conductor.client.configuration.configuration import Configuration
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.workflow import Workflow
from conductor.client.orkes_clients import OrkesClients

from tests.e2e.conductor.harness import simple, unique, workflow

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    # the SDK's own models warn about their deprecated fields when serialized
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


class Clients:
    def __init__(self, dev_url: str, http: httpx.Client) -> None:
        self.clients = OrkesClients(
            configuration=Configuration(server_api_url=f"{dev_url}/api", debug=False)
        )
        self.http = http
        self.workflows = self.clients.get_workflow_client()
        self.tasks = self.clients.get_task_client()

    def register(self, definition: dict[str, Any]) -> None:
        # PUT /metadata/workflow with the definition's JSON as written
        answer = self.http.put("/api/metadata/workflow", json=[definition])
        assert answer.status_code in (200, 204), answer.text

    def start(self, name: str, workflow_input: dict[str, Any], **fields: Any) -> str:
        request = StartWorkflowRequest(name=name, input=workflow_input, **fields)
        workflow_id: str = self.workflows.start_workflow(request)
        return workflow_id

    def wait(self, workflow_id: str, until: Callable[[Workflow], bool]) -> Workflow:
        deadline = time.monotonic() + 20
        while True:
            run = self.workflows.get_workflow(workflow_id, include_tasks=True)
            if until(run) or time.monotonic() > deadline:
                return run
            time.sleep(0.05)


@pytest.fixture
def sdk(dev_url: str) -> Iterator[Clients]:
    with httpx.Client(base_url=dev_url, timeout=30) as http:
        yield Clients(dev_url, http)


def test_a_worker_task_reports_the_response_timeout_it_is_handed_out_with(sdk: Clients) -> None:
    """Conductor's SimpleTaskMapper sets the task's ``responseTimeoutSeconds`` from its
    task definition when it schedules it: the workflow task's own ``taskDefinition``,
    else the registered one, else the default ``new TaskDef()`` (3600). The task reads
    the same before, in and after the poll, in the run and by id."""
    plain, inline = unique("fid_rto"), unique("fid_rto_inline")
    name = unique("fid_rto_flow")
    given = {
        **simple(inline, "b"),
        "taskDefinition": {"name": inline, "responseTimeoutSeconds": 120},
    }
    sdk.register(workflow(name, [simple(plain, "a"), given]))
    workflow_id = sdk.start(name, {"x": 1})

    def timeouts(run: Workflow) -> list[tuple[str, int]]:
        return [(t.reference_task_name, t.response_timeout_seconds) for t in run.tasks]

    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    assert timeouts(run) == [("a", 3600)]
    polled = sdk.tasks.poll_task(plain, worker_id="w1")
    assert polled is not None and polled.response_timeout_seconds == 3600
    assert sdk.tasks.get_task(polled.task_id).response_timeout_seconds == 3600
    assert sdk.http.get(f"/api/tasks/{polled.task_id}").json()["responseTimeoutSeconds"] == 3600

    sdk.http.post(
        "/api/tasks",
        json={
            "taskId": polled.task_id,
            "workflowInstanceId": workflow_id,
            "status": "COMPLETED",
            "workerId": "w1",
            "outputData": {},
        },
    ).raise_for_status()
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 2)
    assert timeouts(run) == [("a", 3600), ("b", 120)]
    polled = sdk.tasks.poll_task(inline, worker_id="w1")
    assert polled is not None and polled.response_timeout_seconds == 120
    assert sdk.tasks.get_task(polled.task_id).response_timeout_seconds == 120
    sdk.workflows.terminate_workflow(workflow_id, "done")
