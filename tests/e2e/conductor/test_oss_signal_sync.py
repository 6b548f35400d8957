"""conductor-oss's Java e2e tests ``SignalTaskTest`` (``e2e/src/test/java/io/conductor/
e2e/task``) and ``SyncWorkflowExecutionTest`` (``.../e2e/workflow``), over Stepway's HTTP
API.

Translations:

* SignalTaskTest posts to ``/tasks/{workflowId}/COMPLETED/signal[/sync]`` with OkHttp;
  so does this port, with httpx. Its workflow names (``signal_e2e_*_<nanoTime>``) are
  ``unique()`` here.
* SyncWorkflowExecutionTest's ``@BeforeAll`` registers metadata/sync_workflows.json
  (e2e/src/test/resources); here a module fixture registers the same definitions, each
  workflow and worker task type renamed ``unique()`` (the references between them too:
  ``sub_flow`` -> ``PopulationMinMax``, ``http_sync`` -> ``http``). The HTTP tasks of
  ``load_test_perf_sync_workflow`` and ``sync_workflow_failed_case`` call
  https://orkes-api-tester.orkesconductor.com; here a local server answers the same GETs.
* ``WorkflowClient.executeWorkflow(request, waitUntilTask[, waitForSeconds])`` is
  ``POST /workflow/execute/{name}/{version}`` with ``requestId``, ``waitUntilTaskRef``
  and ``waitForSeconds`` (left out when the Java passes none: the server's default,
  10 s) and the StartWorkflowRequest as the body; its ``CompletableFuture.get(timeout)``
  is the HTTP client's timeout; the time taken is measured around the call.
* No worker runs in the Java suite for these task types, so the runs that reach a
  SIMPLE task answer when the wait ends. Where that wait is what the test waits
  through, it is shortened, with the Java's margins kept: ``waitForSeconds`` 2 (Java:
  the default 10) with the ``get`` timeout 2 + (Java's - 10) s; testSyncWorkflowExecution
  ``waitForSeconds`` 3 (Java: 25) and its bound 3 + 5 s (Java: 30 s = 25 + 5 s);
  testSyncWorkflowWithInlineWaitAndWaitUntilTaskRef a 2 s WAIT (Java: 5 s),
  ``waitForSeconds`` 6 (Java: 25), ``get`` timeout 16 s (Java: 35 s) and the bound
  6 + 5 s (Java: 30 s = 25 + 5 s).
* testSyncWorkflowExecution6 is ``@Disabled`` upstream and asserts an answer
  conductor-oss does not give: the port asserts conductor-oss's (the test says why).
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.runtime.builtins.testing import LocalServer, Reply, Request
from tests.e2e.conductor.harness import Conductor, unique
from tests.e2e.conductor.oss_e2e import terminate
from tests.e2e.conductor.test_oss_control_flow import java_task, java_workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


# --- SignalTaskTest -------------------------------------------------------------------


def _start_blocked_workflow(conductor: Conductor, wf_name: str) -> str:
    """SignalTaskTest.startBlockedWorkflow: a workflow of one WAIT task without duration
    or until, started; the run once its first task is IN_PROGRESS (Java: at most 30 s)."""
    conductor.register(
        {
            "name": wf_name,
            "version": 1,
            "ownerEmail": "test@conductor.io",
            "tasks": [{"type": "WAIT", "name": "wait_for_signal", "taskReferenceName": "wait_ref"}],
        }
    )
    workflow_id = conductor.start(wf_name, version=1)
    run = conductor.wait(
        workflow_id, lambda r: bool(r["tasks"]) and r["tasks"][0]["status"] == "IN_PROGRESS", 30
    )
    assert run["tasks"]
    assert run["tasks"][0]["status"] == "IN_PROGRESS"
    return workflow_id


def test_async_signal_completes_wait_task(conductor: Conductor) -> None:
    # SignalTaskTest.testAsyncSignalCompletesWaitTask
    # "async signal completes the WAIT task and advances the workflow"
    workflow_id = _start_blocked_workflow(conductor, unique("signal_e2e_async"))
    r = conductor.http.post(f"/api/tasks/{workflow_id}/COMPLETED/signal", json={})
    assert r.status_code == 200, "Expected 200 from async signal"

    run = conductor.wait(workflow_id, lambda r: r["tasks"][0]["status"] == "COMPLETED", 15)
    assert run["tasks"][0]["status"] == "COMPLETED", "WAIT task should be COMPLETED after signal"


def test_sync_signal_returns_workflow_response(conductor: Conductor) -> None:
    # SignalTaskTest.testSyncSignalReturnsWorkflowResponse
    # "sync signal returns a SignalResponse containing the target workflow id"
    workflow_id = _start_blocked_workflow(conductor, unique("signal_e2e_sync"))
    r = conductor.http.post(f"/api/tasks/{workflow_id}/COMPLETED/signal/sync", json={})
    assert r.status_code == 200, "Expected 200 from sync signal"
    body = r.text
    assert body is not None
    assert '"targetWorkflowId"' in body, (
        f"Response must contain targetWorkflowId field, got: {body}"
    )
    assert workflow_id in body, f"Response must echo back the workflow id, got: {body}"
    # Java: the text has no '"signalTimeout":true' (Jackson's compact form); read here
    # from the JSON, whatever its spacing
    assert r.json().get("signalTimeout") is not True, (
        f"signalTimeout should not be true for a successful signal, got: {body}"
    )


def test_async_signal_workflow_not_found(conductor: Conductor) -> None:
    # SignalTaskTest.testAsyncSignalWorkflowNotFound
    # "async signal on non-existent workflow returns 404" (a random UUID)
    r = conductor.http.post(f"/api/tasks/{uuid.uuid4()}/COMPLETED/signal", json={})
    assert r.status_code == 404, "Expected 404 for non-existent workflow"


def test_sync_signal_workflow_not_found(conductor: Conductor) -> None:
    # SignalTaskTest.testSyncSignalWorkflowNotFound
    # "sync signal on non-existent workflow returns 404" (a random UUID)
    r = conductor.http.post(f"/api/tasks/{uuid.uuid4()}/COMPLETED/signal/sync", json={})
    assert r.status_code == 404, "Expected 404 for non-existent workflow"


# --- SyncWorkflowExecutionTest --------------------------------------------------------

#: SyncWorkflowExecutionTest.threshold (ms)
THRESHOLD = 30000
#: the shortened default wait (see the module docstring)
WAIT_FOR_SECONDS = 2

_WORKFLOWS = [
    "sync_workflow_no_poller",
    "sync_workflow_failed_case",
    "load_test_perf_sync_workflow",
    "sync_workflow_end_with_simple_task",
    "sync_workflow_end_with_set_variable_task",
    "sync_workflow_end_with_jq_task",
    "sync_workflow_end_with_subworkflow_task",
    "http",
    "PopulationMinMax",
    "sync_workflow_with_inline_wait_and_simple_task",
]
_WORKERS = [
    "simple_task_pia0h_ref",
    "x_test_worker_0",
    "x_test_worker_1",
    "x_test_worker_2",
    "x_test_worker_00",
    "simple_task_in8x5",
    "simple",
]


def _sample(name: str, tasks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A workflow of sync_workflows.json ("Edit or extend this sample workflow...")."""
    return java_workflow(
        name,
        tasks,
        description="Edit or extend this sample workflow. Set the workflow name to get started",
        failureWorkflow="",
        workflowStatusListenerEnabled=False,
        ownerEmail="test@conductor.io",
        variables={},
        inputTemplate={},
        onStateChange={},
        **fields,
    )


