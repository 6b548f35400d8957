"""Unit tests of the Decider for the task types and rules added for Conductor fidelity
(issue 12): FORK_JOIN_DYNAMIC, DYNAMIC, EXCLUSIVE_JOIN, START_WORKFLOW, LAMBDA, NOOP, JOIN
``joinOn`` inputs, SWITCH/DECISION case inputs, task definition ``inputTemplate`` and
``loopCondition`` over every iteration."""

from __future__ import annotations

from typing import Any

from engine.language.definitions import RunStatus, TaskStatus
from tests.unit.engine.decider.test_decider import Sim, decider, t

C = TaskStatus.COMPLETED


def dyn_fork(**kw: Any) -> dict[str, Any]:
    return t("fan", "FORK_JOIN_DYNAMIC", **kw)


def test_fork_join_dynamic_from_a_task_list_and_inputs_by_reference() -> None:
    d = decider(
        dyn_fork(
            dynamicForkTasksParam="tasks",
            dynamicForkTasksInputParamName="inputs",
            inputParameters={"tasks": "${workflow.input.tasks}", "inputs": "${workflow.input.in}"},
        ),
        t("fan_join", "JOIN"),
        t("after", inputParameters={"joined": "${fan_join.output}"}),
    )
    tasks = [t("x1", name="work"), t("x2", name="work")]
    sim = Sim(d, {"tasks": tasks, "in": {"x1": {"n": 1}, "x2": {"n": 2}}})
    assert sim.status("fan") == C
    assert sim.task("fan").input["forkedTasks"] == ["x1", "x2"]
    assert sorted(sim.pending) == ["x1", "x2"]
    assert sim.actions["x1"].input == {"n": 1} and sim.actions["x1"].name == "work"
    # the branches are scheduled before the JOIN
    assert sim.task("x1").seq < sim.task("fan_join").seq
    sim.complete("x2", r=2)
    assert sim.status("fan_join") == TaskStatus.IN_PROGRESS
    sim.complete("x1", r=1)
    assert sim.task("fan_join").output == {"x1": {"r": 1}, "x2": {"r": 2}}
    assert sim.actions["after"].input == {"joined": {"x1": {"r": 1}, "x2": {"r": 2}}}


def test_fork_join_dynamic_simple_form_one_task_per_input() -> None:
    d = decider(
        dyn_fork(inputParameters={"forkTaskName": "work", "forkTaskInputs": [{"a": 1}, 7]}),
        t("fan_join", "JOIN"),
    )
    sim = Sim(d)
    assert sorted(sim.pending) == ["_work_0", "_work_1"]
    assert sim.actions["_work_0"].input == {"a": 1, "__index": 0}
    assert sim.actions["_work_1"].input == {"input": 7, "__index": 1}
    sim.complete("_work_0")
    sim.complete("_work_1")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_fork_join_dynamic_with_an_unreadable_list_fails() -> None:
    d = decider(
        dyn_fork(
            dynamicForkTasksParam="tasks",
            dynamicForkTasksInputParamName="inputs",
            inputParameters={"tasks": "nope", "inputs": {}},
        ),
        t("fan_join", "JOIN"),
    )
    sim = Sim(d)
    assert sim.status("fan") == TaskStatus.FAILED
    assert "Cannot deserialize a list of Workflow Tasks" in (sim.task("fan").reason or "")
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED


def test_dynamic_runs_the_named_worker_type() -> None:
    d = decider(
        t("dyn", "DYNAMIC", dynamicTaskNameParam="which", inputParameters={"which": "w2"}),
        t("after", inputParameters={"r": "${dyn.output.r}"}),
    )
    sim = Sim(d)
    assert sim.actions["dyn"].name == "w2" and sim.actions["dyn"].type == "WORKER"
    sim.complete("dyn", r=5)
    assert sim.actions["after"].input == {"r": 5}


def test_dynamic_runs_a_named_system_type_as_that_type() -> None:
    d = decider(
        t(
            "dyn",
            "DYNAMIC",
            dynamicTaskNameParam="which",
            inputParameters={
                "which": "HTTP",
                "http_request": {"uri": "http://example.test", "method": "GET"},
            },
        ),
        t("after", inputParameters={"s": "${dyn.output.response.statusCode}"}),
    )
    sim = Sim(d)
    action = sim.actions["dyn"]
    assert (action.name, action.type, action.task_def) == ("HTTP", "HTTP", None)
    assert action.input["http_request"]["uri"] == "http://example.test"
    assert sim.task("dyn").start_time == sim.task("dyn").scheduled_time  # a system task
    sim.complete("dyn", response={"statusCode": 200})
    assert sim.actions["after"].input == {"s": 200}


