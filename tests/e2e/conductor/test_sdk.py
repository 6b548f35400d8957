"""The official Conductor Python SDK (``conductor-python`` 2.x) against ``stepway dev``
(issue 12, "Must show"): the metadata, workflow and task clients, the workflow executor,
and the SDK's TaskHandler running ``@worker_task`` workers (``sdk_workers``) for which no
task definition was registered.

The SDK is used as a Conductor user uses it: a ``Configuration`` naming the server, the
workflow DSL or WorkflowDef models, the clients' methods. Nothing is adapted to Stepway.
Importing the SDK's task handler sets the multiprocessing start method to ``spawn``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from conductor.client.automator.task_handler import TaskHandler, get_registered_workers
from conductor.client.configuration.configuration import Configuration
from conductor.client.http.api.workflow_bulk_resource_api import WorkflowBulkResourceApi
from conductor.client.http.models.rerun_workflow_request import RerunWorkflowRequest
from conductor.client.http.models.skip_task_request import SkipTaskRequest
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.sub_workflow_params import SubWorkflowParams
from conductor.client.http.models.workflow import Workflow
from conductor.client.http.models.workflow_def import WorkflowDef
from conductor.client.http.models.workflow_task import WorkflowTask
from conductor.client.orkes_clients import OrkesClients
from conductor.client.workflow.conductor_workflow import ConductorWorkflow
from conductor.client.workflow.task.dynamic_fork_task import DynamicForkTask
from conductor.client.workflow.task.join_task import JoinTask
from conductor.client.workflow.task.simple_task import SimpleTask
from conductor.client.workflow.task.wait_task import WaitTask

from tests.e2e.conductor import sdk_workers
from tests.e2e.conductor.harness import echo_server, unique

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    # the SDK's own models warn about their deprecated fields when serialized
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

#: spawned worker processes import the SDK first; on a loaded machine that takes a while
WORKERS_UP_SECONDS = 150


@dataclass
class Sdk:
    clients: OrkesClients
    http: httpx.Client

    @property
    def workflows(self) -> Any:
        return self.clients.get_workflow_client()

    @property
    def executor(self) -> Any:
        return self.clients.get_workflow_executor()

    def register(self, definition: WorkflowDef | ConductorWorkflow) -> None:
        if isinstance(definition, ConductorWorkflow):
            definition.register(overwrite=True)  # PUT /metadata/workflow
        else:
            self.clients.get_metadata_client().register_workflow_def(definition, overwrite=True)

    def start(self, name: str, workflow_input: dict[str, Any], **fields: Any) -> str:
        request = StartWorkflowRequest(name=name, version=1, input=workflow_input, **fields)
        workflow_id: str = self.workflows.start_workflow(request)
        return workflow_id

    def wait(self, workflow_id: str, until: Any, seconds: float = 60) -> Workflow:
        deadline = time.monotonic() + seconds
        while True:
            run = self.workflows.get_workflow(workflow_id, include_tasks=True)
            if until(run) or time.monotonic() > deadline:
                return run
            time.sleep(0.1)

    def finished(self, workflow_id: str, seconds: float = 60) -> Workflow:
        return self.wait(workflow_id, lambda run: run.status != "RUNNING", seconds)


@pytest.fixture(scope="module")
def sdk(dev_url: str) -> Iterator[Sdk]:
    """The SDK's TaskHandler running the decorated workers of ``sdk_workers`` (one
    spawned process each) against the shared platform until the module is done."""
    config = Configuration(server_api_url=f"{dev_url}/api", debug=False)
    workers = [w for w in get_registered_workers() if w.task_definition_name.startswith("sdk2_")]
    assert {w.task_definition_name for w in workers} == set(sdk_workers.TASK_TYPES)
    handler = TaskHandler(
        workers=workers,
        configuration=config,
        scan_for_annotated_workers=False,
        monitor_processes=False,
    )
    handler.start_processes()
    try:
        with httpx.Client(base_url=dev_url, timeout=30) as http:
            _wait_for_workers(http)
            yield Sdk(OrkesClients(configuration=config), http)
    finally:
        handler.stop_processes()
        processes = [*handler.task_runner_processes, handler.logger_process]
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
        assert not [p.pid for p in processes if p.is_alive()]


def _wait_for_workers(http: httpx.Client) -> None:
    """Until the worker processes run: ``sdk2_autoreg`` registers its task definition
    when its process starts; then until every type has polled (Stepway records each
    poll), a little longer at most."""
    deadline = time.monotonic() + WORKERS_UP_SECONDS
    while time.monotonic() < deadline:
        if http.get("/api/metadata/taskdefs/sdk2_autoreg").status_code == 200:
            break
        time.sleep(0.5)
    else:
        pytest.fail("the SDK worker processes never started")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        polled = {p["queueName"] for p in http.get("/api/tasks/queue/polldata/all").json()}
        if polled >= set(sdk_workers.TASK_TYPES) - {"sdk2_domained"}:
            return
        time.sleep(0.5)


def _task(run: Workflow, ref: str) -> Any:
    found = [t for t in run.tasks if t.reference_task_name == ref]
    assert found, f"no task {ref} in {[t.reference_task_name for t in run.tasks]}"
    return found[-1]


def _greet_flow(sdk: Sdk, *extra: Any) -> str:
    name = unique("sdk_greet_flow")
    flow = ConductorWorkflow(executor=sdk.executor, name=name, version=1)
    greet = SimpleTask("sdk2_greet", "greet")
    greet.input_parameters.update({"name": "${workflow.input.name}"})
    flow >> greet
    for task in extra:
        flow >> task
    flow.output_parameters({"greeting": "${greet.output.greeting}"})
    sdk.register(flow)
    return name


# --- registration and workers -----------------------------------------------------------


def test_a_worker_registers_its_own_task_definition(sdk: Sdk) -> None:
    """``@worker_task(register_task_def=True)``: the SDK PUTs a minimal TaskDef."""
    stored = sdk.clients.get_metadata_client().get_task_def("sdk2_autoreg")
    assert stored.name == "sdk2_autoreg"


def test_decorated_workers_run_a_workflow_registered_without_task_definitions(
    sdk: Sdk,
) -> None:
    name = _greet_flow(sdk)
    run = sdk.finished(sdk.start(name, {"name": "Ada"}))
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert run.output == {"greeting": "Hello, Ada"}
    assert [(t.task_type, t.status) for t in run.tasks] == [("sdk2_greet", "COMPLETED")]


# --- the run lifecycle --------------------------------------------------------------------


def test_pause_resume_terminate_and_restart(sdk: Sdk) -> None:
    name = _greet_flow(sdk, WaitTask("hold"))
    workflow_id = sdk.start(name, {"name": "Bo"})
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 2)
    assert [(t.task_type, t.status) for t in run.tasks] == [
        ("sdk2_greet", "COMPLETED"),
        ("WAIT", "IN_PROGRESS"),
    ]
    sdk.workflows.pause_workflow(workflow_id)
    assert sdk.workflows.get_workflow(workflow_id).status == "PAUSED"
    sdk.workflows.resume_workflow(workflow_id)
    assert sdk.workflows.get_workflow(workflow_id).status == "RUNNING"
    sdk.workflows.terminate_workflow(workflow_id, reason="enough")
    run = sdk.workflows.get_workflow(workflow_id, include_tasks=True)
    assert (run.status, run.reason_for_incompletion) == ("TERMINATED", "enough")
    assert _task(run, "hold").status == "CANCELED"

    sdk.workflows.restart_workflow(workflow_id)
    run = sdk.wait(workflow_id, lambda r: len(r.tasks) == 2 and r.tasks[1].task_type == "WAIT")
    assert run.status == "RUNNING"
    assert [t.status for t in run.tasks] == ["COMPLETED", "IN_PROGRESS"]
    sdk.workflows.terminate_workflow(workflow_id, reason="done")


def test_bulk_pause_resume_and_terminate_with_the_sdks_bulk_api(sdk: Sdk) -> None:
    """WorkflowBulkResourceApi, as Conductor's WorkflowBulkResource answers it: each run
    steered as its own endpoint would, the ones that cannot be reported with the
    message, the others done."""
    bulk = WorkflowBulkResourceApi(sdk.workflows.api_client)
    name = _greet_flow(sdk, WaitTask("hold"))
    ids = [sdk.start(name, {"name": f"B{i}"}) for i in range(3)]
    for workflow_id in ids:
        sdk.wait(workflow_id, lambda r: len(r.tasks) == 2)
    missing = unique("no_such_run")

    paused = bulk.pause_workflow([*ids, missing])
    assert paused.bulk_successful_results == ids
    assert list(paused.bulk_error_results) == [missing]
    assert missing in paused.bulk_error_results[missing]
    assert paused.message == "Bulk Request has been processed."
    assert {sdk.workflows.get_workflow(i).status for i in ids} == {"PAUSED"}

    resumed = bulk.resume_workflow(ids[:2])
    assert (resumed.bulk_successful_results, resumed.bulk_error_results) == (ids[:2], {})
    assert [sdk.workflows.get_workflow(i).status for i in ids] == ["RUNNING", "RUNNING", "PAUSED"]

    ended = bulk.terminate(ids, reason="bulk stop")
    assert ended.bulk_successful_results == ids
    for workflow_id in ids:
        run = sdk.workflows.get_workflow(workflow_id)
        assert (run.status, run.reason_for_incompletion) == ("TERMINATED", "bulk stop")

    # a finished run cannot be paused: its error names why, the list goes on
    again = bulk.pause_workflow(ids[:1])
    assert again.bulk_successful_results == []
    assert "TERMINATED" in again.bulk_error_results[ids[0]]

    restarted = bulk.restart(ids[:1])
    assert restarted.bulk_successful_results == ids[:1]
    assert sdk.wait(ids[0], lambda r: len(r.tasks) == 2).status == "RUNNING"
    sdk.workflows.terminate_workflow(ids[0], reason="done")


def test_bulk_requests_name_one_run_to_a_thousand(sdk: Sdk) -> None:
    for body in ([], None):
        answer = sdk.http.put("/api/workflow/bulk/pause", json=body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["message"] == "WorkflowIds list cannot be null."
    answer = sdk.http.post("/api/workflow/bulk/terminate", json=[f"r{i}" for i in range(1001)])
    assert answer.status_code == 400
    assert answer.json()["message"] == (
        "Cannot process more than 1000 workflows. Please use multiple requests."
    )
    answer = sdk.http.post("/api/workflow/bulk/retry", json=[1, {"a": 2}])
    assert answer.status_code == 400
    assert "$[0]: Input should be a valid string" in answer.json()["message"]


def test_retry_resumes_from_the_failed_task(sdk: Sdk) -> None:
    flaky = WorkflowTask(
        name="sdk2_fail_once",
        task_reference_name="flaky",
        type="SIMPLE",
        input_parameters={},
    )
    flaky.task_definition = {"name": "sdk2_fail_once", "retryCount": 0}
    flow = ConductorWorkflow(executor=sdk.executor, name=unique("sdk_retry"), version=1)
    greet = SimpleTask("sdk2_greet", "greet")
    greet.input_parameters.update({"name": "Cy"})
    flow >> greet
    definition = flow.to_workflow_def()
    definition.tasks.append(flaky)
    sdk.register(definition)
    workflow_id = sdk.start(definition.name, {})
    run = sdk.finished(workflow_id)
    assert run.status == "FAILED"

    sdk.workflows.retry_workflow(workflow_id)
    run = sdk.finished(workflow_id)
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert [(t.reference_task_name, t.status, t.retry_count) for t in run.tasks] == [
        ("greet", "COMPLETED", 0),
        ("flaky", "FAILED", 0),
        ("flaky", "COMPLETED", 1),
    ]


def test_retry_with_resume_subworkflow_tasks_retries_the_child_in_place(sdk: Sdk) -> None:
    """``retry_workflow(id, resume_subworkflow_tasks=True)``: the failed child run is
    retried (its failed task only) and the parent's SUB_WORKFLOW task waits for that same
    child again, as conductor-oss does; the parent completes with one SUB_WORKFLOW row."""
    flaky = WorkflowTask(
        name="sdk2_fail_once", task_reference_name="flaky", type="SIMPLE", input_parameters={}
    )
    flaky.task_definition = {"name": "sdk2_fail_once", "retryCount": 0}
    child = WorkflowDef(name=unique("sdk_resume_child"), version=1, tasks=[flaky])
    sdk.register(child)
    sub = WorkflowTask(
        name="child",
        task_reference_name="child",
        type="SUB_WORKFLOW",
        sub_workflow_param=SubWorkflowParams(name=child.name, version=1),
    )
    parent = WorkflowDef(name=unique("sdk_resume_parent"), version=1, tasks=[sub])
    sdk.register(parent)
    workflow_id = sdk.start(parent.name, {})
    run = sdk.finished(workflow_id)
    assert run.status == "FAILED"
    child_id = _task(run, "child").sub_workflow_id

    sdk.workflows.retry_workflow(workflow_id, resume_subworkflow_tasks=True)
    run = sdk.finished(workflow_id)
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert [(t.reference_task_name, t.status, t.sub_workflow_id) for t in run.tasks] == [
        ("child", "COMPLETED", child_id)
    ]
    child_run = sdk.workflows.get_workflow(child_id, include_tasks=True)
    assert child_run.status == "COMPLETED"
    assert [(t.status, t.retry_count, t.retried) for t in child_run.tasks] == [
        ("FAILED", 0, True),
        ("COMPLETED", 1, False),
    ]


def test_skip_a_task_and_rerun_the_run(sdk: Sdk) -> None:
    later = SimpleTask("sdk2_greet", "later")
    later.input_parameters.update({"name": "later"})
    name = _greet_flow(sdk, WaitTask("hold"), later)
    workflow_id = sdk.start(name, {"name": "Di"})
    sdk.wait(workflow_id, lambda r: len(r.tasks) == 2)
    sdk.workflows.skip_task_from_workflow(
        workflow_id, "later", SkipTaskRequest(task_output={"skipped": True})
    )
    sdk.executor.signal_async(workflow_id, "COMPLETED", {})
    run = sdk.finished(workflow_id)
    assert run.status == "COMPLETED"
    assert _task(run, "later").status == "SKIPPED"
    # the SDK sends the SkipTaskRequest as a query parameter ``skipTaskRequest`` holding
    # its Python repr, which Conductor's server does not bind (it ignores it): the skipped
    # task's output stays empty there as here (a JSON body gives it one here)
    assert _task(run, "later").output_data == {}

    greet_id = _task(run, "greet").task_id
    rerun = RerunWorkflowRequest(re_run_from_task_id=greet_id, task_input={"name": "Ed"})
    assert sdk.workflows.rerun_workflow(workflow_id, rerun) == workflow_id
    # the SKIPPED row (seq 0) stays, as Conductor's rerun keeps the rows before the task
    run = sdk.wait(
        workflow_id,
        lambda r: (
            [(t.reference_task_name, t.status) for t in r.tasks][-1:] == [("hold", "IN_PROGRESS")]
        ),
    )
    assert [t.reference_task_name for t in run.tasks] == ["later", "greet", "hold"]
    assert run.status == "RUNNING"
    # Conductor's rerun keeps the run's output until the run ends again
    assert run.output == {"greeting": "Hello, Di"}
    assert _task(run, "greet").output_data == {"greeting": "Hello, Ed"}
    sdk.workflows.terminate_workflow(workflow_id, reason="done")


def test_runs_by_correlation_id(sdk: Sdk) -> None:
    name = _greet_flow(sdk)
    key = unique("order")
    first = sdk.start(name, {"name": "F"}, correlation_id=key)
    assert sdk.finished(first).status == "COMPLETED"
    found = sdk.workflows.get_by_correlation_ids(name, [key], include_completed=True)
    assert [w.workflow_id for w in found[key]] == [first]
    assert sdk.workflows.get_by_correlation_ids(name, [key]) == {key: []}


def test_search_and_its_summaries_as_conductor_answers_them(sdk: Sdk) -> None:
    """``WorkflowClient.search``: an ``IN`` list allows any of its values, clauses are
    ANDed (two names: nothing), ``freeText`` is a run's id, correlation id or definition
    name and still meets the query; each WorkflowSummary has Conductor's text times
    (``endTime`` only once the run ended) and input as JSON text. A run read without
    its tasks has an empty task list, as Conductor's Workflow always has one."""
    first, second = _greet_flow(sdk), _greet_flow(sdk)
    waiting = ConductorWorkflow(executor=sdk.executor, name=unique("sdk_search_wait"), version=1)
    waiting >> WaitTask("hold")
    sdk.register(waiting)
    key = unique("search")
    a = sdk.start(first, {"name": "A"}, correlation_id=key)
    b = sdk.start(second, {"name": "B"})
    held = sdk.start(waiting.name, {})
    assert sdk.finished(a).status == "COMPLETED" and sdk.finished(b).status == "COMPLETED"

    def found(query: str | None = None, free_text: str = "*") -> dict[str, Any]:
        result = sdk.workflows.search(start=0, size=100, free_text=free_text, query=query)
        return {summary.workflow_id: summary for summary in result.results}

    assert set(found(f"workflowType IN ({first},{second})")) == {a, b}
    assert found(f"workflowType = {first} AND workflowType = {second}") == {}
    names = f"workflowType IN ({first}, {second}, {waiting.name})"
    assert set(found(f"{names} AND status IN (RUNNING)")) == {held}
    assert set(found(f"{names} AND status IN (COMPLETED, RUNNING)")) == {a, b, held}
    assert set(found(free_text=second)) == {b}
    assert set(found(free_text=key)) == {a}
    assert set(found(free_text=a)) == {a}
    assert found("status IN (RUNNING)", free_text=a) == {}

    summaries = found(names)
    now = datetime.now(UTC)
    done, going = summaries[a], summaries[held]
    started = datetime.fromisoformat(done.start_time)
    assert timedelta(0) <= now - started < timedelta(minutes=5)
    assert done.start_time.endswith("Z") and len(done.start_time) == len("2026-01-01T00:00:00.000Z")
    ended = datetime.fromisoformat(done.end_time)
    assert done.execution_time == round((ended - started).total_seconds() * 1000)
    assert going.end_time is None and going.execution_time == 0
    assert json.loads(done.input) == {"name": "A"} and done.correlation_id == key
    assert json.loads(done.output) == {"greeting": "Hello, A"}

    # read by correlation id, a run comes without its tasks by default
    [read] = sdk.workflows.get_by_correlation_ids(first, [key], include_completed=True)[key]
    assert read.workflow_id == a and read.tasks == []
    sdk.workflows.terminate_workflow(held, reason="search test done")