def _http(name: str, uri: str, read_timeout: int | str = 3000) -> dict[str, Any]:
    return java_task(
        name=name,
        taskReferenceName=name,
        type="HTTP",
        inputParameters={
            "http_request": {
                "uri": uri,
                "method": "GET",
                "connectionTimeOut": 3000,
                "readTimeOut": read_timeout,
                "accept": "application/json",
                "contentType": "application/json",
            }
        },
    )


def _sub_flow_inline_def() -> dict[str, Any]:
    return {
        "name": "sub_flow_inline",
        "description": "sub_flow_inline",
        "retryCount": 0,
        "timeoutSeconds": 3000,
        "inputKeys": [],
        "outputKeys": [],
        "timeoutPolicy": "TIME_OUT_WF",
        "retryLogic": "FIXED",
        "retryDelaySeconds": 60,
        "responseTimeoutSeconds": 20,
        "inputTemplate": {},
        "rateLimitPerFrequency": 0,
        "rateLimitFrequencyInSeconds": 1,
        "pollTimeoutSeconds": 3600,
        "backoffScaleFactor": 1,
    }


def _inline_sub(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "inline_sub",
        "version": 1,
        "tasks": tasks,
        "inputParameters": [],
        "outputParameters": {},
        "schemaVersion": 2,
        "restartable": True,
        "workflowStatusListenerEnabled": False,
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
        "variables": {},
        "inputTemplate": {},
        "onStateChange": {},
    }


