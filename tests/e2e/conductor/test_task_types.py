"""Every Conductor task type, with the scenarios of the test-harness specs (issue 12,
points 4, 6 and 7): the statuses, task order, types, outputs and reasons those specs
assert, read through the workflow API.

Specs: ForkJoinSpec, DynamicForkJoinSpec, ExclusiveJoinSpec, DecisionTaskSpec,
SwitchTaskSpec, DoWhileSpec, WaitTaskSpec, SetVariableTaskSpec, LambdaAndTerminateTaskSpec,
JsonJQTransformSpec, StartWorkflowSpec, SubWorkflowSpec, SignalTaskSpec and
WorkflowAndTaskConfigurationSpec ("Test task def template", "Test workflow with no tasks").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.runtime.builtins.testing import LocalServer, Reply, Request
from tests.e2e.conductor.harness import (
    Conductor,
    echo_server,
    refs,
    seqs,
    simple,
    statuses,
    task,
    types,
    unique,
    workflow,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _no_retries(conductor: Conductor, *task_types: str) -> None:
    conductor.taskdefs(*({"name": t, "retryCount": 0} for t in task_types))


def _pairs(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["taskType"], t["status"]) for t in run["tasks"]]


# --- FORK_JOIN / JOIN -----------------------------------------------------------------


def _fork_join(conductor: Conductor) -> tuple[str, list[str]]:
    """ForkJoinSpec's FanInOutTest: fork [[t1, t3], [t2]], join on t3 and t2, then t4."""
    t1, t2, t3, t4 = (unique(f"integration_task_{i}") for i in (1, 2, 3, 4))
    _no_retries(conductor, t1, t2, t3, t4)
    name = unique("FanInOutTest")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "fork",
                    "taskReferenceName": "fanouttask",
                    "type": "FORK_JOIN",
                    "forkTasks": [[simple(t1, "t1"), simple(t3, "t3")], [simple(t2, "t2")]],
                },
                {
                    "name": "join",
                    "taskReferenceName": "fanouttask_join",
                    "type": "JOIN",
                    "joinOn": ["t3", "t2"],
                },
                simple(t4, "t4"),
            ],
        )
    )
    return name, [t1, t2, t3, t4]


def test_fork_join_success(conductor: Conductor) -> None:
    """ForkJoinSpec "Test a simple workflow with fork join success flow"."""
    name, (t1, t2, t3, t4) = _fork_join(conductor)
    workflow_id = conductor.start(name)
    run = conductor.wait_tasks(workflow_id, 4)
    assert _pairs(run) == [
        ("FORK", "COMPLETED"),
        (t1, "SCHEDULED"),
        (t2, "SCHEDULED"),
        ("JOIN", "IN_PROGRESS"),
    ]
    assert task(run, "fanouttask_join")["inputData"]["joinOn"] == ["t3", "t2"]

    conductor.poll_and_complete(t1, {"k": 1})
    run = conductor.wait_tasks(workflow_id, 5)
    assert _pairs(run)[4] == (t3, "SCHEDULED")
    conductor.poll_and_complete(t3, {"from": "t3"})
    conductor.poll_and_complete(t2, {"from": "t2"})
    run = conductor.wait_tasks(workflow_id, 6)
    assert _pairs(run)[3] == ("JOIN", "COMPLETED")
    assert _pairs(run)[5] == (t4, "SCHEDULED")
    assert task(run, "fanouttask_join")["outputData"] == {
        "t3": {"from": "t3"},
        "t2": {"from": "t2"},
    }
    conductor.poll_and_complete(t4)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], len(run["tasks"])) == ("COMPLETED", 6)


def test_fork_join_failure(conductor: Conductor) -> None:
    """ForkJoinSpec "Test a simple workflow with fork join failure flow"."""
    name, (t1, t2, t3, _) = _fork_join(conductor)
    workflow_id = conductor.start(name)
    conductor.poll_and_complete(t1)
    conductor.wait_tasks(workflow_id, 5)
    conductor.poll_and_fail(t2, "Failed....")
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert _pairs(run) == [
        ("FORK", "COMPLETED"),
        (t1, "COMPLETED"),
        (t2, "FAILED"),
        ("JOIN", "CANCELED"),
        (t3, "CANCELED"),
    ]


def test_join_on_a_subset_of_the_branches(conductor: Conductor) -> None:
    """A JOIN whose ``joinOn`` names one branch completes when that branch is done; the
    run ends once every task has ended (DeciderService.checkForWorkflowCompletion)."""
    fast, slow, after, name = (unique(n) for n in ("fast", "slow", "after", "join_subset"))
    _no_retries(conductor, fast, slow, after)
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [[simple(fast, "fast")], [simple(slow, "slow")]],
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["fast"]},
                simple(after, "after", got="${join.output.fast.v}"),
            ],
        )
    )
    workflow_id = conductor.start(name)
    conductor.poll_and_complete(fast, {"v": 1})
    polled = conductor.poll_and_complete(after)
    assert polled["inputData"] == {"got": 1}
    run = conductor.wait_task(workflow_id, "after", "COMPLETED")
    assert run["status"] == "RUNNING"
    assert task(run, "slow")["status"] == "SCHEDULED"
    assert task(run, "join")["inputData"]["joinOn"] == ["fast"]
    conductor.poll_and_complete(slow)
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


# --- FORK_JOIN_DYNAMIC ----------------------------------------------------------------


def _dynamic_fork(conductor: Conductor) -> tuple[str, list[str]]:
    """DynamicForkJoinSpec's DynamicFanInOutTest."""
    t1, t2, t3, t4 = (unique(f"integration_task_{i}") for i in (1, 2, 3, 4))
    _no_retries(conductor, t1, t2, t3, t4)
    name = unique("DynamicFanInOutTest")
    conductor.register(
        workflow(
            name,
            [
                simple(t1, "dt1"),
                {
                    "name": "fork",
                    "taskReferenceName": "dynamicfanouttask",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {
                        "dynamicTasks": "${dt1.output.dynamicTasks}",
                        "dynamicTasksInput": "${dt1.output.dynamicTasksInput}",
                    },
                    "dynamicForkTasksParam": "dynamicTasks",
                    "dynamicForkTasksInputParamName": "dynamicTasksInput",
                },
                {"name": "join", "taskReferenceName": "dynamicfanouttask_join", "type": "JOIN"},
                simple(t4, "task4"),
            ],
        )
    )
    return name, [t1, t2, t3, t4]


