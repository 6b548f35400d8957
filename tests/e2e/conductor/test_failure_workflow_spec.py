"""A workflow's ``failureWorkflow``, as conductor-oss's test-harness
``FailureWorkflowSpec`` asserts it.

Its definitions (test-harness resources): ``failure_workflow`` (one LAMBDA);
``test_terminate_task_failed_wf`` (a LAMBDA, a TERMINATE with ``terminationStatus``
FAILED and reason "Early exit in terminate", a SIMPLE never reached; its
``failureWorkflow`` is ``failure_workflow``); ``test_task_failed_sub_wf`` (the same
without a reason) and ``test_task_failed_parent_wf`` (a LAMBDA, a SUB_WORKFLOW of it, a
LAMBDA; ``failureWorkflow`` ``failure_workflow``).

When such a run fails, Conductor's ``WorkflowExecutorOps.terminateWorkflow`` starts the
failure workflow with the run's input plus ``workflowId``, ``reason``,
``failureStatus``, ``failureTaskId`` (the task that failed the run) and
``failedWorkflow`` (the run itself), and puts its id in the failed run's output under
``conductor.failure_workflow``. The spec reads the failure run through
``getWorkflowModel``; here through ``GET /workflow/{id}``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique, workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

_LAMBDA_A = "if ($.input.a==1){return {testvalue: true}} else{return {testvalue: false}}"
_LAMBDA_I = (
    "var i = 10; if ($.lambdaValue == 1){ return {testvalue: 'Lambda value was 1', iValue: i} }"
    " else { return {testvalue: 'Lambda value was NOT 1', iValue: i + 3} }"
)


def _lambda(ref: str, name: str = "lambda") -> dict[str, Any]:
    return {
        "name": name,
        "taskReferenceName": ref,
        "type": "LAMBDA",
        "inputParameters": {"input": "${workflow.input}", "scriptExpression": _LAMBDA_A},
    }


def _terminate(reason: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"terminationStatus": "FAILED", "workflowOutput": "${lambda0.output}"}
    if reason is not None:
        params["terminationReason"] = reason
    return {
        "name": "terminate",
        "taskReferenceName": "terminate0",
        "type": "TERMINATE",
        "inputParameters": params,
    }


def _register(conductor: Conductor) -> dict[str, str]:
    """The spec's ``setup()``: the four definitions, under names of this test."""
    names = {
        "failure": unique("failure_workflow"),
        "terminate": unique("test_terminate_task_failed_wf"),
        "parent": unique("test_task_failed_parent_wf"),
        "sub": unique("test_task_failed_sub_wf"),
    }
    never = unique("integration_task_2")  # the SIMPLE task after the TERMINATE
    conductor.taskdefs({"name": never, "retryCount": 0})
    after_terminate = {"name": never, "taskReferenceName": "t2", "type": "SIMPLE"}
    owner = {"ownerEmail": "test@harness.com", "timeoutPolicy": "ALERT_ONLY", "timeoutSeconds": 0}
    conductor.register(
        workflow(names["failure"], [_lambda("lambda0")], **owner),
        workflow(
            names["terminate"],
            [_lambda("lambda0"), _terminate("Early exit in terminate"), after_terminate],
            failureWorkflow=names["failure"],
            **owner,
        ),
        workflow(names["sub"], [_lambda("lambda0"), _terminate(None), after_terminate], **owner),
        workflow(
            names["parent"],
            [
                {
                    "name": "test_lambda_task1",
                    "taskReferenceName": "lambdaTask1",
                    "type": "LAMBDA",
                    "inputParameters": {
                        "lambdaValue": "${workflow.input.lambdaValue}",
                        "scriptExpression": _LAMBDA_I,
                    },
                },
                {
                    "name": names["sub"],
                    "taskReferenceName": "test_task_failed_sub_wf",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": names["sub"]},
                },
                {
                    "name": "test_lambda_task2",
                    "taskReferenceName": "lambdaTask2",
                    "type": "LAMBDA",
                    "inputParameters": {
                        "lambdaValue": "${workflow.input.lambdaValue}",
                        "scriptExpression": _LAMBDA_I,
                    },
                },
            ],
            failureWorkflow=names["failure"],
            ownerEmail="test@harness.com",
        ),
    )
    return names