def test_execute_waits_for_the_result(sdk: Sdk) -> None:
    name = _greet_flow(sdk)
    run = sdk.executor.execute(name, version=1, workflow_input={"name": "Gil"})
    assert run.status == "COMPLETED"
    assert run.output == {"greeting": "Hello, Gil"}


def test_a_signal_completes_the_waiting_task(sdk: Sdk) -> None:
    flow = ConductorWorkflow(executor=sdk.executor, name=unique("sdk_signal"), version=1)
    greet = SimpleTask("sdk2_greet", "greet")
    greet.input_parameters.update({"name": "${hold.output.name}"})
    flow >> WaitTask("hold") >> greet
    flow.output_parameters({"greeting": "${greet.output.greeting}"})
    sdk.register(flow)
    workflow_id = sdk.start(flow.name, {})
    sdk.wait(workflow_id, lambda r: len(r.tasks) == 1)
    response = sdk.executor.signal(workflow_id, "COMPLETED", {"name": "Hal"})
    assert response.workflow_id == workflow_id
    run = sdk.finished(workflow_id)
    assert run.output == {"greeting": "Hello, Hal"}


def test_dynamic_fork_over_decorated_workers(sdk: Sdk) -> None:
    flow = ConductorWorkflow(executor=sdk.executor, name=unique("sdk_dyn_fork"), version=1)
    fork = DynamicForkTask("fan", join_task=JoinTask("fan_join"))
    fork.input_parameters.update(
        {
            "dynamicTasks": [
                {"name": "sdk2_item", "taskReferenceName": "one", "type": "SIMPLE"},
                {"name": "sdk2_item", "taskReferenceName": "two", "type": "SIMPLE"},
            ],
            "dynamicTasksInputs": {"one": {"n": 1}, "two": {"n": 2}},
        }
    )
    flow >> fork
    flow.output_parameters({"joined": "${fan_join.output}"})
    sdk.register(flow)
    run = sdk.finished(sdk.start(flow.name, {}))
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert run.output == {"joined": {"one": {"double": 2}, "two": {"double": 4}}}