def test_dynamic_fork_join_success(conductor: Conductor) -> None:
    """DynamicForkJoinSpec "Test dynamic fork join success flow"."""
    name, (t1, t2, t3, t4) = _dynamic_fork(conductor)
    workflow_id = conductor.start(name)
    conductor.poll_and_complete(
        t1,
        {
            "dynamicTasks": [
                {"name": t2, "taskReferenceName": "xdt1"},
                {"name": t3, "taskReferenceName": "xdt2"},
            ],
            "dynamicTasksInput": {"xdt1": {"k1": "v1"}, "xdt2": {"k2": "v2"}},
        },
    )
    run = conductor.wait_tasks(workflow_id, 5)
    assert _pairs(run) == [
        (t1, "COMPLETED"),
        ("FORK", "COMPLETED"),
        (t2, "SCHEDULED"),
        (t3, "SCHEDULED"),
        ("JOIN", "IN_PROGRESS"),
    ]
    assert run["tasks"][4]["referenceTaskName"] == "dynamicfanouttask_join"

    assert conductor.poll_and_complete(t2, {"ok1": "ov1"})["inputData"] == {"k1": "v1"}
    assert conductor.poll_and_complete(t3, {"ok1": "ov1"})["inputData"] == {"k2": "v2"}
    run = conductor.wait_tasks(workflow_id, 6)
    join = run["tasks"][4]
    assert (join["taskType"], join["status"]) == ("JOIN", "COMPLETED")
    assert join["inputData"]["joinOn"] == ["xdt1", "xdt2"]
    assert join["outputData"] == {"xdt1": {"ok1": "ov1"}, "xdt2": {"ok1": "ov1"}}
    assert _pairs(run)[5] == (t4, "SCHEDULED")
    conductor.poll_and_complete(t4)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], len(run["tasks"])) == ("COMPLETED", 6)


def test_dynamic_fork_join_failure_of_a_forked_task(conductor: Conductor) -> None:
    """DynamicForkJoinSpec "Test dynamic fork join failure of dynamic forked task flow"."""
    name, (t1, t2, t3, _) = _dynamic_fork(conductor)
    workflow_id = conductor.start(name)
    conductor.poll_and_complete(
        t1,
        {
            "dynamicTasks": [
                {"name": t2, "taskReferenceName": "xdt1"},
                {"name": t3, "taskReferenceName": "xdt2"},
            ],
            "dynamicTasksInput": {"xdt1": {"k1": "v1"}, "xdt2": {"k2": "v2"}},
        },
    )
    conductor.poll_and_fail(t2, "Failed....")
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert _pairs(run) == [
        (t1, "COMPLETED"),
        ("FORK", "COMPLETED"),
        (t2, "FAILED"),
        (t3, "CANCELED"),
        ("JOIN", "CANCELED"),
    ]


def test_dynamic_fork_of_one_task_type_over_a_list_of_inputs(conductor: Conductor) -> None:
    """The simple form (ForkJoinDynamicTaskMapper.getDynamicTasksSimple): ``forkTaskName``
    and ``forkTaskInputs``; forked refs are ``_<name>_<i>`` with input ``__index``."""
    item, name = unique("item"), unique("fan_out_list")
    _no_retries(conductor, item)
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "fork",
                    "taskReferenceName": "fan",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {
                        "forkTaskName": item,
                        "forkTaskInputs": "${workflow.input.items}",
                    },
                },
                {"name": "join", "taskReferenceName": "fan_join", "type": "JOIN"},
            ],
        )
    )
    workflow_id = conductor.start(name, {"items": [{"n": 1}, {"n": 2}]})
    got = sorted(
        (conductor.poll_one(item)["inputData"] for _ in range(2)), key=lambda i: i["__index"]
    )
    assert got == [{"n": 1, "__index": 0}, {"n": 2, "__index": 1}]
    run = conductor.run(workflow_id)
    assert refs(run)[1:3] == [f"_{item}_0", f"_{item}_1"]
    # each forked task carries its WorkflowTask, as Conductor's do, in every read of it
    page = conductor.http.get(f"/api/workflow/{workflow_id}/tasks").json()["results"]
    for i, forked in enumerate(run["tasks"][1:3]):
        expected = {"name": item, "taskReferenceName": f"_{item}_{i}", "type": "SIMPLE"}
        alone = conductor.http.get(f"/api/tasks/{forked['taskId']}").json()
        for read in (forked, page[i + 1], alone):
            assert read["taskId"] == forked["taskId"]
            assert {k: read["workflowTask"].get(k) for k in expected} == expected


# --- DYNAMIC ----------------------------------------------------------------------------


def test_dynamic_task_runs_the_type_named_by_its_input(conductor: Conductor) -> None:
    chosen, name = unique("chosen"), unique("dynamic_wf")
    _no_retries(conductor, chosen)
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "dynamic_task",
                    "taskReferenceName": "dyn",
                    "type": "DYNAMIC",
                    "dynamicTaskNameParam": "taskToExecute",
                    "inputParameters": {"taskToExecute": "${workflow.input.type}", "a": 1},
                }
            ],
        )
    )
    workflow_id = conductor.start(name, {"type": chosen})
    polled = conductor.poll_and_complete(chosen, {"ran": chosen})
    assert polled["inputData"]["a"] == 1
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert _pairs(run) == [(chosen, "COMPLETED")]
    assert task(run, "dyn")["outputData"] == {"ran": chosen}


def _dynamic(ref: str, to_run: str, **input_parameters: Any) -> dict[str, Any]:
    return {
        "name": f"dynamic_{ref}",
        "taskReferenceName": ref,
        "type": "DYNAMIC",
        "dynamicTaskNameParam": "taskToExecute",
        "inputParameters": {"taskToExecute": to_run, **input_parameters},
    }


def test_dynamic_task_runs_a_system_task_named_by_its_input(conductor: Conductor) -> None:
    """Conductor's docs: the name a DYNAMIC task takes "can be a system task or a Worker
    task"; DynamicTaskMapper makes it a task of that type and name, with the DYNAMIC
    task's input."""
    name = unique("dynamic_system_wf")
    with echo_server() as url:
        conductor.register(
            workflow(
                name,
                [
                    _dynamic("calc", "INLINE", evaluatorType="javascript", expression="2 * 21"),
                    _dynamic(
                        "shape",
                        "JSON_JQ_TRANSFORM",
                        v="${calc.output.result}",
                        queryExpression=".v + 1",
                    ),
                    _dynamic(
                        "post",
                        "HTTP",
                        http_request={
                            "uri": url,
                            "method": "POST",
                            "body": {"n": "${shape.output.result}"},
                        },
                    ),
                    _dynamic("set", "SET_VARIABLE", seen="${post.output.response.body.got.n}"),
                    _dynamic("pause", "WAIT", duration="1 seconds"),
                    _dynamic("nothing", "NOOP"),
                ],
                outputParameters={"seen": "${workflow.variables.seen}"},
            )
        )
        workflow_id = conductor.start(name)
        run = conductor.wait_status(workflow_id, "COMPLETED")
    assert _pairs(run) == [
        ("INLINE", "COMPLETED"),
        ("JSON_JQ_TRANSFORM", "COMPLETED"),
        ("HTTP", "COMPLETED"),
        ("SET_VARIABLE", "COMPLETED"),
        ("WAIT", "COMPLETED"),
        ("NOOP", "COMPLETED"),
    ]
    assert task(run, "calc")["outputData"]["result"] == 42
    assert task(run, "shape")["outputData"]["result"] == 43
    assert task(run, "post")["outputData"]["response"]["body"]["got"] == {"n": 43}
    assert run["output"] == {"seen": 43}
    assert [t["taskDefName"] for t in run["tasks"]] == [t["taskType"] for t in run["tasks"]]
    pause = task(run, "pause")
    assert pause["endTime"] - pause["startTime"] >= 1000, pause