def _assert_failure_run(conductor: Conductor, failed: dict[str, Any], failure_task_id: str) -> None:
    """The spec's ``with(getWorkflowModel(failedWorkflowId, true))`` block."""
    failure_id = failed["output"].get("conductor.failure_workflow")
    assert isinstance(failure_id, str), failed["output"]
    failure = conductor.wait_status(failure_id, "COMPLETED")
    assert failure["status"] == "COMPLETED"
    assert failure["correlationId"] == failed["correlationId"]
    assert failure["input"]["workflowId"] == failed["workflowId"]
    assert failure["input"]["failureTaskId"] == failure_task_id
    assert len(failure["tasks"]) == 1
    assert failure["tasks"][0]["taskType"] == "LAMBDA"
    assert failure["input"].get("failedWorkflow") is not None


def test_workflow_with_a_task_that_failed(conductor: Conductor) -> None:
    # "Test workflow with a task that failed"
    names = _register(conductor)
    workflow_id = conductor.start(names["terminate"], {"a": 1}, correlation_id="testId")

    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert len(run["tasks"]) == 2
    assert run["reasonForIncompletion"] == "Early exit in terminate"
    assert run["output"]
    assert [(t["status"], t["taskType"], t["seq"]) for t in run["tasks"]] == [
        ("COMPLETED", "LAMBDA", 1),
        ("COMPLETED", "TERMINATE", 2),
    ]
    _assert_failure_run(conductor, run, run["tasks"][1]["taskId"])


def test_workflow_with_a_task_failed_in_a_sub_workflow(conductor: Conductor) -> None:
    # "Test workflow with a task failed in subworkflow"
    names = _register(conductor)
    workflow_id = conductor.start(names["parent"], {"a": 1}, correlation_id="")

    # the SUB_WORKFLOW task runs its child (the spec executes the system task and sweeps)
    run = conductor.wait_status(workflow_id, "FAILED")
    sub_workflow_id = next(
        t["subWorkflowId"]
        for t in run["tasks"]
        if t["referenceTaskName"] == "test_task_failed_sub_wf"
    )

    # the sub workflow has failed
    sub = conductor.wait_status(sub_workflow_id, "FAILED")
    assert sub["status"] == "FAILED"
    assert len(sub["tasks"]) == 2
    assert "Workflow is FAILED by TERMINATE task" in sub["reasonForIncompletion"]
    assert [(t["status"], t["taskType"], t["seq"]) for t in sub["tasks"]] == [
        ("COMPLETED", "LAMBDA", 1),
        ("COMPLETED", "TERMINATE", 2),
    ]

    # the parent has failed, and the failure workflow got the right input
    assert run["status"] == "FAILED"
    assert len(run["tasks"]) == 2
    assert [(t["status"], t["taskType"], t["seq"]) for t in run["tasks"]] == [
        ("COMPLETED", "LAMBDA", 1),
        ("FAILED", "SUB_WORKFLOW", 2),
    ]
    assert run["tasks"][0]["referenceTaskName"] == "lambdaTask1"
    _assert_failure_run(conductor, run, run["tasks"][1]["taskId"])


def test_a_failure_workflow_named_by_an_input_parameter(conductor: Conductor) -> None:
    # the test-harness resources' "failureWorkflow": "$workflow.input.failureWfName":
    # Conductor's terminateWorkflow reads the name from the run's input; a run without
    # it starts none
    names = _register(conductor)
    flaky = unique("flaky")
    conductor.taskdefs({"name": flaky, "retryCount": 0})
    name = unique("failure_by_input")
    conductor.register(
        workflow(
            name,
            [{"name": flaky, "taskReferenceName": "f", "type": "SIMPLE"}],
            failureWorkflow="$workflow.input.failureWfName",
        )
    )
    named = conductor.start(name, {"failureWfName": names["failure"], "a": 1})
    unnamed = conductor.start(name, {"a": 1})
    for _ in range(2):
        conductor.poll_and_fail(flaky, "boom")
    run = conductor.wait_status(named, "FAILED")
    failure = conductor.wait_status(run["output"]["conductor.failure_workflow"], "COMPLETED")
    assert failure["workflowName"] == names["failure"]
    assert failure["input"]["workflowId"] == named
    run = conductor.wait_status(unnamed, "FAILED")
    assert run["status"] == "FAILED"
    assert "conductor.failure_workflow" not in run["output"]
    assert "failure workflow" not in (run["reasonForIncompletion"] or "")
    assert conductor.http.get(f"/api/workflow/{unnamed}-failure").status_code == 404
