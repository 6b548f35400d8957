"""Run and task JSON field for field as Conductor's (issue 12, point 7).

The fields and JSON types are those Conductor serializes for
``common/run/Workflow.java`` and ``common/metadata/tasks/Task.java`` (their fields and
getters: a ``long``/``int`` is a number, a ``boolean`` a boolean, a map an object, a set
or list an array; a ``String`` may be null).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import (
    Conductor,
    echo_server,
    seqs,
    simple,
    task,
    unique,
    workflow,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

NUMBER, TEXT, FLAG, OBJECT, LIST = "number", "text", "flag", "object", "list"

WORKFLOW_FIELDS = {
    "workflowId": TEXT,
    "workflowName": TEXT,
    "workflowVersion": NUMBER,
    "status": TEXT,
    "createTime": NUMBER,
    "updateTime": NUMBER,
    "startTime": NUMBER,
    "endTime": NUMBER,
    "lastRetriedTime": NUMBER,
    "input": OBJECT,
    "output": OBJECT,
    "variables": OBJECT,
    "taskToDomain": OBJECT,
    "tasks": LIST,
    "failedReferenceTaskNames": LIST,
    "failedTaskNames": LIST,
    "priority": NUMBER,
    "correlationId": TEXT,
    "reasonForIncompletion": TEXT,
    "parentWorkflowId": TEXT,
    "parentWorkflowTaskId": TEXT,
    "externalInputPayloadStoragePath": TEXT,
    "externalOutputPayloadStoragePath": TEXT,
}

TASK_FIELDS = {
    "taskId": TEXT,
    "taskType": TEXT,
    "taskDefName": TEXT,
    "referenceTaskName": TEXT,
    "status": TEXT,
    "inputData": OBJECT,
    "outputData": OBJECT,
    "workflowInstanceId": TEXT,
    "workflowType": TEXT,
    "correlationId": TEXT,
    "seq": NUMBER,
    "retryCount": NUMBER,
    "pollCount": NUMBER,
    "scheduledTime": NUMBER,
    "startTime": NUMBER,
    "endTime": NUMBER,
    "updateTime": NUMBER,
    "startDelayInSeconds": NUMBER,
    "responseTimeoutSeconds": NUMBER,
    "callbackAfterSeconds": NUMBER,
    "workflowPriority": NUMBER,
    "iteration": NUMBER,
    "rateLimitPerFrequency": NUMBER,
    "rateLimitFrequencyInSeconds": NUMBER,
    "firstStartTime": NUMBER,
    "queueWaitTime": NUMBER,
    "retried": FLAG,
    "executed": FLAG,
    "callbackFromWorker": FLAG,
    "loopOverTask": FLAG,
    "subworkflowChanged": FLAG,
    "workflowTask": OBJECT,
    "retriedTaskId": TEXT,
    "workerId": TEXT,
    "domain": TEXT,
    "reasonForIncompletion": TEXT,
    "subWorkflowId": TEXT,
    "externalInputPayloadStoragePath": TEXT,
    "externalOutputPayloadStoragePath": TEXT,
}


def _kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return FLAG
    if isinstance(value, int | float):
        return NUMBER
    if isinstance(value, str):
        return TEXT
    if isinstance(value, dict):
        return OBJECT
    if isinstance(value, list):
        return LIST
    return None


def _mismatches(body: dict[str, Any], fields: dict[str, str]) -> list[str]:
    wrong = []
    for name, kind in fields.items():
        if name not in body:
            wrong.append(f"{name}: missing")
        elif body[name] is None and kind == TEXT:
            continue
        elif _kind(body[name]) != kind:
            wrong.append(f"{name}: {body[name]!r} is not a {kind}")
    return wrong


def _finished_run(conductor: Conductor) -> dict[str, Any]:
    a, b, name = unique("json_a"), unique("json_b"), unique("json_wf")
    conductor.taskdefs({"name": a, "retryCount": 0}, {"name": b, "retryCount": 0})
    conductor.register(workflow(name, [simple(a, "a"), simple(b, "b", x="${a.output.x}")]))
    workflow_id = conductor.start(name, {"in": 1}, correlation_id="json-1")
    conductor.poll_and_complete(a, {"x": 1})
    conductor.poll_and_complete(b, {"y": 2})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    return run


def test_the_run_has_conductors_workflow_fields(conductor: Conductor) -> None:
    run = _finished_run(conductor)
    assert _mismatches(run, WORKFLOW_FIELDS) == []


def test_each_task_has_conductors_task_fields(conductor: Conductor) -> None:
    run = _finished_run(conductor)
    for found in run["tasks"]:
        assert _mismatches(found, TASK_FIELDS) == [], found["referenceTaskName"]
    assert run["tasks"][1]["workflowTask"]["taskReferenceName"] == "b"


def test_seq_numbers_tasks_in_scheduling_order(conductor: Conductor) -> None:
    """LambdaAndTerminateTaskSpec asserts ``seq`` 1, 2, 3... in the order tasks were
    scheduled."""
    run = _finished_run(conductor)
    assert seqs(run) == [1, 2]


def test_the_status_summary_includes_output_and_variables_on_request(
    conductor: Conductor,
) -> None:
    """``GET /workflow/{id}/status?includeOutput=&includeVariables=`` (WorkflowStatus)."""
    run = _finished_run(conductor)
    url = f"/api/workflow/{run['workflowId']}/status"
    bare = conductor.http.get(url).json()
    assert bare == {
        "workflowId": run["workflowId"],
        "correlationId": "json-1",
        "output": None,
        "variables": None,
        "status": "COMPLETED",
    }
    full = conductor.http.get(url, params={"includeOutput": True, "includeVariables": True})
    assert full.json()["output"] == {"y": 2}
    assert full.json()["variables"] == {}


def test_not_found_messages_are_conductors(conductor: Conductor) -> None:
    """WorkflowServiceImpl.getExecutionStatus and MetadataServiceImpl.getTaskDef."""
    r = conductor.http.get("/api/workflow/no-such-run")
    assert r.status_code == 404
    assert r.json()["message"] == "Workflow with id: no-such-run not found."
    r = conductor.http.get("/api/metadata/taskdefs/no_such_type")
    assert r.status_code == 404
    assert r.json()["message"] == "No such taskType found by name: no_such_type"


def test_a_just_scheduled_worker_task_shows_its_type(conductor: Conductor) -> None:
    """Read straight after the start: the worker task is listed, under its worker type
    (never the kind ``WORKER``), with its definition's workflowTask."""
    a, name = unique("json_first"), unique("json_first_wf")
    conductor.register(workflow(name, [simple(a, "first")]))
    workflow_id = conductor.start(name)
    run = conductor.http.get(f"/api/workflow/{workflow_id}").json()
    (first,) = run["tasks"]
    assert (first["taskType"], first["taskDefName"], first["status"]) == (a, a, "SCHEDULED")
    assert first["workflowTask"]["name"] == a
    assert run["workflowDefinition"]["name"] == name
    conductor.http.delete(f"/api/workflow/{workflow_id}")