def test_dynamic_task_runs_a_sub_workflow_named_by_its_input(conductor: Conductor) -> None:
    """Orkes' docs: a DYNAMIC task whose name is SUB_WORKFLOW runs the child its input
    names (subWorkflowName and subWorkflowVersion)."""
    child, parent = unique("dyn_child"), unique("dyn_parent")
    conductor.register(
        workflow(
            child,
            [
                {
                    "name": "double",
                    "taskReferenceName": "double",
                    "type": "INLINE",
                    "inputParameters": {"expression": "$.k * 2", "k": "${workflow.input.k}"},
                }
            ],
            outputParameters={"doubled": "${double.output.result}"},
        ),
        workflow(
            parent,
            [
                _dynamic(
                    "dyn",
                    "SUB_WORKFLOW",
                    subWorkflowName=child,
                    subWorkflowVersion=1,
                    k="${workflow.input.k}",
                )
            ],
            outputParameters={"got": "${dyn.output.doubled}"},
        ),
    )
    run = conductor.wait_status(conductor.start(parent, {"k": 21}), "COMPLETED")
    assert run["output"] == {"got": 42}
    dyn = task(run, "dyn")
    assert (dyn["taskType"], dyn["status"]) == ("SUB_WORKFLOW", "COMPLETED")
    assert conductor.run(dyn["subWorkflowId"])["workflowName"] == child


def test_dynamic_task_naming_an_operator_fails_naming_it(conductor: Conductor) -> None:
    name = unique("dynamic_operator_wf")
    conductor.register(workflow(name, [_dynamic("dyn", "${workflow.input.type}")]))
    for operator in ("SWITCH", "DO_WHILE", "FORK"):
        run = conductor.wait_status(conductor.start(name, {"type": operator}), "FAILED")
        reason = task(run, "dyn")["reasonForIncompletion"]
        assert f"taskToExecute = {operator!r}" in reason and "cannot run" in reason, reason
        assert task(run, "dyn")["status"] == "FAILED"


# --- DECISION / SWITCH / EXCLUSIVE_JOIN -----------------------------------------------


def _branching(conductor: Conductor, kind: str) -> tuple[str, dict[str, str]]:
    """ConditionalTaskWF of DecisionTaskSpec / SwitchTaskSpec: case 'c' -> t1, t2;
    default -> t5; then t20."""
    names = {ref: unique(f"integration_task_{ref[1:]}") for ref in ("t1", "t2", "t5", "t20")}
    _no_retries(conductor, *names.values())
    branch: dict[str, Any] = {
        "name": "branch",
        "taskReferenceName": "branch",
        "type": kind,
        "inputParameters": {"c": "${workflow.input.case}"},
        "decisionCases": {"c": [simple(names["t1"], "t1"), simple(names["t2"], "t2")]},
        "defaultCase": [simple(names["t5"], "t5")],
    }
    if kind == "DECISION":
        branch["caseValueParam"] = "c"
    else:
        branch["evaluatorType"] = "value-param"
        branch["expression"] = "c"
    name = unique(f"conditional_{kind.lower()}")
    conductor.register(workflow(name, [branch, simple(names["t20"], "t20")]))
    return name, names


def test_decision_runs_the_matching_case(conductor: Conductor) -> None:
    """DecisionTaskSpec "Test simple decision workflow" (task type DECISION, input
    ``case``, output ``caseOutput``)."""
    name, n = _branching(conductor, "DECISION")
    workflow_id = conductor.start(name, {"param1": "p1", "case": "c"})
    run = conductor.wait_tasks(workflow_id, 2)
    assert _pairs(run) == [("DECISION", "COMPLETED"), (n["t1"], "SCHEDULED")]
    decision = task(run, "branch")
    assert decision["inputData"]["case"] == "c"
    assert decision["outputData"] == {"caseOutput": ["c"]}
    conductor.poll_and_complete(n["t1"])
    conductor.poll_and_complete(n["t2"])
    conductor.poll_and_complete(n["t20"])
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert types(run) == ["DECISION", n["t1"], n["t2"], n["t20"]]


def test_switch_runs_the_matching_case(conductor: Conductor) -> None:
    """SwitchTaskSpec "Test simple switch workflow"."""
    name, n = _branching(conductor, "SWITCH")
    workflow_id = conductor.start(name, {"param1": "p1", "case": "c"})
    run = conductor.wait_tasks(workflow_id, 2)
    assert _pairs(run) == [("SWITCH", "COMPLETED"), (n["t1"], "SCHEDULED")]
    switch = task(run, "branch")
    assert switch["inputData"]["case"] == "c"
    assert switch["outputData"] == {"evaluationResult": ["c"], "selectedCase": "c"}
    conductor.poll_and_complete(n["t1"])
    conductor.poll_and_complete(n["t2"])
    run = conductor.wait_tasks(workflow_id, 4)
    assert _pairs(run)[3] == (n["t20"], "SCHEDULED")
    conductor.poll_and_complete(n["t20"])
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], len(run["tasks"])) == ("COMPLETED", 4)
    assert seqs(run) == [1, 2, 3, 4]


def test_switch_default_case(conductor: Conductor) -> None:
    """SwitchTaskSpec "Test default case condition execution of a conditional workflow"."""
    name, n = _branching(conductor, "SWITCH")
    workflow_id = conductor.start(name, {"case": "nope"})
    conductor.poll_and_complete(n["t5"])
    conductor.poll_and_complete(n["t20"])
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert _pairs(run) == [
        ("SWITCH", "COMPLETED"),
        (n["t5"], "COMPLETED"),
        (n["t20"], "COMPLETED"),
    ]
    assert seqs(run) == [1, 2, 3]