def test_dynamic_system_type_takes_the_task_definition_of_its_name() -> None:
    d = decider(
        t("dyn", "DYNAMIC", dynamicTaskNameParam="which", inputParameters={"which": "HTTP"}),
        defs={"HTTP": {"retryCount": 1, "retryDelaySeconds": 0}},
    )
    sim = Sim(d)
    first = sim.actions["dyn"].attempt
    sim.fail("dyn")
    retried = sim.actions["dyn"]
    assert (retried.type, retried.attempt) == ("HTTP", first + 1)
    # a Decider made afresh for the run (a restart) resolves the name the same way
    again = d.for_run(sim.state)
    assert again.nodes["dyn"].task_def is not None
    assert again.nodes["dyn"].task_def.retry_count == 1


def test_dynamic_runs_inline_system_types_in_the_work_item() -> None:
    d = decider(
        t(
            "v",
            "DYNAMIC",
            dynamicTaskNameParam="tn",
            inputParameters={"tn": "SET_VARIABLE", "x": 1},
        ),
        t(
            "end",
            "DYNAMIC",
            dynamicTaskNameParam="tn",
            inputParameters={
                "tn": "TERMINATE",
                "terminationStatus": "COMPLETED",
                "workflowOutput": {"x": "${workflow.variables.x}"},
            },
        ),
        t("never"),
    )
    sim = Sim(d)
    assert sim.all_actions == []
    assert sim.task("v").type == "SET_VARIABLE" and sim.status("v") == C
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
    assert sim.finished.output == {"x": 1}


def test_dynamic_naming_an_operator_fails_without_waiting_for_a_worker() -> None:
    for name in ("SWITCH", "DECISION", "DO_WHILE", "FORK", "EVENT"):
        sim = Sim(
            decider(t("dyn", "DYNAMIC", dynamicTaskNameParam="w", inputParameters={"w": name}))
        )
        assert sim.status("dyn") == TaskStatus.FAILED
        assert f"w = {name!r} is a task type a DYNAMIC task cannot run" in (
            sim.task("dyn").reason or ""
        )
        assert sim.all_actions == []


def test_dynamic_sub_workflow_takes_its_child_from_the_input() -> None:
    """Orkes' DYNAMIC -> SUB_WORKFLOW: subWorkflowName and subWorkflowVersion (or an
    inline subWorkflowDefinition) in the DYNAMIC task's input."""
    named = {"tn": "SUB_WORKFLOW", "subWorkflowName": "child", "subWorkflowVersion": 2, "k": 1}
    sim = Sim(decider(t("dyn", "DYNAMIC", dynamicTaskNameParam="tn", inputParameters=named)))
    action = sim.actions["dyn"]
    assert (action.type, action.name) == ("SUB_WORKFLOW", "SUB_WORKFLOW")
    assert action.sub_workflow is not None
    assert (action.sub_workflow.name, action.sub_workflow.version) == ("child", 2)

    inline = {"name": "adhoc", "tasks": [{"name": "n", "taskReferenceName": "n", "type": "NOOP"}]}
    given = {"tn": "SUB_WORKFLOW", "subWorkflowDefinition": inline}
    sim = Sim(decider(t("dyn", "DYNAMIC", dynamicTaskNameParam="tn", inputParameters=given)))
    child = sim.actions["dyn"].sub_workflow
    assert child is not None and (child.name, child.workflow_definition) == ("adhoc", inline)

    sim = Sim(
        decider(
            t("dyn", "DYNAMIC", dynamicTaskNameParam="tn", inputParameters={"tn": "SUB_WORKFLOW"})
        )
    )
    assert sim.status("dyn") == TaskStatus.FAILED
    assert "subWorkflowName" in (sim.task("dyn").reason or "")
    assert sim.all_actions == []


def test_dynamic_without_a_name_fails() -> None:
    sim = Sim(decider(t("dyn", "DYNAMIC", dynamicTaskNameParam="which")))
    assert sim.status("dyn") == TaskStatus.FAILED
    assert "Cannot map a dynamic task" in (sim.task("dyn").reason or "")


