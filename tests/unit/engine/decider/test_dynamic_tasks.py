"""Unit tests of the Decider for the tasks a run makes while it runs: what a
FORK_JOIN_DYNAMIC may fork (its reference names must not collide with the definition's,
another dynamic fork's or each other's; WORKER names must be task type names) and the
worker type a DYNAMIC task may resolve to."""

from __future__ import annotations

from typing import Any

import pytest

from engine.decider import Decider
from engine.language.definitions import RunStatus, TaskStatus, TaskType
from tests.unit.engine.decider.test_decider import Sim, decider, t, wf

C = TaskStatus.COMPLETED


def fork(**kw: Any) -> dict[str, Any]:
    return t(
        "fan",
        "FORK_JOIN_DYNAMIC",
        dynamicForkTasksParam="tasks",
        dynamicForkTasksInputParamName="inputs",
        inputParameters={"tasks": "${workflow.input.tasks}", "inputs": {}},
        **kw,
    )


def approval_flow(**fork_kw: Any) -> list[dict[str, Any]]:
    """A dynamic fork, its JOIN, then a HUMAN approval and a step that relies on it."""
    return [
        fork(**fork_kw),
        t("fan_join", "JOIN"),
        t("approve", "HUMAN"),
        t("lodge", inputParameters={"approved": "${approve.output.approved}"}),
    ]


def test_a_forked_task_cannot_stand_in_for_a_later_human_approval() -> None:
    d = decider(*approval_flow())
    sim = Sim(d, {"tasks": [t("approve", "SET_VARIABLE", name="n")]})
    assert sim.status("fan") == TaskStatus.FAILED
    reason = sim.task("fan").reason or ""
    assert "'approve'" in reason and "workflow definition" in reason, reason
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert "lodge" not in sim.state.tasks and sim.actions == {}
    # nothing of the definition was replaced
    assert d.nodes["approve"].task.type == TaskType.HUMAN


@pytest.mark.parametrize(
    ("tasks", "named"),
    [
        ([t("fan", "NOOP", name="n")], "'fan'"),  # the fork's own ref
        ([t("fan_join", "NOOP", name="n")], "'fan_join'"),  # its JOIN's
        ([t("a", "NOOP", name="n"), t("a", "NOOP", name="n")], "'a' is given twice"),
        # nested in a forked container
        (
            [
                t(
                    "sw",
                    "SWITCH",
                    name="n",
                    evaluatorType="value-param",
                    expression="k",
                    decisionCases={"x": [t("approve", "NOOP", name="n")]},
                )
            ],
            "'approve'",
        ),
        (
            [
                t("a", "NOOP", name="n"),
                t(
                    "lp",
                    "DO_WHILE",
                    name="n",
                    loopCondition="false",
                    loopOver=[t("a", "NOOP", name="n")],
                ),
            ],
            "'a'",
        ),
    ],
    ids=["fork-ref", "join-ref", "duplicate", "nested-in-switch", "nested-in-do-while"],
)
def test_a_colliding_forked_reference_fails_the_fork(
    tasks: list[dict[str, Any]], named: str
) -> None:
    d = decider(*approval_flow())
    sim = Sim(d, {"tasks": tasks})
    assert sim.status("fan") == TaskStatus.FAILED
    reason = sim.task("fan").reason or ""
    assert reason.startswith("Tasks could not be dynamically forked") and named in reason, reason
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert d.nodes["fan"].task.type == TaskType.FORK_JOIN_DYNAMIC
    assert d.nodes["fan_join"].task.type == TaskType.JOIN


def test_a_forked_reference_naming_an_iteration_of_a_loop_task_fails_the_fork() -> None:
    # ``x`` runs as ``x__1``, ``x__2`` inside the loop: a forked ``x__1`` would be one of them
    d = decider(
        fork(),
        t("fan_join", "JOIN"),
        t("lp", "DO_WHILE", loopCondition="$.lp['iteration'] < 2", loopOver=[t("x", "NOOP")]),
    )
    sim = Sim(d, {"tasks": [t("x__1", "NOOP", name="n")]})
    assert sim.status("fan") == TaskStatus.FAILED
    assert "'x__1'" in (sim.task("fan").reason or "")
    assert "'x'" in (sim.task("fan").reason or "")


def test_an_optional_fork_that_collides_is_completed_with_errors_and_the_approval_waits() -> None:
    d = decider(*approval_flow(optional=True))
    sim = Sim(d, {"tasks": [t("approve", "SET_VARIABLE", name="n")]})
    assert sim.status("fan") == TaskStatus.COMPLETED_WITH_ERRORS
    assert sim.status("fan_join") == C
    # the HUMAN task is waited on; the run goes on only once it is completed
    assert sim.pending == ["approve"] and sim.status("approve") == TaskStatus.IN_PROGRESS
    sim.complete("approve", approved=True)
    assert sim.actions["lodge"].input == {"approved": True}