def test_system_tasks_start_when_scheduled_and_worker_tasks_when_polled(
    conductor: Conductor,
) -> None:
    """Conductor's ``WorkflowExecutor.scheduleTask`` sets the ``startTime`` of every system
    task it schedules, synchronous (INLINE, JSON_JQ_TRANSFORM) or not (HTTP); a worker
    task's is set when a worker polls it, 0 until then. Here the INLINE and the jq steps
    are done in the work item that reaches them and the POST by the built-in activity
    (engine/runtime/local_steps.py): every path shows when its step began."""
    a, name = unique("json_started"), unique("json_started_wf")
    conductor.taskdefs({"name": a, "retryCount": 0})
    with echo_server() as url:
        conductor.register(
            workflow(
                name,
                [
                    {
                        "name": "calc",
                        "taskReferenceName": "calc",
                        "type": "INLINE",
                        "inputParameters": {"evaluatorType": "javascript", "expression": "1 + 1"},
                    },
                    {
                        "name": "shape",
                        "taskReferenceName": "shape",
                        "type": "JSON_JQ_TRANSFORM",
                        "inputParameters": {"v": "${calc.output.result}", "queryExpression": ".v"},
                    },
                    {
                        "name": "post",
                        "taskReferenceName": "post",
                        "type": "HTTP",
                        "inputParameters": {
                            "http_request": {"uri": url, "method": "POST", "body": {"n": 1}}
                        },
                    },
                    {
                        "name": "set",
                        "taskReferenceName": "set",
                        "type": "SET_VARIABLE",
                        "inputParameters": {"done": True},
                    },
                    simple(a, "w"),
                ],
            )
        )
        workflow_id = conductor.start(name)
        run = conductor.wait_task(workflow_id, "w", "SCHEDULED")
    for ref in ("calc", "shape", "post", "set"):
        found = task(run, ref)
        assert found["status"] == "COMPLETED", (ref, found["reasonForIncompletion"])
        assert 0 < found["scheduledTime"] <= found["startTime"] <= found["endTime"], (ref, found)
    assert task(run, "post")["outputData"]["response"]["body"]["got"] == {"n": 1}
    waiting = task(run, "w")
    assert (waiting["startTime"], waiting["scheduledTime"] > 0) == (0, True), waiting
    conductor.poll_and_complete(a, {"ok": True})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    done = task(run, "w")
    assert 0 < done["scheduledTime"] <= done["startTime"] <= done["endTime"], done


def test_a_run_read_back_whole_names_no_storage_path(conductor: Conductor) -> None:
    """A run whose input and output the payload store keeps reads back whole and names
    no path: Conductor's clients take a path as "the payload is there, not here" (its
    Java client's WorkflowClient.getWorkflow throws UnsupportedOperationException on
    one). The search summary, which does not read payloads back, names the paths."""
    name = unique("read_back")
    big = {"text": "z" * 20_000}
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "copy",
                    "taskReferenceName": "copy",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"seen": True},
                }
            ],
            outputParameters={"echo": "${workflow.input.text}"},
        )
    )
    workflow_id = conductor.start(name, big)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["input"] == big and run["output"] == {"echo": big["text"]}
    assert run["externalInputPayloadStoragePath"] is None
    assert run["externalOutputPayloadStoragePath"] is None
    r = conductor.http.get("/api/workflow/search", params={"freeText": workflow_id})
    (summary,) = r.json()["results"]
    assert summary["input"] is None and summary["externalInputPayloadStoragePath"]
    assert summary["output"] is None and summary["externalOutputPayloadStoragePath"]