def _exclusive_join(conductor: Conductor) -> tuple[str, dict[str, str]]:
    """ExclusiveJoinSpec's ExclusiveJoinTestWorkflow."""
    n = {ref: unique(f"integration_task_{ref[4:]}") for ref in ("task1", "task2", "task4")}
    _no_retries(conductor, *n.values())

    def decide(ref: str, param: str, cases: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        return {
            "name": "decide_task",
            "taskReferenceName": ref,
            "type": "DECISION",
            "caseValueParam": param,
            "inputParameters": {param: f"${{workflow.input.{param}}}"},
            "decisionCases": cases,
        }

    name = unique("ExclusiveJoinTestWorkflow")
    conductor.register(
        workflow(
            name,
            [
                simple(n["task1"], "task1"),
                decide(
                    "decision1",
                    "decision_1",
                    {
                        "true": [simple(n["task2"], "task2")],
                        "false": [simple(n["task4"], "task4")],
                    },
                ),
                {
                    "name": "exclusive_join",
                    "taskReferenceName": "exclusiveJoin",
                    "type": "EXCLUSIVE_JOIN",
                    "joinOn": ["task2", "task4"],
                    "defaultExclusiveJoinTask": ["task1"],
                },
            ],
        )
    )
    return name, n


def test_exclusive_join_takes_the_output_of_the_branch_that_ran(conductor: Conductor) -> None:
    """ExclusiveJoinSpec "Test when the one decision is true ...": the join's output is
    the output of the joined task that ran."""
    name, n = _exclusive_join(conductor)
    workflow_id = conductor.start(name, {"decision_1": "true"})
    conductor.poll_and_complete(n["task1"], {"taskReferenceName": "task1"})
    conductor.poll_and_complete(n["task2"], {"taskReferenceName": "task2"})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert _pairs(run) == [
        (n["task1"], "COMPLETED"),
        ("DECISION", "COMPLETED"),
        (n["task2"], "COMPLETED"),
        ("EXCLUSIVE_JOIN", "COMPLETED"),
    ]
    assert task(run, "exclusiveJoin")["outputData"] == {"taskReferenceName": "task2"}


def test_exclusive_join_falls_back_to_its_default_task(conductor: Conductor) -> None:
    """ExclusiveJoinSpec "Test that the default decision is run"."""
    name, n = _exclusive_join(conductor)
    workflow_id = conductor.start(name, {"decision_1": "null"})
    conductor.poll_and_complete(n["task1"], {"taskReferenceName": "task1"})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert _pairs(run) == [
        (n["task1"], "COMPLETED"),
        ("DECISION", "COMPLETED"),
        ("EXCLUSIVE_JOIN", "COMPLETED"),
    ]
    assert task(run, "exclusiveJoin")["outputData"] == {"taskReferenceName": "task1"}


# --- DO_WHILE ---------------------------------------------------------------------------


def test_do_while_runs_its_body_until_the_condition_is_false(conductor: Conductor) -> None:
    """DoWhileSpec "Test workflow with a single iteration Do While task", with two
    iterations of one task."""
    body, name = unique("integration_task_0"), unique("Do_While_Workflow")
    _no_retries(conductor, body)
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "loopTask",
                    "taskReferenceName": "loopTask",
                    "type": "DO_WHILE",
                    "inputParameters": {"value": "${workflow.input.loop}"},
                    "loopCondition": "if ($.loopTask['iteration'] < $.value) { true; } "
                    "else { false; }",
                    "loopOver": [simple(body, "body", i="${loopTask.output.iteration}")],
                }
            ],
        )
    )
    workflow_id = conductor.start(name, {"loop": 2})
    # the loop's row counts its iterations as Conductor's DoWhile does (1 from its first)
    assert task(conductor.wait_tasks(workflow_id, 2), "loopTask")["iteration"] == 1
    first = conductor.poll_and_complete(body, {"n": 1})
    assert conductor.wait_task(workflow_id, "body__2", "SCHEDULED")
    assert task(conductor.run(workflow_id), "loopTask")["iteration"] == 2
    second = conductor.poll_and_complete(body, {"n": 2})
    assert (first["iteration"], second["iteration"]) == (1, 2)
    assert (first["referenceTaskName"], second["referenceTaskName"]) == ("body__1", "body__2")
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert _pairs(run) == [
        ("DO_WHILE", "COMPLETED"),
        (body, "COMPLETED"),
        (body, "COMPLETED"),
    ]
    assert seqs(run) == [1, 2, 3]
    loop = task(run, "loopTask")
    assert loop["outputData"]["iteration"] == loop["iteration"] == 2
    assert loop["outputData"]["1"] == {"body": {"n": 1}}
    assert loop["outputData"]["2"] == {"body": {"n": 2}}


def test_loop_condition_reads_every_iteration(conductor: Conductor) -> None:
    """DoWhile.evaluateCondition binds the loop task's whole output (every iteration)."""
    body, name = unique("counter"), unique("loop_all")
    _no_retries(conductor, body)
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "$.loop['iteration'] < 3 && $.loop['1'].body.first == true",
                    "loopOver": [simple(body, "body")],
                }
            ],
        )
    )
    workflow_id = conductor.start(name)
    conductor.poll_and_complete(body, {"first": True})
    conductor.poll_and_complete(body, {"first": False})
    conductor.poll_and_complete(body, {"first": False})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert task(run, "loop")["outputData"]["iteration"] == 3


@pytest.mark.parametrize("form", ["items", "_items"])
def test_do_while_iterates_over_a_list(conductor: Conductor, form: str) -> None:
    """conductor-oss's list iteration (DoWhile.java: ``items``, or Orkes' ``_items`` in
    inputParameters): one iteration per item, ``loopItem`` and ``loopIndex`` in the
    loop's output; an empty list runs no iteration."""
    body, name = unique("per_item"), unique("loop_items")
    _no_retries(conductor, body)
    loop: dict[str, Any] = {
        "name": "loop",
        "taskReferenceName": "loop",
        "type": "DO_WHILE",
        "loopOver": [
            simple(body, "body", item="${loop.output.loopItem}", at="${loop.output.loopIndex}")
        ],
    }
    if form == "items":
        loop["items"] = "${workflow.input.orders}"
    else:
        loop["inputParameters"] = {"_items": "${workflow.input.orders}"}
    conductor.register(workflow(name, [loop]))
    orders = [{"id": "o1"}, {"id": "o2"}, {"id": "o3"}]
    workflow_id = conductor.start(name, {"orders": orders})
    got = [conductor.poll_and_complete(body, {"done": i})["inputData"] for i in range(3)]
    assert got == [{"item": o, "at": i} for i, o in enumerate(orders)]
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert _pairs(run) == [("DO_WHILE", "COMPLETED")] + [(body, "COMPLETED")] * 3
    output = task(run, "loop")["outputData"]
    assert (output["iteration"], output["loopIndex"], output["loopItem"]) == (3, 2, orders[2])
    assert output["2"] == {"body": {"done": 1}}

    empty = conductor.wait_status(conductor.start(name, {"orders": []}), "COMPLETED")
    assert _pairs(empty) == [("DO_WHILE", "COMPLETED")]
    assert task(empty, "loop")["outputData"] == {"iteration": 0}