def test_a_fork_in_a_loop_makes_the_same_references_every_iteration() -> None:
    """The tasks an earlier instance of the fork made are its own: an iteration (or a
    Decider rebuilt for the run, as every engine process does) forks them again."""
    definition = [
        t(
            "lp",
            "DO_WHILE",
            loopCondition="$.lp['iteration'] < 2",
            loopOver=[fork(), t("fan_join", "JOIN")],
        ),
        t("after", "NOOP"),
    ]
    d = decider(*definition)
    sim = Sim(d, {"tasks": [t("a", name="work"), t("b", "NOOP", name="n")]})
    assert sim.status("fan__1") == C and sim.pending == ["a__1"]
    sim.d = Decider(wf(*definition)).for_run(sim.state)  # a process that replays the run
    sim.complete("a__1")
    assert sim.status("fan__2") == C, sim.task("fan__2").reason
    assert sim.pending == ["a__2"]
    sim.complete("a__2")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_a_dynamic_fork_inside_a_forked_loop_forks_again_every_iteration() -> None:
    """A fork made by a dynamic fork owns what it makes: the inner fork's second
    iteration is not a collision; a ref of the outer fork's making is."""
    inner = t(
        "inner",
        "FORK_JOIN_DYNAMIC",
        dynamicForkTasksParam="tasks",
        dynamicForkTasksInputParamName="inputs",
        inputParameters={"tasks": "${workflow.input.inner}", "inputs": {}},
    )
    loop = t(
        "lp",
        "DO_WHILE",
        name="n",
        loopCondition="$.lp['iteration'] < 2",
        loopOver=[inner, t("inner_join", "JOIN", name="j")],
    )
    d = decider(fork(), t("fan_join", "JOIN"))
    sim = Sim(d, {"tasks": [loop], "inner": [t("leaf", name="work")]})
    assert sim.pending == ["leaf__1"]
    sim.complete("leaf__1")
    assert sim.pending == ["leaf__2"]
    sim.complete("leaf__2")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED

    again = Sim(decider(fork(), t("fan_join", "JOIN")), {"tasks": [loop], "inner": [t("lp")]})
    assert again.status("inner__1") == TaskStatus.FAILED
    assert "'lp'" in (again.task("inner__1").reason or "")
    assert "dynamic fork 'fan'" in (again.task("inner__1").reason or "")


def test_two_dynamic_forks_cannot_make_the_same_reference() -> None:
    second = t(
        "fan2",
        "FORK_JOIN_DYNAMIC",
        dynamicForkTasksParam="tasks",
        dynamicForkTasksInputParamName="inputs",
        inputParameters={"tasks": "${workflow.input.tasks}", "inputs": {}},
    )
    d = decider(fork(), t("fan_join", "JOIN"), second, t("fan2_join", "JOIN"))
    sim = Sim(d, {"tasks": [t("a", "NOOP", name="n")]})
    assert sim.status("fan") == C
    assert sim.status("fan2") == TaskStatus.FAILED
    assert "'a' is a task the dynamic fork 'fan' made" in (sim.task("fan2").reason or "")


# --------------------------------------------------------------- task type names


BAD_NAMES = ["probe_w-high", "a/b", "a b", "-bad-", "a:b", "é", "x" * 1000]


@pytest.mark.parametrize("name", BAD_NAMES, ids=lambda n: n[:12])
def test_a_dynamic_task_name_must_be_a_task_type_name(name: str) -> None:
    d = decider(t("dyn", "DYNAMIC", dynamicTaskNameParam="tn", inputParameters={"tn": name}))
    sim = Sim(d)
    assert sim.status("dyn") == TaskStatus.FAILED
    reason = sim.task("dyn").reason or ""
    assert "tn = " in reason and repr(name[:80]) in reason, reason
    assert "queue name" in reason or "-high" in reason or "characters" in reason, reason
    assert len(reason) < 800
    assert sim.actions == {} and sim.all_actions == []
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED


@pytest.mark.parametrize("name", BAD_NAMES, ids=lambda n: n[:12])
def test_a_forked_worker_task_name_must_be_a_task_type_name(name: str) -> None:
    d = decider(fork(), t("fan_join", "JOIN"))
    sim = Sim(d, {"tasks": [t("ok", name="work"), t("w", "SIMPLE", name=name)]})
    assert sim.status("fan") == TaskStatus.FAILED
    reason = sim.task("fan").reason or ""
    assert "'w'" in reason and repr(name[:80]) in reason, reason
    assert sim.all_actions == []


def test_a_worker_task_nested_in_a_forked_task_must_have_a_task_type_name() -> None:
    d = decider(fork(), t("fan_join", "JOIN"))
    nested = t("lp", "DO_WHILE", name="n", loopCondition="false", loopOver=[t("w", name="a/b")])
    sim = Sim(d, {"tasks": [nested]})
    assert sim.status("fan") == TaskStatus.FAILED
    assert "'a/b'" in (sim.task("fan").reason or "")


def test_the_simple_fork_form_with_a_bad_task_name_fails() -> None:
    d = decider(
        t(
            "fan",
            "FORK_JOIN_DYNAMIC",
            inputParameters={"forkTaskName": "a b", "forkTaskInputs": [1]},
        ),
        t("fan_join", "JOIN"),
    )
    sim = Sim(d)
    assert sim.status("fan") == TaskStatus.FAILED
    assert "'a b'" in (sim.task("fan").reason or "")