def test_a_start_request_routes_a_type_to_the_workers_domain(sdk: Sdk) -> None:
    flow = ConductorWorkflow(executor=sdk.executor, name=unique("sdk_domain"), version=1)
    step = SimpleTask("sdk2_domained", "step")
    step.input_parameters.update({"x": 5})
    flow >> step
    flow.output_parameters({"where": "${step.output.where}"})
    sdk.register(flow)
    workflow_id = sdk.start(flow.name, {}, task_to_domain={"sdk2_domained": sdk_workers.DOMAIN})
    run = sdk.finished(workflow_id)
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert run.output == {"where": sdk_workers.DOMAIN}
    assert _task(run, "step").domain == sdk_workers.DOMAIN


# --- every task type in one workflow --------------------------------------------------------


def _kitchen_sink(name: str, child: str, echo_url: str) -> WorkflowDef:
    def t(ref: str, kind: str, **fields: Any) -> WorkflowTask:
        return WorkflowTask(
            name=fields.pop("name", ref), task_reference_name=ref, type=kind, **fields
        )

    greet_child = WorkflowDef(
        name=unique("inline_child"),
        version=1,
        tasks=[t("c_greet", "SIMPLE", name="sdk2_greet", input_parameters={"name": "child"})],
        output_parameters={"greeting": "${c_greet.output.greeting}"},
    )
    loop_body = t(
        "bump",
        "INLINE",
        input_parameters={"evaluatorType": "graaljs", "expression": "1"},
    )
    return WorkflowDef(
        name=name,
        version=1,
        schema_version=2,
        owner_email="test@example.com",
        tasks=[
            t(
                "greet",
                "SIMPLE",
                name="sdk2_greet",
                input_parameters={"name": "${workflow.input.name}"},
            ),
            t(
                "http",
                "HTTP",
                input_parameters={
                    "http_request": {
                        "uri": echo_url,
                        "method": "POST",
                        "body": {"greeting": "${greet.output.greeting}"},
                    }
                },
            ),
            t("count", "INLINE", input_parameters={"evaluatorType": "graaljs", "expression": "2"}),
            t(
                "range",
                "JSON_JQ_TRANSFORM",
                input_parameters={"n": "${count.output.result}", "queryExpression": "[range(.n)]"},
            ),
            t("remember", "SET_VARIABLE", input_parameters={"said": "${greet.output.greeting}"}),
            t(
                "choose",
                "SWITCH",
                evaluator_type="value-param",
                expression="n",
                input_parameters={"n": "${count.output.result}"},
                decision_cases={"2": [t("nothing", "NOOP")]},
                default_case=[
                    t("stop", "TERMINATE", input_parameters={"terminationStatus": "FAILED"})
                ],
            ),
            t(
                "decide",
                "DECISION",
                case_value_param="flag",
                input_parameters={"flag": "${workflow.input.flag}"},
                decision_cases={
                    "yes": [
                        t(
                            "lambda",
                            "LAMBDA",
                            input_parameters={"scriptExpression": "return {ok: true}"},
                        )
                    ]
                },
            ),
            t(
                "only_branch",
                "EXCLUSIVE_JOIN",
                join_on=["lambda"],
            ),
            t(
                "fork",
                "FORK_JOIN",
                fork_tasks=[
                    [t("one", "SIMPLE", name="sdk2_item", input_parameters={"n": 1})],
                    [t("pause", "WAIT", input_parameters={"duration": "1s"})],
                    [t("approve", "HUMAN")],
                ],
            ),
            t("fork_join", "JOIN", join_on=["one", "pause", "approve"]),
            t(
                "fan",
                "FORK_JOIN_DYNAMIC",
                input_parameters={
                    "forkTaskName": "sdk2_item",
                    "forkTaskInputs": [{"n": 3}, {"n": 4}],
                },
            ),
            t("fan_join", "JOIN"),
            t(
                "dyn",
                "DYNAMIC",
                name="dynamic_task",
                dynamic_task_name_param="taskToExecute",
                input_parameters={"taskToExecute": "sdk2_item", "n": 5},
            ),
            t(
                "loop",
                "DO_WHILE",
                loop_condition="$.loop['iteration'] < 2",
                loop_over=[loop_body],
            ),
            t(
                "sub",
                "SUB_WORKFLOW",
                sub_workflow_param=SubWorkflowParams(
                    name=greet_child.name, version=1, workflow_definition=greet_child
                ),
            ),
            t(
                "spawn",
                "START_WORKFLOW",
                input_parameters={"startWorkflow": {"name": child, "input": {"name": "spawned"}}},
            ),
            t(
                "finish",
                "TERMINATE",
                input_parameters={
                    "terminationStatus": "COMPLETED",
                    "workflowOutput": {
                        "echo": "${http.output.response.body.got.greeting}",
                        "range": "${range.output.result}",
                        "said": "${workflow.variables.said}",
                        "lambda": "${lambda.output.result.ok}",
                        "dyn": "${dyn.output.double}",
                        "loops": "${loop.output.iteration}",
                        "child": "${sub.output.greeting}",
                    },
                },
            ),
        ],
    )