def _fact_length(ref: str, w: dict[str, str]) -> dict[str, Any]:
    return java_task(
        name=ref,
        taskReferenceName=ref,
        description="Fail if the fact is too short",
        type="SWITCH",
        inputParameters={"number": "${get_data.output.number}"},
        decisionCases={
            "LONG": [java_task(name=w["x_test_worker_1"], taskReferenceName="simple_task_1")],
            "SHORT": [
                java_task(
                    name="too_short",
                    taskReferenceName="too_short",
                    type="TERMINATE",
                    inputParameters={
                        "terminationReason": "value too short",
                        "terminationStatus": "FAILED",
                    },
                )
            ],
        },
        evaluatorType="javascript",
        expression="$.number < 15 ? 'LONG':'LONG'",
    )


def sync_workflows(
    n: dict[str, str], w: dict[str, str], api: str, fail: str
) -> list[dict[str, Any]]:
    """metadata/sync_workflows.json with the names ``n`` (workflows) and ``w`` (worker
    task types), the orkes-api-tester URIs at ``api`` and cdatfact.ninja (a host that
    does not resolve) at ``fail``."""
    lvl2 = java_task(
        name="sub_flow_inline_lvl2",
        taskReferenceName="sub_flow_inline_lvl2",
        type="SUB_WORKFLOW",
        subWorkflowParam={
            "name": "inline_sub",
            "version": 1,
            "workflowDefinition": _inline_sub(
                [java_task(name=w["x_test_worker_2"], taskReferenceName="simple_task_0")]
            ),
        },
        taskDefinition=_sub_flow_inline_def(),
    )
    sub_flow_inline = java_task(
        name="sub_flow_inline",
        taskReferenceName="sub_flow_inline",
        type="SUB_WORKFLOW",
        subWorkflowParam={
            "name": "inline_sub",
            "version": 1,
            "workflowDefinition": _inline_sub(
                [
                    java_task(name=w["x_test_worker_2"], taskReferenceName="simple_task_0"),
                    _fact_length("fact_length2", w),
                    lvl2,
                ]
            ),
        },
        taskDefinition=_sub_flow_inline_def(),
    )
    load_test = java_workflow(
        n["load_test_perf_sync_workflow"],
        [
            java_task(name=w["x_test_worker_0"], taskReferenceName="simple_task_0"),
            java_task(
                name="jq",
                taskReferenceName="jq",
                type="JSON_JQ_TRANSFORM",
                inputParameters={
                    "key1": {"value1": ["a", "b"]},
                    "queryExpression": "{ key3: (.key1.value1 + .key2.value2) }",
                    "value2": ["d", "e"],
                },
            ),
            {
                **_http("http_task_5saz2", f"{api}/api", "3000"),
                "taskReferenceName": "http_task_5saz2_ref",
            },
            java_task(
                name="wait",
                taskReferenceName="wait",
                type="WAIT",
                inputParameters={"duration": "1 seconds"},
            ),
            java_task(
                name="set_state",
                taskReferenceName="set_state",
                type="SET_VARIABLE",
                inputParameters={"call_made": True, "number": "${simple_task_0.output.number}"},
            ),
            java_task(
                name="fork_task_t7nhng",
                taskReferenceName="fork_task_t7nhng_ref",
                type="FORK_JOIN",
                forkTasks=[
                    [
                        java_task(
                            name=w["x_test_worker_1"], taskReferenceName="simple_task_hap09_ref"
                        )
                    ],
                    [
                        java_task(
                            name=w["x_test_worker_0"], taskReferenceName="simple_task_2nwrl_ref"
                        )
                    ],
                    [
                        java_task(
                            name=w["x_test_worker_2"], taskReferenceName="simple_task_jgi39g_ref"
                        )
                    ],
                ],
            ),
            java_task(
                name="join_task_y6nux",
                taskReferenceName="join_task_y6nux_ref",
                type="JOIN",
                joinOn=["simple_task_hap09_ref", "simple_task_jgi39g_ref", "simple_task_2nwrl_ref"],
            ),
            java_task(
                name="sub_flow",
                taskReferenceName="sub_flow",
                type="SUB_WORKFLOW",
                subWorkflowParam={"name": n["PopulationMinMax"]},
            ),
            java_task(
                name="dynamic_fork",
                taskReferenceName="dynamic_fork",
                type="FORK_JOIN_DYNAMIC",
                inputParameters={"forkTaskName": w["x_test_worker_0"], "forkTaskInputs": [1, 2, 3]},
                dynamicForkTasksParam="forkedTasks",
                dynamicForkTasksInputParamName="forkedTasksInputs",
            ),
            java_task(name="dynamic_fork_join", taskReferenceName="dynamic_fork_join", type="JOIN"),
            java_task(
                name="fork",
                taskReferenceName="fork",
                type="FORK_JOIN",
                forkTasks=[
                    [
                        java_task(
                            name="loop_until_success",
                            taskReferenceName="loop_until_success",
                            type="DO_WHILE",
                            inputParameters={"loop_count": 2},
                            optional=True,
                            loopCondition="if ( $.loop_count['iteration'] < "
                            "$.loop_until_success ) { true; } else { false; }",
                            loopOver=[_fact_length("fact_length", w)],
                        ),
                        sub_flow_inline,
                    ],
                    [
                        java_task(name=w["x_test_worker_2"], taskReferenceName="simple_task_2"),
                        java_task(name=w["x_test_worker_1"], taskReferenceName="simple_task_5"),
                    ],
                ],
                joinOn=["sub_flow_inline", "simple_task_5"],
            ),
            java_task(
                name="fork_join",
                taskReferenceName="fork_join",
                type="JOIN",
                joinOn=["simple_task_5", "sub_flow_inline"],
            ),
        ],
        outputParameters={
            "task1": "${simple_task_0.output}",
            "jq": "${jq.output}",
            "inner_task": "${x_test_worker_1.output}",
        },
        workflowStatusListenerEnabled=False,
        ownerEmail="test@conductor.io",
        variables={},
        inputTemplate={},
        onStateChange={},
    )
    set_variable = java_task(
        name="set_variable_task_1fi09_ref",
        taskReferenceName="set_variable_task_1fi09_ref",
        type="SET_VARIABLE",
        inputParameters={"name": "Orkes"},
    )
    jq = java_task(
        name="json_transform_task_10i8a",
        taskReferenceName="json_transform_task_10i8a_ref",
        type="JSON_JQ_TRANSFORM",
        inputParameters={
            "persons": [
                {"name": "some", "last": "name", "email": "mail@mail.com", "id": 1},
                {"name": "some2", "last": "name2", "email": "mail2@mail.com", "id": 2},
            ],
            "queryExpression": ".persons | map({user:{email,id}})",
        },
    )
    return [
        _sample(
            n["sync_workflow_no_poller"],
            [java_task(name=w["simple_task_pia0h_ref"], taskReferenceName="simple_task_pia0h_ref")],
        ),
        _sample(
            n["sync_workflow_failed_case"],
            [_http("http_no_fail", f"{api}/get"), _http("http_fail", f"{fail}/fact")],
        ),
        load_test,
        _sample(
            n["sync_workflow_end_with_simple_task"],
            [java_task(name=w["x_test_worker_00"], taskReferenceName="simple_task_rka0w_ref")],
        ),
        _sample(n["sync_workflow_end_with_set_variable_task"], [set_variable]),
        _sample(n["sync_workflow_end_with_jq_task"], [jq]),
        _sample(
            n["sync_workflow_end_with_subworkflow_task"],
            [
                java_task(
                    name="http",
                    taskReferenceName="http_sync",
                    type="SUB_WORKFLOW",
                    subWorkflowParam={"name": n["http"]},
                )
            ],
        ),
        _sample(
            n["http"],
            [java_task(name=w["simple_task_in8x5"], taskReferenceName="simple_task_in8x5_ref")],
        ),
        _sample(
            n["PopulationMinMax"],
            [
                java_task(
                    name="set_variable_task_jqc56h_ref",
                    taskReferenceName="set_variable_task_jqc56h_ref",
                    type="SET_VARIABLE",
                    inputParameters={"name": "Orkes"},
                )
            ],
        ),
        java_workflow(
            n["sync_workflow_with_inline_wait_and_simple_task"],
            [
                java_task(
                    name="inline",
                    taskReferenceName="inline_ref",
                    type="INLINE",
                    inputParameters={
                        "expression": "(function () {\n  return $.value1 + $.value2;\n})();",
                        "evaluatorType": "graaljs",
                        "value1": 1,
                        "value2": 2,
                    },
                ),
                # shortened: "2 seconds" (Java: "5 seconds")
                java_task(
                    name="wait",
                    taskReferenceName="wait_ref",
                    type="WAIT",
                    inputParameters={"duration": "2 seconds"},
                ),
                java_task(name=w["simple"], taskReferenceName="simple_ref"),
            ],
            description="Workflow with inline task, wait task (5 seconds) and simple task "
            "for testing waitUntilTaskRef",
            failureWorkflow="",
            workflowStatusListenerEnabled=False,
            ownerEmail="test@conductor.io",
            variables={},
            inputTemplate={},
            enforceSchema=True,
            metadata={},
            maskedFields=[],
        ),
    ]


