"""What Conductor accepts, Stepway accepts (issue 12, point 9)."""

from __future__ import annotations

from typing import Any

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


def _inline(ref: str, expression: str, **inputs: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "INLINE",
        "inputParameters": {"evaluatorType": "javascript", "expression": expression, **inputs},
    }


def test_references_conductor_does_not_check_register_and_read_what_conductor_reads(
    conductor: Conductor,
) -> None:
    """Conductor checks a reference only in a top-level task's inputParameters (its
    ConstraintParamUtil), and only that the task exists: its own e2e ``workflows.json``
    has an outputParameters reference to a task the workflow does not have. Such a
    definition registers (the reference is a warning, reported) and reads null; in a
    DO_WHILE body a task reading a later body task gets null on the first iteration and
    the previous iteration's output after."""
    name = unique("loose_refs")
    definition = workflow(
        name,
        [
            {
                "name": "loop",
                "taskReferenceName": "loop",
                "type": "DO_WHILE",
                "loopCondition": "$.loop['iteration'] < 2",
                "loopOver": [
                    _inline("a", "$.prev == null ? 1 : $.prev + 1", prev="${b.output.result}"),
                    _inline("b", "$.a * 10", a="${a.output.result}"),
                ],
            }
        ],
        outputParameters={
            "gone": "${not_in_this_workflow.output.result}",
            "last": "${b.output.result}",
        },
    )
    checked = conductor.http.post("/api/metadata/workflow/validate", json=definition)
    assert checked.status_code == 200, checked.text
    assert checked.json()["valid"] is True
    assert [w["path"] for w in checked.json()["warnings"]] == ["$.outputParameters.gone"]
    registered = conductor.http.post("/api/metadata/workflow", json=definition)
    assert registered.status_code == 200, registered.text
    [entry] = registered.json()["workflows"]
    assert "not_in_this_workflow" in entry["warnings"][0]["message"]

    run = conductor.wait_status(conductor.start(name), "COMPLETED")
    assert run["output"].get("gone") is None
    assert run["output"]["last"] == 110  # iteration 1: a=1, b=10; iteration 2: a=11, b=110


def test_an_unknown_reference_in_a_top_level_task_is_refused_as_conductor_does(
    conductor: Conductor,
) -> None:
    definition = workflow(unique("typo_ref"), [_inline("a", "$.x", x="${nowhere.output.result}")])
    refused = conductor.http.post("/api/metadata/workflow", json=definition)
    assert refused.status_code == 400, refused.text
    [problem] = refused.json()["validationErrors"]
    assert problem["path"] == "$.tasks[0].inputParameters.x"
    assert "'nowhere'" in problem["message"]


def test_an_iteration_of_a_loops_output_read_in_dot_notation(conductor: Conductor) -> None:
    """``${loop.output.2.a.result}``: a DO_WHILE's output has a member per iteration, and
    Conductor's JsonPath (Jayway) reads a member named by digits in dot notation
    (conductor-oss's scheduler example reads ``${poll_loop.output.3....}``). It was a
    400 "invalid expression" here."""
    name = unique("digit_member")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "$.loop['iteration'] < 3",
                    "loopOver": [_inline("a", "$.i * 100", i="${loop.output.iteration}")],
                },
                _inline("after", "$.second", second="${loop.output.2.a.result}"),
            ],
            outputParameters={"second": "${after.output.result}"},
        )
    )
    run = conductor.wait_status(conductor.start(name), "COMPLETED")
    assert run["output"]["second"] == 200


def test_a_loop_condition_on_the_loops_own_input(conductor: Conductor) -> None:
    """conductor-oss's scheduler example and cookbook loops bind the condition's values
    through the DO_WHILE's own inputParameters, read again after every iteration:
    ``"iteration": "${poll_loop.output.iteration}"`` with ``$.iteration < 3``, and a body
    task's output. Stepway refused the definition (a reference to the task itself)."""
    name = unique("own_input_loop")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "poll_loop",
                    "taskReferenceName": "poll_loop",
                    "type": "DO_WHILE",
                    "loopCondition": "if ($.iteration < 3 && !$.done) { true; } else { false; }",
                    "inputParameters": {
                        "iteration": "${poll_loop.output.iteration}",
                        "done": "${check.output.result}",
                    },
                    "loopOver": [_inline("check", "$.n >= 5", n="${poll_loop.output.iteration}")],
                },
            ],
            outputParameters={"iterations": "${poll_loop.output.iteration}"},
        )
    )
    run = conductor.wait_status(conductor.start(name), "COMPLETED")
    assert run["output"]["iterations"] == 3
    assert [t["referenceTaskName"] for t in run["tasks"]] == [
        "poll_loop",
        "check__1",
        "check__2",
        "check__3",
    ]