def test_a_kitchen_sink_workflow_with_every_task_type(sdk: Sdk) -> None:
    child = _greet_flow(sdk)
    with echo_server() as echo_url:
        definition = _kitchen_sink(unique("kitchen_sink"), child, echo_url)
        sdk.register(definition)
        workflow_id = sdk.start(definition.name, {"name": "Kit", "flag": "yes"})
        sdk.wait(workflow_id, lambda r: any(t.task_type == "HUMAN" for t in r.tasks))
        sdk.executor.update_task_by_ref_name(
            {"approved": True}, workflow_id, "approve", "COMPLETED"
        )
        run = sdk.finished(workflow_id, seconds=90)
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert run.output == {
        "echo": "Hello, Kit",
        "range": [0, 1],
        "said": "Hello, Kit",
        "lambda": True,
        "dyn": 10,
        "loops": 2,
        "child": "Hello, child",
    }
    assert {t.task_type for t in run.tasks} >= {
        "sdk2_greet",
        "sdk2_item",
        "HTTP",
        "INLINE",
        "JSON_JQ_TRANSFORM",
        "SET_VARIABLE",
        "SWITCH",
        "NOOP",
        "DECISION",
        "LAMBDA",
        "EXCLUSIVE_JOIN",
        "FORK",
        "JOIN",
        "WAIT",
        "HUMAN",
        "DO_WHILE",
        "SUB_WORKFLOW",
        "START_WORKFLOW",
        "TERMINATE",
    }
    spawned = _task(run, "spawn").output_data["workflowId"]
    assert sdk.finished(spawned).output == {"greeting": "Hello, spawned"}