def test_do_while_over_a_list_longer_than_an_execution(conductor: Conductor) -> None:
    """45 items, more than one execution of the interpreter holds when its steps are
    activities (engine/runtime/interpreter.py, STEPS_PER_EXECUTION): each iteration gets
    its own item, in order."""
    name = unique("loop_long_list")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "items": "${workflow.input.numbers}",
                    "loopOver": [
                        {
                            "name": "square",
                            "taskReferenceName": "square",
                            "type": "INLINE",
                            "inputParameters": {
                                "expression": "$.n * $.n",
                                "n": "${loop.output.loopItem}",
                            },
                        }
                    ],
                }
            ],
            outputParameters={"last": "${square.output.result}"},
        )
    )
    numbers = list(range(1, 46))
    run = conductor.wait_status(conductor.start(name, {"numbers": numbers}), "COMPLETED")
    squares = [t["outputData"]["result"] for t in run["tasks"] if t["taskType"] == "INLINE"]
    assert squares == [n * n for n in numbers]
    assert run["output"] == {"last": 45 * 45}
    assert task(run, "loop")["outputData"]["iteration"] == 45


# --- WAIT, SET_VARIABLE, TERMINATE, LAMBDA, NOOP, INLINE, JSON_JQ_TRANSFORM ------------


def test_an_inline_script_reads_the_clock_once_and_a_condition_cannot(
    conductor: Conductor,
) -> None:
    """Conductor's INLINE scripts use ``new Date()`` and ``Math.random()``; the result is
    recorded once, so every read of the run shows the same. A SWITCH condition is
    evaluated again by replays: the clock there fails the task, naming why."""
    name = unique("inline_clock")
    script = "(function () { return {now: new Date().getTime(), r: Math.random()}; })()"
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "stamp",
                    "taskReferenceName": "stamp",
                    "type": "INLINE",
                    "inputParameters": {"evaluatorType": "graaljs", "expression": script},
                },
                {
                    "name": "late",
                    "taskReferenceName": "late",
                    "type": "SWITCH",
                    "evaluatorType": "javascript",
                    "expression": "Date.now() > 0 ? 'a' : 'b'",
                    "decisionCases": {"a": []},
                },
            ],
        )
    )
    before = time.time() * 1000
    run = conductor.wait_status(conductor.start(name), "FAILED")
    stamp = task(run, "stamp")
    assert stamp["status"] == "COMPLETED"
    result = stamp["outputData"]["result"]
    assert before - 1000 <= result["now"] <= time.time() * 1000 and 0 <= result["r"] < 1
    assert task(conductor.run(run["workflowId"]), "stamp")["outputData"]["result"] == result
    assert "deterministic" in task(run, "late")["reasonForIncompletion"]


def test_a_wait_task_is_in_progress_until_completed(conductor: Conductor) -> None:
    """WaitTaskSpec "Verify that a wait based simple workflow is executed"."""
    after, name = unique("integration_task_1"), unique("test_wait")
    _no_retries(conductor, after)
    conductor.register(
        workflow(
            name,
            [{"name": "wait", "taskReferenceName": "wait0", "type": "WAIT"}, simple(after, "t1")],
        )
    )
    workflow_id = conductor.start(name)
    run = conductor.wait_tasks(workflow_id, 1)
    assert _pairs(run) == [("WAIT", "IN_PROGRESS")]
    r = conductor.http.post(f"/api/tasks/{workflow_id}/wait0/COMPLETED", json={"waited": True})
    assert r.status_code == 200, r.text
    run = conductor.wait_tasks(workflow_id, 2)
    assert _pairs(run) == [("WAIT", "COMPLETED"), (after, "SCHEDULED")]
    assert task(run, "wait0")["outputData"] == {"waited": True}


def test_a_signal_completes_the_blocked_wait_task(conductor: Conductor) -> None:
    """SignalTaskSpec "Signal completes a blocked WAIT task and advances the workflow"."""
    after, name = unique("after_signal"), unique("signal_wf")
    _no_retries(conductor, after)
    conductor.register(
        workflow(
            name,
            [
                {"name": "wait", "taskReferenceName": "wait", "type": "WAIT"},
                simple(after, "after", got="${wait.output.answer}"),
            ],
        )
    )
    workflow_id = conductor.start(name)
    conductor.wait_tasks(workflow_id, 1)
    r = conductor.http.post(f"/api/tasks/{workflow_id}/COMPLETED/signal", json={"answer": 42})
    assert r.status_code == 200, r.text
    assert conductor.poll_one(after)["inputData"] == {"got": 42}

    # SignalTaskSpec "Signal on a workflow with no blocking task": nothing to signal
    r = conductor.http.post(f"/api/tasks/{workflow_id}/COMPLETED/signal/sync", json={"answer": 43})
    assert r.status_code == 404, r.text


def test_set_variable_is_visible_while_the_run_is_running(conductor: Conductor) -> None:
    """SetVariableTaskSpec "Test workflow with set variable task", read before the end."""
    after, name = unique("after_set"), unique("set_variable_wf")
    _no_retries(conductor, after)
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "set",
                    "taskReferenceName": "set",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"var": "${workflow.input.var}"},
                },
                simple(after, "after", v="${workflow.variables.var}"),
            ],
            variables={"seed": 1},
        )
    )
    workflow_id = conductor.start(name, {"var": "var_test_value"})
    assert conductor.poll_one(after)["inputData"] == {"v": "var_test_value"}
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert run["variables"] == {"seed": 1, "var": "var_test_value"}
    assert _pairs(run)[0] == ("SET_VARIABLE", "COMPLETED")


def test_terminate_completed_after_a_lambda(conductor: Conductor) -> None:
    """LambdaAndTerminateTaskSpec "Test workflow with a terminate task when the status is
    completed": seq 1 and 2, output from the terminate task, reason naming it."""
    name = unique("test_terminate_task_wf")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "lambda",
                    "taskReferenceName": "lambda0",
                    "type": "LAMBDA",
                    "inputParameters": {
                        "input": "${workflow.input}",
                        "scriptExpression": "if ($.input.a==1){return {testvalue: true}} "
                        "else{return {testvalue: false} }",
                    },
                },
                {
                    "name": "terminate",
                    "taskReferenceName": "terminate0",
                    "type": "TERMINATE",
                    "inputParameters": {
                        "terminationStatus": "COMPLETED",
                        "workflowOutput": {"result": "${lambda0.output.result}"},
                    },
                },
            ],
        )
    )
    workflow_id = conductor.start(name, {"a": 1})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert [(t["taskType"], t["status"], t["seq"]) for t in run["tasks"]] == [
        ("LAMBDA", "COMPLETED", 1),
        ("TERMINATE", "COMPLETED", 2),
    ]
    assert "Workflow is COMPLETED by TERMINATE task" in run["reasonForIncompletion"]
    assert run["output"] == {"result": {"testvalue": True}}
    assert task(run, "lambda0")["outputData"] == {"result": {"testvalue": True}}


