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


def test_a_restart_with_the_latest_definitions_runs_and_reports_the_latest_version(
    sdk: Clients,
) -> None:
    """Conductor's WorkflowExecutorOps.restart(useLatestDefinitions=true) sets the latest
    definition on the run, and WorkflowModel.getWorkflowVersion() is its definition's
    version: the run is of version 2 everywhere it is read."""
    name, first, second = unique("fid_restart"), unique("fid_v1"), unique("fid_v2")
    sdk.register(workflow(name, [simple(first, "a")]))
    workflow_id = sdk.start(name, {"x": 1}, version=1)
    sdk.workflows.terminate_workflow(workflow_id, "stop")
    sdk.register({**workflow(name, [simple(second, "b")]), "version": 2})

    sdk.workflows.restart_workflow(workflow_id, use_latest_def=True)
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    assert [t.task_def_name for t in run.tasks] == [second]
    assert run.workflow_version == 2
    raw = sdk.http.get(f"/api/workflow/{workflow_id}").json()
    assert (raw["version"], raw["workflowVersion"], raw["workflowDefinition"]["version"]) == (
        2,
        2,
        2,
    )
    running = f"/api/workflow/running/{name}"
    assert workflow_id in sdk.http.get(running, params={"version": 2}).json()
    assert workflow_id not in sdk.http.get(running, params={"version": 1}).json()
    found = sdk.workflows.search(query=f"workflowType = {name}").results
    assert [(s.workflow_id, s.version) for s in found] == [(workflow_id, 2)]

    # restarted again without the latest definitions: it stays of version 2
    sdk.workflows.terminate_workflow(workflow_id, "stop")
    sdk.workflows.restart_workflow(workflow_id)
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    assert ([t.task_def_name for t in run.tasks], run.workflow_version) == ([second], 2)
    sdk.workflows.terminate_workflow(workflow_id, "cleanup")


@pytest.mark.parametrize(
    ("first", "latest", "refused"), [(True, False, True), (False, True, False)]
)
def test_a_restart_with_the_latest_definitions_reads_restartable_from_the_latest(
    sdk: Clients, first: bool, latest: bool, refused: bool
) -> None:
    """Conductor's restart checks ``restartable`` on the definition it restarts with:
    with useLatestDefinitions the latest one, not the one the run completed with."""
    name = unique("fid_restartable")
    noop = {"name": "noop", "taskReferenceName": "n", "type": "NOOP"}
    sdk.register({**workflow(name, [noop]), "restartable": first})
    workflow_id = sdk.start(name, {"x": 1}, version=1)
    assert sdk.wait(workflow_id, lambda r: r.status != "RUNNING").status == "COMPLETED"
    sdk.register({**workflow(name, [noop]), "version": 2, "restartable": latest})

    answer = sdk.http.post(
        f"/api/workflow/{workflow_id}/restart", params={"useLatestDefinitions": "true"}
    )
    if refused:
        assert answer.status_code == 409, answer.text
        assert sdk.workflows.get_workflow(workflow_id).workflow_version == 1
    else:
        assert answer.status_code == 204, answer.text
        run = sdk.wait(workflow_id, lambda r: r.status != "RUNNING")
        assert (run.status, run.workflow_version) == ("COMPLETED", 2)


def _defaults_flow(name: str, task_type: str) -> dict[str, Any]:
    given = {"v": "${workflow.variables.counter}", "b": "${workflow.input.b}"}
    return workflow(
        name,
        [simple(task_type, "a", **given)],
        variables={"counter": 7},
        inputTemplate={"b": "default-b"},
    )


def test_a_run_starts_with_its_definitions_variables_and_input_template(sdk: Clients) -> None:
    """Conductor's StartWorkflowOperation sets the definition's ``variables`` on the run
    and fills the keys a non-empty input leaves out from its ``inputTemplate``
    (ParametersUtils.getWorkflowInput); the run shows what its tasks resolve."""
    name, task_type = unique("fid_defaults"), unique("fid_defaults_t")
    sdk.register(_defaults_flow(name, task_type))

    workflow_id = sdk.start(name, {"a": 1, "b": "mine"})
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    assert run.tasks[0].input_data == {"v": 7, "b": "mine"}
    assert (run.input, run.variables) == ({"a": 1, "b": "mine"}, {"counter": 7})
    sdk.workflows.terminate_workflow(workflow_id, "done")

    workflow_id = sdk.start(name, {"a": 1})
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    assert run.tasks[0].input_data == {"v": 7, "b": "default-b"}
    assert (run.input, run.variables) == ({"a": 1, "b": "default-b"}, {"counter": 7})
    status = sdk.workflows.get_workflow_status(
        workflow_id, include_output=True, include_variables=True
    )
    assert status.variables == {"counter": 7}
    raw = sdk.http.get(f"/api/workflow/{workflow_id}").json()
    assert (raw["input"], raw["variables"]) == ({"a": 1, "b": "default-b"}, {"counter": 7})

    # restarted, the run starts again with the definition's variables
    sdk.workflows.terminate_workflow(workflow_id, "stop")
    sdk.workflows.restart_workflow(workflow_id)
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    assert (run.input, run.variables) == ({"a": 1, "b": "default-b"}, {"counter": 7})
    sdk.workflows.terminate_workflow(workflow_id, "done")


def test_an_empty_input_gets_no_input_template(sdk: Clients) -> None:
    """StartWorkflowOperation applies the inputTemplate only to a non-empty input: a run
    started with ``{}`` has the input ``{}``, and its tasks do not see the defaults."""
    name, task_type = unique("fid_empty"), unique("fid_empty_t")
    sdk.register(_defaults_flow(name, task_type))
    workflow_id = sdk.start(name, {})
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    assert (run.input, run.variables) == ({}, {"counter": 7})
    assert run.tasks[0].input_data.get("b") is None
    assert run.tasks[0].input_data["v"] == 7
    sdk.workflows.terminate_workflow(workflow_id, "done")


def test_a_sub_workflow_run_starts_with_its_definitions_variables_and_input_template(
    sdk: Clients,
) -> None:
    """A SUB_WORKFLOW's child run is started as any run (Conductor's SubWorkflow.start
    goes through StartWorkflowOperation): its definition's variables and template."""
    child, task_type, parent = unique("fid_child"), unique("fid_child_t"), unique("fid_parent")
    sdk.register(_defaults_flow(child, task_type))
    sub = {
        "name": child,
        "taskReferenceName": "sub",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": child, "version": 1},
        "inputParameters": {"a": "${workflow.input.a}"},
    }
    sdk.register(workflow(parent, [sub]))
    workflow_id = sdk.start(parent, {"a": 1})
    run = sdk.wait(workflow_id, lambda r: bool(r.tasks and r.tasks[0].sub_workflow_id))
    child_id = run.tasks[0].sub_workflow_id
    child_run = sdk.wait(child_id, lambda r: len(r.tasks) == 1)
    assert child_run.tasks[0].input_data == {"v": 7, "b": "default-b"}
    assert (child_run.input, child_run.variables) == ({"a": 1, "b": "default-b"}, {"counter": 7})
    sdk.workflows.terminate_workflow(workflow_id, "done")
