"""conductor-oss's e2e ``DoWhileEdgeCasesTests`` and ``SwitchTests``
(e2e/src/test/java/io/conductor/e2e/control/), over the workflow and Task APIs.

DoWhileEdgeCasesTests loads do_while_wait_switch_iteration_test.json,
do_while_keep_last_n_switch_test.json and stackoverflower.json (e2e/src/test/resources/
metadata/); they are rebuilt here with unique workflow names, every task with the default
fields of the exported JSON (``java_task``). Their HTTP tasks call
https://orkes-api-tester.orkesconductor.com/api; here a local server answers the same GET.

SwitchTests runs its workflow with the Java SDK (``ConductorWorkflow.executeDynamic``: the
definition is in the StartWorkflowRequest) and answers its tasks with ``@WorkerTask``
methods; here the test polls each task and answers what that method returns (a String
return is the output ``{"result": ...}``, a POJO its fields).

The DynamicForkTests cases are in test_oss_control_flow.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.runtime.builtins.testing import LocalServer, Reply, Request
from tests.e2e.conductor.harness import Conductor, task, unique
from tests.e2e.conductor.test_oss_control_flow import (
    java_task,
    java_workflow,
    post_result,
    until_asserted,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _api_tester(_: Request) -> Reply:
    """orkes-api-tester's /api: a GET answered with JSON."""
    return Reply(body={"ok": True})


def _http(name: str, ref: str, uri: str) -> dict[str, Any]:
    return java_task(
        name=name,
        taskReferenceName=ref,
        type="HTTP",
        inputParameters={
            "uri": uri,
            "method": "GET",
            "accept": "application/json",
            "contentType": "application/json",
            "encode": True,
        },
    )


def _set_variable(name: str, ref: str, status: str) -> dict[str, Any]:
    return java_task(
        name=name, taskReferenceName=ref, type="SET_VARIABLE", inputParameters={"status": status}
    )


def _inline(name: str, ref: str, expression: str, **params: Any) -> dict[str, Any]:
    return java_task(
        name=name,
        taskReferenceName=ref,
        type="INLINE",
        inputParameters={"expression": expression, "evaluatorType": "graaljs", **params},
    )