def test_terminate_failed_with_a_reason(conductor: Conductor) -> None:
    """LambdaAndTerminateTaskSpec "... when the status is failed"."""
    name = unique("test_terminate_task_failed_wf")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "terminate",
                    "taskReferenceName": "terminate0",
                    "type": "TERMINATE",
                    "inputParameters": {
                        "terminationStatus": "FAILED",
                        "terminationReason": "Early exit in terminate",
                    },
                }
            ],
        )
    )
    workflow_id = conductor.start(name, {"a": 1})
    run = conductor.wait_status(workflow_id, "FAILED")
    assert run["status"] == "FAILED"
    assert run["reasonForIncompletion"] == "Early exit in terminate"
    assert statuses(run) == ["COMPLETED"]


def test_noop_completes_at_once(conductor: Conductor) -> None:
    name = unique("noop_wf")
    conductor.register(workflow(name, [{"name": "noop", "taskReferenceName": "n", "type": "NOOP"}]))
    run = conductor.wait_status(conductor.start(name), "COMPLETED")
    assert _pairs(run) == [("NOOP", "COMPLETED")]


def test_inline_and_json_jq_transform(conductor: Conductor) -> None:
    """JsonJQTransformSpec "Test workflow with json jq transform task succeeds"."""
    name = unique("test_json_jq_transform_wf")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "jq",
                    "taskReferenceName": "jq_1",
                    "type": "JSON_JQ_TRANSFORM",
                    "inputParameters": {
                        "in1": {"array": ["a", "b"]},
                        "in2": {"array": ["c", "d"]},
                        "queryExpression": "{ out: (.in1.array + .in2.array) }",
                    },
                },
                {
                    "name": "inline",
                    "taskReferenceName": "inline_1",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "graaljs",
                        "expression": "$.items.length",
                        "items": "${jq_1.output.result.out}",
                    },
                },
            ],
            outputParameters={"count": "${inline_1.output.result}"},
        )
    )
    run = conductor.wait_status(conductor.start(name), "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert task(run, "jq_1")["outputData"]["result"] == {"out": ["a", "b", "c", "d"]}
    assert run["output"] == {"count": 4}


# --- START_WORKFLOW, SUB_WORKFLOW, inline definitions ----------------------------------


def test_start_workflow_starts_another_run_and_does_not_wait(conductor: Conductor) -> None:
    """StartWorkflowSpec "start another workflow using ..." (by name)."""
    child_type, child, parent = unique("child_step"), unique("child_wf"), unique("starter")
    _no_retries(conductor, child_type)
    conductor.register(workflow(child, [simple(child_type, "c1", x="${workflow.input.x}")]))
    conductor.register(
        workflow(
            parent,
            [
                {
                    "name": "start",
                    "taskReferenceName": "start_wf",
                    "type": "START_WORKFLOW",
                    "inputParameters": {
                        "startWorkflow": {"name": child, "input": {"x": "${workflow.input.x}"}}
                    },
                }
            ],
        )
    )
    parent_id = conductor.start(parent, {"x": 7}, correlation_id="corr-7")
    run = conductor.wait_status(parent_id, "COMPLETED")
    assert _pairs(run) == [("START_WORKFLOW", "COMPLETED")]
    child_id = task(run, "start_wf")["outputData"]["workflowId"]
    started = conductor.run(child_id)
    assert (started["workflowName"], started["correlationId"]) == (child, "corr-7")
    assert conductor.poll_one(child_type)["inputData"] == {"x": 7}


def test_sub_workflow_with_an_inline_definition(conductor: Conductor) -> None:
    """simple_workflow_with_sub_workflow_inline_def: the child definition is given in
    ``subWorkflowParam.workflowDefinition`` and is not registered."""
    step, parent = unique("inline_child_step"), unique("parent_inline")
    _no_retries(conductor, step)
    child_def = workflow(
        unique("never_registered"),
        [simple(step, "c1", x="${workflow.input.x}")],
        outputParameters={"y": "${c1.output.y}"},
    )
    conductor.register(
        workflow(
            parent,
            [
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "inputParameters": {"x": "${workflow.input.x}"},
                    "subWorkflowParam": {
                        "name": child_def["name"],
                        "version": 1,
                        "workflowDefinition": child_def,
                    },
                }
            ],
            outputParameters={"y": "${sub.output.y}"},
        )
    )
    parent_id = conductor.start(parent, {"x": 3})
    assert conductor.poll_and_complete(step, {"y": 9})["inputData"] == {"x": 3}
    run = conductor.wait_status(parent_id, "COMPLETED")
    assert run["output"] == {"y": 9}
    assert _pairs(run) == [("SUB_WORKFLOW", "COMPLETED")]
    assert task(run, "sub")["subWorkflowId"]


def test_start_with_an_inline_workflow_definition(conductor: Conductor) -> None:
    """WorkflowAndTaskConfigurationSpec "Test task def template" starts its run with the
    definition in the request (``StartWorkflowInput.workflowDefinition``)."""
    step = unique("templated_task")
    conductor.taskdefs(
        {
            "name": step,
            "retryCount": 0,
            "inputTemplate": {
                "http_request": {
                    "method": "GET",
                    "uri": "/get/something",
                    "body": {
                        "inputPaths": ["${workflow.input.path1}", "${workflow.input.path2}"],
                        "requestDetails": "${workflow.input.requestDetails}",
                    },
                }
            },
        }
    )
    definition = workflow(unique("template_workflow"), [simple(step, "t0")])
    workflow_id = conductor.start(
        definition["name"],
        {"path1": "file://path1", "path2": "file://path2", "requestDetails": {"key2": 42}},
        workflow_def=definition,
    )
    polled = conductor.poll_one(step)
    assert polled["workflowInstanceId"] == workflow_id
    assert polled["inputData"]["http_request"] == {
        "method": "GET",
        "uri": "/get/something",
        "body": {"inputPaths": ["file://path1", "file://path2"], "requestDetails": {"key2": 42}},
    }


def test_a_workflow_with_no_tasks_is_refused_over_the_api(conductor: Conductor) -> None:
    """Conductor's WorkflowDef has ``@NotEmpty`` tasks ("WorkflowTask list cannot be
    empty"), validated on registration and on a start's inline ``workflowDef``
    (StartWorkflowRequest: ``@Valid``). WorkflowAndTaskConfigurationSpec's "Test
    workflow with no tasks" runs one through StartWorkflowOperation, under the API: the
    Decider's part of it is tests/unit/engine/decider/test_decider.py,
    test_a_definition_with_no_tasks_completes_at_once."""
    name = unique("empty_workflow")
    refused = conductor.http.post("/api/metadata/workflow", json=workflow(name, []))
    assert refused.status_code == 400, refused.text
    assert "WorkflowTask list cannot be empty" in refused.text
    inline = conductor.http.post(
        "/api/workflow", json={"name": name, "workflowDef": workflow(name, [])}
    )
    assert inline.status_code == 400, inline.text
    assert "WorkflowTask list cannot be empty" in inline.text