def _api_tester(request: Request) -> Reply:
    """orkes-api-tester's GET /get and /api: a JSON answer."""
    return Reply(body={"path": request.path})


@pytest.fixture(scope="module")
def sync_names(dev_url: str) -> Iterator[dict[str, str]]:
    """SyncWorkflowExecutionTest.init: every workflow of sync_workflows.json registered
    (``updateWorkflowDefs``); the unique name of each."""
    n = {name: unique(name) for name in _WORKFLOWS}
    w = {name: unique(name) for name in _WORKERS}
    # nothing listens on ``fail``'s port, and it stays bound (not listening) while the
    # module runs: a port merely left free could become a connection's own source port
    # and a connect to it connect to itself (TCP simultaneous open on loopback)
    with LocalServer(_api_tester) as server, socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        fail = f"http://127.0.0.1:{closed.getsockname()[1]}"
        with httpx.Client(base_url=dev_url, timeout=30) as http:
            r = http.put("/api/metadata/workflow", json=sync_workflows(n, w, server.url, fail))
            assert r.status_code < 300, r.text
        yield n


def _execute(
    conductor: Conductor,
    name: str,
    wait_until: str | None,
    wait_for_seconds: int | None,
    get_timeout: float,
) -> tuple[dict[str, Any], int]:
    """``workflowClient.executeWorkflow(...)`` then ``future.get(get_timeout)``: the
    WorkflowRun and the time taken (ms)."""
    params: dict[str, Any] = {"requestId": str(uuid.uuid4())}
    if wait_until is not None:
        params["waitUntilTaskRef"] = wait_until
    if wait_for_seconds is not None:
        params["waitForSeconds"] = wait_for_seconds
    start = time.monotonic()
    r = conductor.http.post(
        f"/api/workflow/execute/{name}/1",
        params=params,
        json={"name": name, "version": 1, "input": {}},
        timeout=get_timeout,
    )
    time_taken = int((time.monotonic() - start) * 1000)
    assert r.status_code == 200, r.text
    run: dict[str, Any] = r.json()
    return run, time_taken


