"""conductor-oss's e2e ``SubWorkflowTests`` (``e2e/src/test/java/io/conductor/e2e/
control/SubWorkflowTests.java``) over HTTP against Stepway: ``metadata/workflows.json``'s
``sub_workflow_test`` (worker tasks, JSON_JQ_TRANSFORM, WAIT, SET_VARIABLE, registered
SUB_WORKFLOWs of no version, version 1 and version 0, a FORK_JOIN_DYNAMIC, a FORK with a
DO_WHILE and nested inline SUB_WORKFLOWs) runs to the end with and without a taskToDomain,
and again after each of two restarts with the latest definitions: the run's and each
child's taskToDomain are the start's, each registered child of the version named (the
latest, 3, for none or 0).

The Java test runs workers in the background (``TaskRunnerConfigurer``, one with the
domains and one without); here the test polls and answers itself (:func:`_work`). Names
and task types are the test's own (``unique``); the resource's JSON is written out below
with those names, leaving out the fields that hold their defaults."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conductor.harness import (
    ENDED,
    SETTLE_SECONDS,
    Conductor,
    simple,
    unique,
    workflow,
)

OWNER = "test@conductor.io"

# --- SubWorkflowTests ------------------------------------------------------------------


def _sub_workflow_test_defs(parent: str, population: str, w: list[str]) -> list[dict[str, Any]]:
    """``metadata/workflows.json``: ``sub_workflow_test`` and the two versions (3 and 1)
    of ``PopulationMinMax...``; ``w[i]`` is the worker type ``x_test_worker_i``."""

    def switch(ref: str) -> dict[str, Any]:
        return {
            "name": ref,
            "taskReferenceName": ref,
            "type": "SWITCH",
            "inputParameters": {"number": "${get_data.output.number}"},
            "evaluatorType": "javascript",
            "expression": "$.number < 15 ? 'LONG':'LONG'",
            "decisionCases": {
                "LONG": [simple(w[1], "simple_task_1")],
                "SHORT": [
                    {
                        "name": "too_short",
                        "taskReferenceName": "too_short",
                        "type": "TERMINATE",
                        "inputParameters": {
                            "terminationReason": "value too short",
                            "terminationStatus": "FAILED",
                        },
                    }
                ],
            },
        }

    sub_task_def = {
        "name": "sub_flow_inline",
        "retryCount": 0,
        "timeoutSeconds": 3000,
        "timeoutPolicy": "TIME_OUT_WF",
        "responseTimeoutSeconds": 20,
    }
    inline_lvl2 = {
        "name": "inline_sub",
        "version": 1,
        "schemaVersion": 2,
        "tasks": [simple(w[2], "simple_task_0")],
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
    }
    inline_sub = {
        **inline_lvl2,
        "tasks": [
            simple(w[2], "simple_task_0"),
            switch("fact_length2"),
            {
                "name": "sub_flow_inline_lvl2",
                "taskReferenceName": "sub_flow_inline_lvl2",
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {
                    "name": "inline_sub",
                    "version": 1,
                    "workflowDefinition": inline_lvl2,
                },
                "taskDefinition": sub_task_def,
            },
        ],
    }

    def sub(ref: str, **param: Any) -> dict[str, Any]:
        return {
            "name": ref,
            "taskReferenceName": ref,
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {"name": population, **param},
        }

    tasks = [
        simple(w[0], "simple_task_0"),
        {
            "name": "jq",
            "taskReferenceName": "jq",
            "type": "JSON_JQ_TRANSFORM",
            "inputParameters": {
                "key1": {"value1": ["a", "b"]},
                "queryExpression": "{ key3: (.key1.value1 + .key2.value2) }",
                "value2": ["d", "e"],
            },
        },
        {
            "name": "wait",
            "taskReferenceName": "wait",
            "type": "WAIT",
            "inputParameters": {"duration": "1 s"},
        },
        {
            "name": "set_state",
            "taskReferenceName": "set_state",
            "type": "SET_VARIABLE",
            "inputParameters": {
                "call_made": True,
                "number": "${simple_task_0.output.number}",
            },
        },
        sub("sub_flow"),
        sub("sub_flow_v1", version=1),
        {
            "name": "dynamic_fork",
            "taskReferenceName": "dynamic_fork",
            "type": "FORK_JOIN_DYNAMIC",
            "inputParameters": {"forkTaskName": w[0], "forkTaskInputs": [1, 2, 3]},
            "dynamicForkTasksParam": "forkedTasks",
            "dynamicForkTasksInputParamName": "forkedTasksInputs",
        },
        {"name": "dynamic_fork_join", "taskReferenceName": "dynamic_fork_join", "type": "JOIN"},
        {
            "name": "fork",
            "taskReferenceName": "fork",
            "type": "FORK_JOIN",
            "forkTasks": [
                [
                    {
                        "name": "loop_until_success",
                        "taskReferenceName": "loop_until_success",
                        "type": "DO_WHILE",
                        "inputParameters": {"loop_count": 2},
                        "optional": True,
                        "loopCondition": "if ( $.loop_count['iteration'] < "
                        "$.loop_until_success ) { true; } else { false; }",
                        "loopOver": [switch("fact_length")],
                    },
                    {
                        "name": "sub_flow_inline",
                        "taskReferenceName": "sub_flow_inline",
                        "type": "SUB_WORKFLOW",
                        "subWorkflowParam": {
                            "name": "inline_sub",
                            "version": 1,
                            "workflowDefinition": inline_sub,
                        },
                        "taskDefinition": sub_task_def,
                    },
                ],
                [simple(w[2], "simple_task_2"), simple(w[1], "simple_task_5")],
            ],
            "joinOn": ["sub_flow_inline", "simple_task_5"],
        },
        {
            "name": "fork_join",
            "taskReferenceName": "fork_join",
            "type": "JOIN",
            "joinOn": ["simple_task_5", "sub_flow_inline"],
        },
        sub("sub_flow_v0", version=0),
    ]
    for t in tasks:
        if t["type"] == "SIMPLE":
            t["inputParameters"] = {}

    def population_def(version: int, worker: str) -> dict[str, Any]:
        return workflow(
            population,
            [{**simple(worker, worker), "inputParameters": {"name": "Orkes"}}],
            version=version,
            description=f"PopulationMinMax v{version}",
            ownerEmail=OWNER,
            outputParameters={"data": "${get_random_fact.output.response.body.fact}"},
            timeoutPolicy="ALERT_ONLY",
            timeoutSeconds=0,
        )

    return [
        workflow(parent, tasks, ownerEmail=OWNER, timeoutPolicy="ALERT_ONLY", timeoutSeconds=0),
        population_def(3, w[4]),
        population_def(1, w[1]),
    ]


def _work(
    conductor: Conductor,
    workflow_id: str,
    types: list[str],
    domains: dict[str, str],
    seconds: float = SETTLE_SECONDS,
) -> dict[str, Any]:
    """The Java test's two ``TaskRunnerConfigurer``s (one polling with the test's
    taskToDomain, one without domains), whose ``TestWorker`` completes every task with
    ``{"number": 42}``, until the run ended; the run then."""
    deadline = time.monotonic() + seconds
    while True:
        run = conductor.run(workflow_id)
        if run["status"] in ENDED or time.monotonic() > deadline:
            return run
        for task_type in types:
            for domain in (domains.get(task_type), None):
                params: dict[str, Any] = {"workerid": "TestWorker", "count": 10, "timeout": 0}
                if domain is not None:
                    params["domain"] = domain
                r = conductor.http.get(f"/api/tasks/poll/batch/{task_type}", params=params)
                assert r.status_code == 200, r.text
                for polled in r.json():
                    conductor.complete(polled, {"number": 42})
        time.sleep(0.05)


def _assert_sub_workflows(
    conductor: Conductor, run: dict[str, Any], domains: dict[str, str]
) -> None:
    """``assertSubworkflowWithDomain`` / ``assertSubworkflowExecutionWithOutDomains``: the
    run COMPLETED, its and each child's taskToDomain the test's map (or empty), each
    registered child of the latest version (3) or of the one named."""
    assert run["status"] == "COMPLETED", (run.get("reasonForIncompletion"), run["tasks"][-3:])
    assert (run.get("taskToDomain") or {}).items() <= domains.items()
    if domains:
        assert run["taskToDomain"]
    else:
        assert len(run["taskToDomain"]) == 0
    for sub in (t for t in run["tasks"] if t["taskType"] == "SUB_WORKFLOW"):
        child = conductor.run(sub["subWorkflowId"])
        if domains:
            assert child["taskToDomain"], sub["referenceTaskName"]
            assert child["taskToDomain"].items() <= domains.items()
        else:
            assert len(child["taskToDomain"]) == 0
        param = sub["workflowTask"]["subWorkflowParam"]
        if param.get("workflowDefinition") is None:
            version = param.get("version")
            # version null and 0 both mean "use latest" in conductor-oss
            expected = version if version else 3
            assert child["workflowVersion"] == expected, sub["referenceTaskName"]


@pytest.mark.parametrize("with_domains", [True, False], ids=["with_domain", "without_domains"])
def test_sub_workflow_with_and_without_domains(conductor: Conductor, with_domains: bool) -> None:
    # SubWorkflowTests.testSubWorkflowWithDomain / testSubworkflowExecutionWithOutDomains.
    # The Java test starts a worker for every task type of the definitions except the
    # engine's own (SET_VARIABLE and TERMINATE included, which no queue holds: polled here
    # neither) and maps each type, SUB_WORKFLOW included, to a domain of its own.
    # The Java test restarts twice (useLatestDefinitions); so does this one.
    w = {i: unique(f"x_test_worker_{i}") for i in (0, 1, 2, 4)}
    parent, population = unique("sub_workflow_test"), unique("PopulationMinMax")
    conductor.register(
        *_sub_workflow_test_defs(parent, population, [w.get(i, "") for i in range(5)])
    )
    prefix = unique("SubWorkflowTests")
    domains = {
        t: unique(prefix) for t in ["SET_VARIABLE", "SUB_WORKFLOW", "TERMINATE", *w.values()]
    }
    workers = list(w.values())

    workflow_id = conductor.start(parent, task_to_domain=domains if with_domains else None)
    expected = domains if with_domains else {}
    _assert_sub_workflows(conductor, _work(conductor, workflow_id, workers, domains), expected)
    for _ in range(2):
        r = conductor.http.post(
            f"/api/workflow/{workflow_id}/restart", params={"useLatestDefinitions": True}
        )
        assert r.status_code < 300, r.text
        run = _work(conductor, workflow_id, workers, domains)
        _assert_sub_workflows(conductor, run, expected)