# --- HTTP -------------------------------------------------------------------------------


@pytest.fixture
def echo_url() -> Iterator[str]:
    with echo_server() as url:
        yield url


def test_http_task_in_the_flat_form(conductor: Conductor, echo_url: str) -> None:
    """``uri``/``method``/``headers``/``body`` directly in inputParameters (accepted by
    Conductor's WorkflowTaskTypeConstraint.isHttpTaskValid)."""
    name = unique("http_flat")
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "http",
                    "taskReferenceName": "call",
                    "type": "HTTP",
                    "inputParameters": {
                        "uri": echo_url,
                        "method": "POST",
                        "headers": {"X-Test": "yes"},
                        "body": {"n": "${workflow.input.n}"},
                    },
                }
            ],
        )
    )
    run = conductor.wait_status(conductor.start(name, {"n": 5}), "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    response = task(run, "call")["outputData"]["response"]
    assert response["statusCode"] == 200
    assert response["body"] == {"got": {"n": 5}, "header": "yes"}


def _async_http(name: str, uri: str, body: Any, **fields: Any) -> dict[str, Any]:
    return workflow(
        name,
        [
            {
                "name": "http",
                "taskReferenceName": "call",
                "type": "HTTP",
                "asyncComplete": True,
                "inputParameters": {"http_request": {"uri": uri, "method": "POST", "body": body}},
                **fields,
            },
            {
                "name": "after",
                "taskReferenceName": "after",
                "type": "SET_VARIABLE",
                "inputParameters": {"saw": "${call.output.done}"},
            },
        ],
        outputParameters={"done": "${call.output.done}"},
    )


def test_http_task_with_async_complete_waits_for_a_task_update(
    conductor: Conductor, echo_url: str
) -> None:
    """HttpTask with ``asyncComplete`` (conductor-oss HttpTaskTest.testPostAsyncComplete):
    the call answered 2xx, so the task is IN_PROGRESS with the response as its output,
    and the run waits. A task update (``POST /tasks``, as the called service would post
    it) ends the task with the update's output, which replaces the response
    (WorkflowExecutorOps.updateTask), and the run goes on."""
    name = unique("http_async")
    conductor.register(_async_http(name, echo_url, {"n": "${workflow.input.n}"}))
    workflow_id = conductor.start(name, {"n": 7})
    run = conductor.wait_task(workflow_id, "call", "IN_PROGRESS")
    call = task(run, "call")
    assert call["status"] == "IN_PROGRESS", call
    assert call["outputData"]["response"]["body"] == {"got": {"n": 7}, "header": None}
    time.sleep(0.5)  # nothing ends it meanwhile
    assert statuses(conductor.run(workflow_id)) == ["IN_PROGRESS"]

    done = conductor.update(
        {"workflowInstanceId": workflow_id, "taskId": call["taskId"]},
        "COMPLETED",
        {"done": "yes"},
    )
    assert done.status_code == 200, done.text
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert _pairs(run) == [("HTTP", "COMPLETED"), ("SET_VARIABLE", "COMPLETED")]
    assert task(run, "call")["outputData"] == {"done": "yes"}
    assert run["output"] == {"done": "yes"}


def test_http_task_with_async_complete_retried_after_a_failed_update(
    conductor: Conductor, echo_url: str
) -> None:
    """A FAILED update of an asyncComplete HTTP task is a failed attempt like any other:
    with ``retryCount`` 1 the call is made again (a new task id) and that attempt waits
    for its own update, here by reference name."""
    name = unique("http_async_retry")
    conductor.register(_async_http(name, echo_url, {"k": 1}, retryCount=1))
    workflow_id = conductor.start(name)
    first = task(conductor.wait_task(workflow_id, "call", "IN_PROGRESS"), "call")
    failed = conductor.update(
        {"workflowInstanceId": workflow_id, "taskId": first["taskId"]},
        "FAILED",
        reason="the job failed",
    )
    assert failed.status_code == 200, failed.text
    run = conductor.wait(
        workflow_id,
        lambda r: len(r["tasks"]) == 2 and r["tasks"][1]["status"] == "IN_PROGRESS",
    )
    assert statuses(run) == ["FAILED", "IN_PROGRESS"], run["reasonForIncompletion"]
    second = run["tasks"][1]
    assert second["retriedTaskId"] == first["taskId"]
    assert second["outputData"]["response"]["statusCode"] == 200
    by_ref = conductor.http.post(
        f"/api/tasks/{workflow_id}/call/COMPLETED", json={"done": "second"}
    )
    assert by_ref.status_code == 200, by_ref.text
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["output"] == {"done": "second"}
    assert statuses(run) == ["FAILED", "COMPLETED", "COMPLETED"]


def test_http_task_with_async_complete_updated_before_its_call_answers(
    conductor: Conductor, dev_url: str
) -> None:
    """The called service posts the task update before it answers the call (the callback
    pattern at its fastest): the update is kept and ends the task once the call
    answered, and the run completes; nothing is lost to the race."""
    posted: list[int] = []

    def calls_back(request: Request) -> Reply:
        answer = httpx.post(
            f"{dev_url}/api/tasks/{request.json()['workflowId']}/call/COMPLETED",
            json={"done": "early"},
            timeout=10,
        )
        posted.append(answer.status_code)
        return Reply(200, {})

    with LocalServer(calls_back) as server:
        name = unique("http_async_early")
        body = {"workflowId": "${workflow.workflowId}"}
        conductor.register(_async_http(name, f"{server.url}/job", body))
        run = conductor.wait_status(conductor.start(name), "COMPLETED")
    assert posted == [200]
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert task(run, "call")["outputData"] == {"done": "early"}


def test_an_update_of_a_call_without_async_complete_is_refused_naming_the_field(
    conductor: Conductor, dev_url: str
) -> None:
    """Without ``asyncComplete`` the call's answer ends the task: an update posted while
    the call runs is a 409 that says so (it was a 200 the run never read), and the run
    goes on with the call's answer."""
    answers: list[httpx.Response] = []

    def calls_back(request: Request) -> Reply:
        answers.append(
            httpx.post(
                f"{dev_url}/api/tasks/{request.json()['workflowId']}/call/COMPLETED",
                json={"done": "by update"},
                timeout=10,
            )
        )
        return Reply(200, {"done": "by the call"})

    with LocalServer(calls_back) as server:
        name = unique("http_not_async")
        definition = _async_http(
            name, f"{server.url}/job", {"workflowId": "${workflow.workflowId}"}
        )
        definition["tasks"][0]["asyncComplete"] = False
        conductor.register(definition)
        run = conductor.wait_status(conductor.start(name), "COMPLETED")
    [answer] = answers
    assert answer.status_code == 409, answer.text
    assert "asyncComplete" in answer.json()["message"]
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert task(run, "call")["outputData"]["response"]["body"] == {"done": "by the call"}


def test_an_update_of_a_running_sub_workflow_task_is_refused(conductor: Conductor) -> None:
    """A SUB_WORKFLOW task ends with its child run: an update of it is a 409 naming the
    way (the child run), and the parent still waits for the child."""
    child_type, child, parent = unique("child_task"), unique("child_wf"), unique("parent_wf")
    _no_retries(conductor, child_type)
    conductor.register(workflow(child, [simple(child_type, "c")]))
    conductor.register(
        workflow(
            parent,
            [
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": child, "version": 1},
                }
            ],
        )
    )
    workflow_id = conductor.start(parent)
    conductor.wait_task(workflow_id, "sub", "IN_PROGRESS")
    r = conductor.http.post(f"/api/tasks/{workflow_id}/sub/COMPLETED", json={"x": 1})
    assert r.status_code == 409, r.text
    assert "child run" in r.json()["message"]
    conductor.poll_and_complete(child_type, {"from": "child"})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert task(run, "sub")["outputData"].get("x") is None