def test_sync_workflow_execution(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowExecution
    # "Check sync workflow is executed within 20 seconds": executeWorkflow(request,
    # List.of(), 25) of load_test_perf_sync_workflow, whose first task (a SIMPLE) nobody
    # polls; get(120 s); the time taken under the threshold. Shortened: waitForSeconds 3,
    # the bound 3 + 5 s (Java: 25 s and 30 s).
    wait_for_seconds = 3
    workflow_run, time_taken = _execute(
        conductor, sync_names["load_test_perf_sync_workflow"], "", wait_for_seconds, 120
    )
    assert workflow_run["workflowId"]
    assert time_taken < (wait_for_seconds + 5) * 1000, f"Time taken was {time_taken}"
    terminate(conductor, workflow_run["workflowId"], "cleanup")  # not in the Java


def test_sync_workflow_execution2(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowExecution2
    # "Check sync workflow end with simple task": waitUntilTaskRef its SIMPLE task,
    # which nobody polls; get(11 s): RUNNING. Shortened: waitForSeconds 2, get(3 s).
    workflow_run, time_taken = _execute(
        conductor,
        sync_names["sync_workflow_end_with_simple_task"],
        "simple_task_rka0w_ref",
        WAIT_FOR_SECONDS,
        WAIT_FOR_SECONDS + 1,
    )
    assert time_taken < THRESHOLD, f"Time taken was {time_taken}"
    assert workflow_run["status"] == "RUNNING"
    terminate(conductor, workflow_run["workflowId"], "Terminated")


def test_sync_workflow_execution3(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowExecution3
    # "Check sync workflow end with set variable task": get(11 s), the server's default
    # wait (10 s)
    _, time_taken = _execute(
        conductor,
        sync_names["sync_workflow_end_with_set_variable_task"],
        "set_variable_task_1fi09_ref",
        None,
        11,
    )
    assert time_taken < THRESHOLD, f"Time taken was {time_taken}"


def test_sync_workflow_execution4(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowExecution4
    # "Check sync workflow end with jq task": get(11 s), the server's default wait
    _, time_taken = _execute(
        conductor,
        sync_names["sync_workflow_end_with_jq_task"],
        "json_transform_task_jjowa_ref",
        None,
        11,
    )
    assert time_taken < THRESHOLD, f"Time taken was {time_taken}"


def test_sync_workflow_execution5(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowExecution5
    # "Check sync workflow end with sub workflow task": waitUntilTaskRef the SUB_WORKFLOW
    # task, whose child's SIMPLE task nobody polls; get(21 s). Shortened: waitForSeconds
    # 2, get(13 s).
    workflow_run, time_taken = _execute(
        conductor,
        sync_names["sync_workflow_end_with_subworkflow_task"],
        "http_sync",
        WAIT_FOR_SECONDS,
        WAIT_FOR_SECONDS + 11,
    )
    assert time_taken < THRESHOLD, f"Time taken was {time_taken}"
    terminate(conductor, workflow_run["workflowId"], "cleanup")  # not in the Java


def test_sync_workflow_execution6(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowExecution6 (@Disabled upstream: its HTTP
    # hosts are unreachable there)
    # "Check sync workflow end with failed case": http_no_fail answers, http_fail's host
    # does not (here: a closed local port); waitUntilTaskRef http_fail; get(9 s).
    # The Java asserts RUNNING, which is not conductor-oss's answer either: http_fail has
    # no task definition, so conductor-oss gives it a stand-in with retryCount 0
    # (MetadataMapperService.populateWorkflowTaskWithDefinition) and DeciderService.retry
    # fails the run at once. This asserts conductor-oss's answer.
    workflow_run, time_taken = _execute(
        conductor, sync_names["sync_workflow_failed_case"], "http_fail", None, 9
    )
    assert time_taken < THRESHOLD, f"Time taken was {time_taken}"
    assert workflow_run["status"] == "FAILED", workflow_run
    assert not workflow_run.get("signalTimeout")
    failed = [t for t in workflow_run["tasks"] if t["referenceTaskName"] == "http_fail"]
    assert [t["status"] for t in failed] == ["FAILED"]
    assert "connection failed" in (failed[0]["reasonForIncompletion"] or "")


def _no_poller(conductor: Conductor, sync_names: dict[str, str]) -> None:
    """testSyncWorkflowExecution7 and testSyncWorkflowVariableUpdates (the same steps):
    sync_workflow_no_poller, waitUntilTaskRef its SIMPLE task, which nobody polls;
    get(21 s): RUNNING. Shortened: waitForSeconds 2, get(13 s)."""
    workflow_run, time_taken = _execute(
        conductor,
        sync_names["sync_workflow_no_poller"],
        "simple_task_pia0h_ref",
        WAIT_FOR_SECONDS,
        WAIT_FOR_SECONDS + 11,
    )
    assert time_taken < THRESHOLD, f"Time taken was {time_taken}"
    assert workflow_run["status"] == "RUNNING"
    terminate(conductor, workflow_run["workflowId"], "Terminated")


def test_sync_workflow_execution7(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowExecution7
    # "Check sync workflow end with no poller"
    _no_poller(conductor, sync_names)


def test_sync_workflow_variable_updates(conductor: Conductor, sync_names: dict[str, str]) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowVariableUpdates
    # "check sync workflow with update variables": the same steps as testSyncWorkflowExecution7
    _no_poller(conductor, sync_names)


def test_sync_workflow_with_inline_wait_and_wait_until_task_ref(
    conductor: Conductor, sync_names: dict[str, str]
) -> None:
    # SyncWorkflowExecutionTest.testSyncWorkflowWithInlineWaitAndWaitUntilTaskRef
    # INLINE, WAIT (a duration), SIMPLE (nobody polls it); waitUntilTaskRef simple_ref:
    # the answer comes after the WAIT and before the wait's end, RUNNING with 3 tasks.
    # Shortened: WAIT 2 s, waitForSeconds 6, get(16 s), bounds 2 s and 6 + 5 s (Java:
    # 5 s, 25, get(35 s), 5 s and 30 s).
    workflow_run, time_taken = _execute(
        conductor,
        sync_names["sync_workflow_with_inline_wait_and_simple_task"],
        "simple_ref",
        6,
        16,
    )
    assert time_taken >= 2000, (
        f"Workflow should take at least 2 seconds due to WAIT task, but took {time_taken}ms"
    )
    assert time_taken < 11000, (
        f"Workflow should complete before 11 second timeout, but took {time_taken}ms"
    )
    assert workflow_run["status"] == "RUNNING"
    assert len(workflow_run["tasks"]) == 3, "Expected 3 tasks to be executed (inline, wait, simple)"
    terminate(conductor, workflow_run["workflowId"], "Terminated")