def _switch(
    name: str,
    ref: str,
    value: str,
    cases: dict[str, list[dict[str, Any]]],
    default: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return java_task(
        name=name,
        taskReferenceName=ref,
        type="SWITCH",
        inputParameters={"switchCaseValue": value},
        decisionCases=cases,
        defaultCase=default or [],
        evaluatorType="value-param",
        expression="switchCaseValue",
    )


def _do_while(
    ref: str, inputs: dict[str, Any], condition: str, body: list[dict[str, Any]]
) -> dict[str, Any]:
    return java_task(
        name="do_while",
        taskReferenceName=ref,
        type="DO_WHILE",
        inputParameters=inputs,
        loopCondition=condition,
        loopOver=body,
        evaluatorType="graaljs",
    )


def _exported(name: str, description: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return java_workflow(
        name,
        tasks,
        description=description,
        failureWorkflow="",
        workflowStatusListenerEnabled=False,
        variables={},
        inputTemplate={},
        enforceSchema=True,
        metadata={},
        maskedFields=[],
    )


# --- DoWhileEdgeCasesTests ---------------------------------------------------------------


# DoWhileEdgeCasesTests.testDoWhileWaitSwitchIteration
@pytest.mark.xfail(
    strict=True,
    reason="the run FAILS at iteration 6: inline_sample_ref's input 'iteration' = "
    "${do_while_ref.output} (the loop's output, which about doubles every iteration) is "
    "~21 KB, above STEPWAY_PAYLOAD_TASK_INPUT_THRESHOLD (10240 bytes), the limit of a value "
    "computed in the run; docs/configuration.md says a value referenced whole travels by "
    "reference whatever its size, but a DO_WHILE's output is held in the run state, never "
    "offloaded: engine/decider/core.py Decider.resolve_values (_offloaded_reference finds "
    "no offloaded output, the copy fails the size check, _too_large)",
)
def test_do_while_with_wait_and_switch_iterates_until_the_variable_is_set(
    conductor: Conductor,
) -> None:
    name = unique("do_while_wait_switch_iteration_test")
    with LocalServer(_api_tester) as server:
        api = f"{server.url}/api"
        conductor.register(
            _exported(
                name,
                "DO_WHILE with WAIT and SWITCH tasks testing manual iteration control",
                [
                    _do_while(
                        "do_while_ref",
                        {"status": "${workflow.variables.status}"},
                        "$.status != 'Completed'",
                        [
                            _inline(
                                "inline_sample",
                                "inline_sample_ref",
                                "(function () { \n  const current = $.iteration;\n"
                                "  return current;\n})();",
                                iteration="${do_while_ref.output}",
                            ),
                            _http("http", "http_ref", api),
                            java_task(name="wait", taskReferenceName="wait_ref", type="WAIT"),
                            _switch(
                                "switch",
                                "switch_ref",
                                "${wait_ref.output.result}",
                                {
                                    "a": [
                                        _http("http_1", "http_ref_1", api),
                                        _set_variable(
                                            "set_variable", "set_variable_ref", "Completed"
                                        ),
                                    ],
                                    "b": [
                                        _http("http_2", "http_ref_2", api),
                                        _set_variable(
                                            "set_variable_1", "set_variable_ref_1", "RUNNING"
                                        ),
                                    ],
                                },
                            ),
                        ],
                    ),
                    _http("http_3", "http_ref_3", api),
                ],
            )
        )
        workflow_id = conductor.start(name)

        # update the wait task 10 times: 9 times with "b" and 1 time with "a"
        answered: set[str] = set()
        for i in range(10):

            def waiting(run: dict[str, Any], i: int = i) -> None:
                found = [
                    t
                    for t in run["tasks"]
                    if t["taskType"] == "WAIT"
                    and t["status"] == "IN_PROGRESS"
                    # the one of this iteration: the last one answered may read IN_PROGRESS
                    # until the engine took the answer
                    and t["taskId"] not in answered
                ]
                assert found, f"Wait task should be in progress at iteration {i}"

            run = until_asserted(conductor, workflow_id, waiting)
            wait = next(
                t
                for t in run["tasks"]
                if t["taskType"] == "WAIT"
                and t["status"] == "IN_PROGRESS"
                and t["taskId"] not in answered
            )
            answered.add(wait["taskId"])
            post_result(
                conductor,
                workflow_id,
                wait["taskId"],
                "COMPLETED",
                {"result": "b" if i < 9 else "a"},
            )

        run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", "Workflow should be completed"
    # the do_while iterated 10 times
    iteration = task(run, "do_while_ref")["outputData"].get("iteration")
    assert iteration is not None, "iteration field should exist in do_while task output"
    assert iteration == 10, "do_while should have iterated 10 times"


# DoWhileEdgeCasesTests.testDoWhileKeepLastNSwitch
def test_do_while_with_keep_last_n_and_nested_switches_iterates_26_times(
    conductor: Conductor,
) -> None:
    name = unique("do_while_keep_last_n_switch_test")
    add = "(function () {\n  return $.value1 + $.value2;\n})();"
    conductor.register(
        _exported(
            name,
            "DO_WHILE with keepLastN=3, nested SWITCH, and max iteration control",
            [
                _do_while(
                    "do_while_ref",
                    {"status": "${workflow.variables.status}", "keepLastN": 3},
                    "$.status != 'Completed'",
                    [
                        _switch(
                            "switch",
                            "switch_ref",
                            "b",
                            {
                                "a": [
                                    _inline(
                                        "eval_c_or_d",
                                        "eval_c_or_d_ref",
                                        "(function () {\n  let r = Math.floor(Math.random() * 10)"
                                        ' + 1;\n  return r > 3 ? "c": "d";\n})();',
                                        value1=1,
                                        value2=2,
                                    ),
                                    _switch(
                                        "switch_1",
                                        "switch_ref_1",
                                        "${eval_c_or_d_ref.output.result}",
                                        {
                                            "c": [
                                                _inline(
                                                    "inline_2",
                                                    "inline_ref_2",
                                                    add,
                                                    value1=1,
                                                    value2=2,
                                                )
                                            ],
                                            "d": [
                                                _set_variable(
                                                    "set_variable", "set_variable_ref", "Completed"
                                                )
                                            ],
                                        },
                                        [
                                            java_task(
                                                name="wait",
                                                taskReferenceName="wait_ref",
                                                type="WAIT",
                                                inputParameters={"duration": "1 seconds"},
                                            )
                                        ],
                                    ),
                                ],
                                "b": [
                                    _inline("inline", "inline_ref", add, value1=1, value2=2),
                                    _set_variable(
                                        "set_variable_1", "set_variable_ref_1", "RUNNING"
                                    ),
                                ],
                            },
                        ),
                        _inline(
                            "max_loop_ctrl",
                            "max_loop_ctrl_ref",
                            "(function () {\n  return $.iteration > 25 ? "
                            '"stop": "continue";\n})();',
                            iteration="${do_while_ref.output.iteration}",
                        ),
                        _switch(
                            "switch_2",
                            "switch_ref_2",
                            "${max_loop_ctrl_ref.output.result}",
                            {
                                "stop": [
                                    _set_variable(
                                        "set_variable_2", "set_variable_ref_2", "Completed"
                                    )
                                ]
                            },
                        ),
                    ],
                )
            ],
        )
    )
    workflow_id = conductor.start(name)
    # the workflow runs by itself and stops when iteration > 25
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", "Workflow should be completed"
    iteration = task(run, "do_while_ref")["outputData"].get("iteration")
    assert iteration is not None, "iteration field should exist in do_while task output"
    assert iteration == 26, "do_while should have iterated 26 times"


# DoWhileEdgeCasesTests.testStackoverflower (stackoverflower.json, n = 50)
def test_a_loop_of_50_inline_iterations_completes(conductor: Conductor) -> None:
    name = unique("stackoverflower")
    conductor.register(
        {
            "name": name,
            "description": ".",
            "version": 1,
            "schemaVersion": 2,
            "tasks": [
                {
                    "name": "loop",
                    "taskReferenceName": "loop_ref",
                    "inputParameters": {"n": "${workflow.input.n}"},
                    "type": "DO_WHILE",
                    "startDelay": 0,
                    "loopCondition": "$.loop_ref['iteration'] < $.n",
                    "evaluatorType": "graaljs",
                    "loopOver": [
                        {
                            "name": "dummy",
                            "taskReferenceName": "dummy_ref",
                            "inputParameters": {
                                "expression": '"stackoverflowing are you?"',
                                "evaluatorType": "graaljs",
                            },
                            "type": "INLINE",
                        }
                    ],
                }
            ],
            "inputParameters": [],
            "outputParameters": {},
            "ownerEmail": "test@conductor.io",
        }
    )
    workflow_id = conductor.start(name, {"n": 50})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", "Workflow should be completed"
    iteration = task(run, "loop_ref")["outputData"].get("iteration")
    assert iteration is not None, "iteration field should exist in loop task output"
    assert iteration == 50, "loop should have iterated 50 times"


# --- SwitchTests -----------------------------------------------------------------------


def _switch_workflow() -> tuple[dict[str, Any], dict[str, str]]:
    """SwitchTests.getSwitchWorkflow (sdk_switch_test): get_user_details, then the SDK's
    ``Switch("emailorsms", "${workflow.input.notificationPreference}")``: EMAIL ->
    send_email, SMS -> send_sms, send_push, default -> default_switch_case."""
    n = {
        k: unique(k)
        for k in ("get_user_details", "send_email", "send_sms", "send_push", "default_switch_case")
    }
    details = {
        "userId": "${workflow.input.name}",
        "email": "${get_user_details.output.email}",
        "phoneNumber": "${get_user_details.output.phoneNumber}",
    }

    def simple(key: str, **inputs: Any) -> dict[str, Any]:
        return java_task(name=n[key], taskReferenceName=key, inputParameters=inputs)

    definition = java_workflow(
        unique("sdk_switch_test"),
        [
            simple("get_user_details", userId="${workflow.input.name}"),
            java_task(
                name="emailorsms",
                taskReferenceName="emailorsms",
                type="SWITCH",
                # Switch.updateWorkflowTask without javascript
                evaluatorType="value-param",
                inputParameters={"switchCaseValue": "${workflow.input.notificationPreference}"},
                expression="switchCaseValue",
                decisionCases={
                    "EMAIL": [simple("send_email", email="${get_user_details.output.email}")],
                    "SMS": [
                        simple("send_sms", phoneNumber="${get_user_details.output.phoneNumber}"),
                        simple("send_push", **details),
                    ],
                },
                defaultCase=[simple("default_switch_case", **details)],
            ),
        ],
    )
    return definition, n


def _worker(conductor: Conductor, task_type: str, answer: Any) -> None:
    """One poll of a ``@WorkerTask`` method and its answer: a String return is
    ``{"result": ...}``, a POJO its fields."""
    polled = conductor.poll_one(task_type)
    result = answer(polled["inputData"])
    conductor.complete(polled, result if isinstance(result, dict) else {"result": result})


def _get_user_details(i: dict[str, Any]) -> dict[str, Any]:
    return {"phoneNumber": "9999999999", "email": i["userId"] + "@gmail.com"}


def _who(i: dict[str, Any]) -> str:
    return f"{i['userId']}[Email: {i['email']}][PhoneNumber: {i['phoneNumber']}]"


# SwitchTests.testSwitchHappySms ("Check if switch works based on the provided input - sms")
def test_sdk_switch_sms(conductor: Conductor) -> None:
    definition, n = _switch_workflow()
    workflow_id = conductor.start(
        definition["name"],
        {"name": "userA", "notificationPreference": "SMS"},
        version=1,
        workflow_def=definition,
    )
    _worker(conductor, n["get_user_details"], _get_user_details)
    _worker(conductor, n["send_sms"], lambda i: "SMS: " + i["phoneNumber"])
    _worker(conductor, n["send_push"], lambda i: "Sending push for  " + _who(i))
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert len(run["tasks"]) == 4
    assert (
        run["tasks"][3]["outputData"]["result"]
        == "Sending push for  userA[Email: userA@gmail.com][PhoneNumber: 9999999999]"
    )


# SwitchTests.testSwitchHappyEmail ("Check if switch works based on the provided input -
# email")
def test_sdk_switch_email(conductor: Conductor) -> None:
    definition, n = _switch_workflow()
    workflow_id = conductor.start(
        definition["name"],
        {"name": "userA", "notificationPreference": "EMAIL"},
        version=1,
        workflow_def=definition,
    )
    _worker(conductor, n["get_user_details"], _get_user_details)
    _worker(conductor, n["send_email"], lambda i: "EMAIL: " + i["email"])
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert len(run["tasks"]) == 3
    assert run["tasks"][2]["outputData"]["result"] == "EMAIL: userA@gmail.com"


# SwitchTests.testSwitchNegetive ("Check if switch works based on the provided wrong
# input"; @Disabled in conductor-oss because the SDK's executeDynamic did not see the run
# complete within 20 s there; the scenario is ported as it is)
def test_sdk_switch_default_case(conductor: Conductor) -> None:
    definition, n = _switch_workflow()
    workflow_id = conductor.start(
        definition["name"],
        {"name": "userA", "notificationPreference": "Whatsapp"},
        version=1,
        workflow_def=definition,
    )
    _worker(conductor, n["get_user_details"], _get_user_details)
    _worker(conductor, n["default_switch_case"], lambda i: "No activity found for  " + _who(i))
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert len(run["tasks"]) == 3
    result = run["tasks"][1]["outputData"].get("evaluationResult")
    assert isinstance(result, list)
    assert result == ["Whatsapp"]