def test_a_wait_with_a_duration_ends_early_by_a_task_update(conductor: Conductor) -> None:
    """A WAIT of an hour completed by a task update (Conductor's updateTask ends any WAIT
    task): the run goes on at once with the update's output."""
    after, name = unique("after_wait"), unique("wait_hour")
    _no_retries(conductor, after)
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": "wait",
                    "taskReferenceName": "wait",
                    "type": "WAIT",
                    "inputParameters": {"duration": "1 hour"},
                },
                simple(after, "after", got="${wait.output.early}"),
            ],
        )
    )
    workflow_id = conductor.start(name)
    conductor.wait_task(workflow_id, "wait", "IN_PROGRESS")
    r = conductor.http.post(f"/api/tasks/{workflow_id}/wait/COMPLETED", json={"early": True})
    assert r.status_code == 200, r.text
    assert conductor.poll_one(after)["inputData"] == {"got": True}
    run = conductor.run(workflow_id)
    assert _pairs(run)[0] == ("WAIT", "COMPLETED")


def test_a_large_output_posted_for_a_human_or_async_complete_task_is_kept_whole(
    conductor: Conductor, echo_url: str
) -> None:
    """An output of 3 MB (well under the request limit) posted for a HUMAN task and for
    an asyncComplete HTTP task goes to the payload store as a worker's does: the tasks
    complete, the run reads from them and completes, and the output reads back whole.
    Inline, it rode in the run's messages and failed the run past their 1 MiB limit while
    the task stayed IN_PROGRESS."""
    name = unique("large_outputs")
    http = _async_http(name, echo_url, {})["tasks"][0]
    conductor.register(
        workflow(
            name,
            [
                {"name": "h", "taskReferenceName": "h", "type": "HUMAN"},
                http,
                {
                    "name": "s",
                    "taskReferenceName": "s",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"k": "${h.output.k}", "d": "${call.output.k}"},
                },
            ],
            outputParameters={"k": "${h.output.k}", "d": "${call.output.k}"},
        )
    )
    workflow_id = conductor.start(name)
    blob = "x" * 3_000_000
    for ref, k in (("h", 1), ("call", 2)):
        conductor.wait_task(workflow_id, ref, "IN_PROGRESS")
        done = conductor.http.post(
            f"/api/tasks/{workflow_id}/{ref}/COMPLETED", json={"blob": blob, "k": k}
        )
        assert done.status_code == 200, done.text
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert run["output"] == {"k": 1, "d": 2}
    for ref in ("h", "call"):
        row = task(run, ref)
        assert row["status"] == "COMPLETED"
        assert conductor.task_output(row["taskId"])["blob"] == blob


def test_http_task_with_async_complete_times_out_without_an_update(
    conductor: Conductor, echo_url: str
) -> None:
    """The wait for the update is bounded by the task's ``timeoutSeconds`` as any system
    task's (DeciderService.checkTaskTimeout): TIME_OUT_WF times the run out."""
    name = unique("http_async_timeout")
    conductor.register(
        _async_http(
            name,
            echo_url,
            {},
            taskDefinition={
                "timeoutSeconds": 1,
                "responseTimeoutSeconds": 1,
                "timeoutPolicy": "TIME_OUT_WF",
                "retryCount": 0,
            },
        )
    )
    run = conductor.wait_status(conductor.start(name), "TIMED_OUT")
    assert run["status"] == "TIMED_OUT", run["reasonForIncompletion"]
    assert statuses(run) == ["TIMED_OUT"]
    assert task(run, "call")["outputData"]["response"]["statusCode"] == 200


# --- workflowTask.taskDefinition --------------------------------------------------------


def test_a_workflow_task_without_a_task_definition_shows_the_one_it_runs_with(
    conductor: Conductor,
) -> None:
    """conductor-oss's MetadataMapperService.populateWorkflowTaskWithDefinition: a task
    that gives no ``taskDefinition`` shows the registered one of its name, else a
    stand-in (a worker task Conductor's default, a system task no retries and no
    response timeout)."""
    registered, unregistered, name = unique("sv"), unique("worker"), unique("shown_defs")
    conductor.taskdefs({"name": registered, "retryCount": 2, "responseTimeoutSeconds": 30})
    conductor.register(
        workflow(
            name,
            [
                {
                    "name": registered,
                    "taskReferenceName": "registered",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"a": 1},
                },
                {
                    "name": "plain",
                    "taskReferenceName": "plain",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"b": 2},
                },
                simple(unregistered, "worker"),
            ],
        )
    )
    workflow_id = conductor.start(name)
    run = conductor.wait_task(workflow_id, "worker", "SCHEDULED")
    shown = {t["referenceTaskName"]: t["workflowTask"]["taskDefinition"] for t in run["tasks"]}
    assert (shown["registered"]["name"], shown["registered"]["retryCount"]) == (registered, 2)
    assert shown["registered"]["responseTimeoutSeconds"] == 30
    assert (shown["plain"]["name"], shown["plain"]["retryCount"]) == ("plain", 0)
    assert shown["plain"]["responseTimeoutSeconds"] == 0
    assert (shown["worker"]["name"], shown["worker"]["retryCount"]) == (unregistered, 3)
    assert shown["worker"]["responseTimeoutSeconds"] == 3600