def test_exclusive_join_takes_the_output_of_the_case_that_ran() -> None:
    d = decider(
        t(
            "sw",
            "SWITCH",
            evaluatorType="value-param",
            expression="w",
            inputParameters={"w": "${workflow.input.w}"},
            decisionCases={"a": [t("ta")], "b": [t("tb")]},
        ),
        t("xj", "EXCLUSIVE_JOIN", joinOn=["ta", "tb"]),
    )
    sim = Sim(d, {"w": "b"})
    assert sim.pending == ["tb"]
    sim.complete("tb", v="from b")
    assert sim.task("xj").output == {"v": "from b"}
    assert sim.task("xj").input["joinOn"] == ["ta", "tb"]
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_noop_completes_inline_and_lambda_is_scheduled_as_an_activity() -> None:
    d = decider(
        t("nothing", "NOOP"),
        t(
            "calc",
            "LAMBDA",
            inputParameters={"n": "${workflow.input.n}", "scriptExpression": "return $.n * 2;"},
        ),
        outputParameters={"r": "${calc.output.result}", "noop": "${nothing.output}"},
    )
    sim = Sim(d, {"n": 21})
    assert sim.status("nothing") == C
    # evaluated in the evaluator processes (engine.runtime.builtins.evaluate)
    assert sim.actions["calc"].type == "LAMBDA"
    assert sim.actions["calc"].input == {"n": 21, "scriptExpression": "return $.n * 2;"}
    sim.complete("calc", result=42)
    assert sim.finished is not None
    assert sim.finished.output == {"r": 42, "noop": {}}


def test_start_workflow_is_scheduled_as_an_activity() -> None:
    d = decider(
        t("spawn", "START_WORKFLOW", inputParameters={"startWorkflow": {"name": "child"}}),
        t("after", inputParameters={"id": "${spawn.output.workflowId}"}),
    )
    sim = Sim(d)
    assert sim.actions["spawn"].type == "START_WORKFLOW"
    assert sim.actions["spawn"].input == {"startWorkflow": {"name": "child"}}
    sim.complete("spawn", workflowId="w-2")
    assert sim.actions["after"].input == {"id": "w-2"}


def test_join_input_lists_join_on() -> None:
    d = decider(
        t("fork", "FORK_JOIN", forkTasks=[[t("a")], [t("b")]]),
        t("join", "JOIN", joinOn=["a", "b"]),
    )
    sim = Sim(d)
    assert sim.task("join").input == {"joinOn": ["a", "b"]}


def test_switch_records_its_case_and_decision_its_case_output() -> None:
    sw = t(
        "sw",
        "SWITCH",
        evaluatorType="value-param",
        expression="w",
        inputParameters={"w": "x"},
        decisionCases={"x": [t("in_x")]},
    )
    sim = Sim(decider(sw))
    assert sim.task("sw").input == {"w": "x", "case": "x", "hasChildren": "true"}
    legacy = t(
        "sw",
        "DECISION",
        caseValueParam="p",
        inputParameters={"p": "y"},
        decisionCases={"x": [t("in_x")]},
    )
    sim = Sim(decider(legacy))
    assert sim.task("sw").input == {"case": "y"}
    assert sim.task("sw").output == {"caseOutput": ["y"]}


def test_input_template_fills_inputs_the_task_does_not_give() -> None:
    d = decider(
        t("a", inputParameters={"given": 1, "both": "mine"}),
        defs={"a": {"inputTemplate": {"both": "template", "extra": [1, 2]}}},
    )
    sim = Sim(d)
    assert sim.actions["a"].input == {"given": 1, "both": "mine", "extra": [1, 2]}


def test_loop_condition_sees_every_iteration() -> None:
    d = decider(
        t(
            "loop",
            "DO_WHILE",
            loopOver=[t("a")],
            # continue while the first iteration's n differs from the latest one's
            loopCondition="$.loop['1'].a.n == $.a.n",
        ),
    )
    sim = Sim(d)
    sim.complete("a__1", n=1)
    assert sim.pending == ["a__2"]
    sim.complete("a__2", n=1)
    assert sim.pending == ["a__3"]
    sim.complete("a__3", n=2)
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
    assert sim.task("loop").output["iteration"] == 3
