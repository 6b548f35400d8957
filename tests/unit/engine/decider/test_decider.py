"""Unit tests of the Decider: every rule of the workflow language, step by step.

The `Sim` below plays the interpreter: it feeds outcomes back and keeps the actions.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from engine.decider import Decider, Decision, RunResult, RunState, ScheduleTask, TaskOutcome
from engine.decider.state import Deadline, DeadlineKind, TaskChange, TaskState
from engine.language.definitions import RunStatus, TaskDef, TaskStatus, WorkflowDef
from engine.language.scripting import ScriptMemo


def t(ref: str, type: str = "WORKER", **kw: Any) -> dict[str, Any]:
    """A workflow task in Conductor JSON; ``name`` defaults to the ref."""
    return {"name": kw.pop("name", ref), "taskReferenceName": ref, "type": type, **kw}


def wf(*tasks: dict[str, Any], **kw: Any) -> WorkflowDef:
    return WorkflowDef.model_validate({"name": "wf", "tasks": list(tasks), **kw})


def decider(
    *tasks: dict[str, Any], defs: dict[str, dict[str, Any]] | None = None, **kw: Any
) -> Decider:
    definition = wf(*tasks, **kw)
    task_defs = {
        name: TaskDef.model_validate({"name": name, "retryCount": 0, **spec})
        for name, spec in (defs or {}).items()
    }
    return Decider(definition, task_defs)


class Sim:
    def __init__(
        self, d: Decider, input: dict[str, Any] | None = None, now: int = 1_000, **kw: Any
    ) -> None:
        self.d = d
        self.now = now
        self.state: RunState = d.start(workflow_id="wf-1", input=input or {}, now_ms=now, **kw)
        self.actions: dict[str, ScheduleTask] = {}
        self.all_actions: list[ScheduleTask] = []
        self.records: list[TaskChange] = []
        self.cancel: list[str] = []
        self.finished: RunResult | None = None
        self.last: Decision = self.decide()

    def apply(self, decision: Decision) -> Decision:
        self.state = decision.state
        for task_id in decision.cancel:
            for ref, action in list(self.actions.items()):
                if action.task_id == task_id:
                    del self.actions[ref]
        for action in decision.actions:
            self.actions[action.ref] = action
            self.all_actions.append(action)
        self.records.extend(decision.records)
        self.cancel.extend(decision.cancel)
        if decision.finished is not None:
            self.finished = decision.finished
        self.last = decision
        return decision

    def decide(self) -> Decision:
        return self.apply(self.d.decide(self.state, self.now))

    def outcome(
        self,
        ref: str,
        status: TaskStatus = TaskStatus.COMPLETED,
        output: dict[str, Any] | None = None,
        reason: str | None = None,
        *,
        attempt: int | None = None,
        retry_after: float | None = None,
        kind: DeadlineKind | None = None,
        at: int | None = None,
    ) -> Decision:
        action = self.actions[ref]
        if at is not None:
            self.now = at
        self.state = self.d.on_outcome(
            self.state,
            TaskOutcome(
                task_id=action.task_id,
                attempt=action.attempt if attempt is None else attempt,
                status=status,
                output=output or {},
                reason=reason,
                retry_after_seconds=retry_after,
                timeout_kind=kind,
            ),
            self.now,
        )
        if not self.d.is_waiting(self.state, action.task_id):
            self.actions.pop(ref, None)
        return self.decide()

    def complete(self, ref: str, **output: Any) -> Decision:
        return self.outcome(ref, TaskStatus.COMPLETED, output)

    def fail(self, ref: str, reason: str = "boom", **kw: Any) -> Decision:
        return self.outcome(ref, TaskStatus.FAILED, reason=reason, **kw)

    def started(self, ref: str, worker: str = "w1", at: int | None = None) -> None:
        action = self.actions[ref]
        if at is not None:
            self.now = at
        self.state = self.d.on_started(self.state, action.task_id, action.attempt, worker, self.now)

    def task(self, ref: str) -> TaskState:
        return self.state.tasks[ref]

    def status(self, ref: str) -> TaskStatus:
        return self.state.tasks[ref].status

    @property
    def pending(self) -> list[str]:
        return sorted(self.actions)


C = TaskStatus.COMPLETED
F = TaskStatus.FAILED


def roundtrip(state: RunState) -> RunState:
    return RunState.model_validate(json.loads(json.dumps(state.model_dump(mode="json"))))


# ---------------------------------------------------------------------------- sequence


def test_sequence_resolves_inputs_from_workflow_and_earlier_tasks() -> None:
    d = decider(
        t("a", inputParameters={"x": "${workflow.input.x}", "id": "${CPEWF_TASK_ID}"}),
        t("b", inputParameters={"fromA": "${a.output.v}", "status": "${a.status}"}),
    )
    sim = Sim(d, {"x": 7})
    assert sim.pending == ["a"]
    a = sim.actions["a"]
    assert a.input == {"x": 7, "id": a.task_id}
    assert (a.type, a.name, a.attempt, a.delay_seconds, a.message_id) == (
        "WORKER",
        "a",
        1,
        0.0,
        f"{a.task_id}:1",
    )
    sim.complete("a", v=42)
    assert sim.pending == ["b"]
    assert sim.actions["b"].input == {"fromA": 42, "status": "COMPLETED"}
    sim.complete("b", w=1)
    assert sim.finished is not None
    assert sim.finished.status == RunStatus.COMPLETED
    # empty outputParameters: the output of the task that finished last
    assert sim.finished.output == {"w": 1}
    assert sim.state.pending == {}


def test_run_output_from_output_parameters() -> None:
    d = decider(
        t("a"),
        t("b"),
        outputParameters={"first": "${a.output.v}", "in": "${workflow.input.x}"},
    )
    sim = Sim(d, {"x": "hi"})
    sim.complete("a", v=1)
    sim.complete("b", v=2)
    assert sim.finished is not None
    assert sim.finished.output == {"first": 1, "in": "hi"}


def test_task_ids_are_deterministic_and_distinct() -> None:
    """Ids come from the run, its generation and the row's seq: a replay decides the same
    ids, another run or generation (a restart) never reuses one."""
    d = decider(t("a"), t("b"))

    def first(workflow_id: str, generation: str = "") -> str:
        state = d.start(workflow_id=workflow_id, input={}, now_ms=0, generation=generation)
        return d.decide(state, 0).actions[0].task_id

    assert first("w") == first("w")
    assert len({first("w"), first("w2"), first("w", generation="g2")}) == 3
    sim = Sim(d)
    a = sim.actions["a"].task_id
    sim.complete("a")
    assert sim.actions["b"].task_id != a
    assert next(r.seq for r in sim.records if r.ref == "b") == 2


def test_a_retry_is_a_new_row_with_a_new_task_id() -> None:
    """Conductor's DeciderService.retry: the failed attempt keeps its row and status; the
    retry is a new task (new id, next seq, retryCount + 1, retriedTaskId)."""
    d = decider(t("a", retryCount=1))
    sim = Sim(d)
    first = sim.actions["a"]
    sim.fail("a", "once")
    second = sim.actions["a"]
    assert second.task_id != first.task_id
    assert (second.attempt, second.seq, second.retried_task_id) == (2, 2, first.task_id)
    rows = {r.task_id: r for r in sim.records}
    assert rows[first.task_id].status == TaskStatus.FAILED
    assert rows[first.task_id].reason == "once"
    assert (rows[second.task_id].status, rows[second.task_id].seq) == (TaskStatus.SCHEDULED, 2)


def test_a_system_task_starts_when_scheduled_and_a_worker_task_when_polled() -> None:
    """Conductor's WorkflowExecutor.scheduleTask sets the startTime of every system task it
    schedules; a worker task's is set when a worker polls it. A retried system task
    starts again at its own scheduled time (after the retry delay); a DYNAMIC task that
    resolves to a worker type waits for its poll like any worker task."""
    d = decider(
        t("h", "HTTP", inputParameters={"http_request": {"uri": "http://example.test/"}}),
        t("dyn", "DYNAMIC", dynamicTaskNameParam="tn", inputParameters={"tn": "w"}),
        defs={"h": {"retryCount": 1, "retryDelaySeconds": 5}},
    )
    sim = Sim(d, now=1_000)
    assert (sim.task("h").scheduled_time, sim.task("h").start_time) == (1_000, 1_000)
    sim.now = 2_000
    sim.fail("h")
    retry = sim.task("h")
    assert (retry.attempt, retry.scheduled_time, retry.start_time) == (2, 7_000, 7_000)
    sim.outcome("h", at=7_500)
    assert sim.task("h").end_time == 7_500
    assert sim.task("dyn").start_time is None  # queued for a worker of type "w"
    sim.started("dyn", at=8_000)
    assert sim.task("dyn").start_time == 8_000


def test_records_include_inline_tasks() -> None:
    d = decider(t("v", "SET_VARIABLE", inputParameters={"k": 1}), t("a"))
    sim = Sim(d)
    assert [(r.ref, r.status) for r in sim.last.records] == [
        ("v", C),
        ("a", TaskStatus.SCHEDULED),
    ]
    assert sim.last.records[0].workflow_id == "wf-1"


def test_start_delay_becomes_delay_seconds() -> None:
    sim = Sim(decider(t("a", startDelay=30)), now=0)
    assert sim.actions["a"].delay_seconds == 30
    assert sim.task("a").scheduled_time == 30_000


def test_empty_definition_completes_at_once() -> None:
    sim = Sim(decider())
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


# ---------------------------------------------------------------------------- SWITCH


def switch(**kw: Any) -> dict[str, Any]:
    return t(
        "sw",
        "SWITCH",
        decisionCases={"x": [t("in_x")], "y": [], "true": [t("in_true")], "1": [t("in_1")]},
        defaultCase=[t("in_default")],
        **kw,
    )


def test_switch_value_param_picks_case_then_continues() -> None:
    d = decider(
        switch(
            evaluatorType="value-param",
            expression="which",
            inputParameters={"which": "${workflow.input.w}"},
        ),
        t("after"),
    )
    sim = Sim(d, {"w": "x"})
    assert sim.pending == ["in_x"]
    assert sim.status("sw") == C
    assert sim.task("sw").output == {"evaluationResult": ["x"], "selectedCase": "x"}
    sim.complete("in_x")
    assert sim.pending == ["after"]
    assert "in_default" not in sim.state.tasks


def test_switch_default_and_empty_case() -> None:
    kw = dict(
        evaluatorType="value-param", expression="w", inputParameters={"w": "${workflow.input.w}"}
    )
    sim = Sim(decider(switch(**kw), t("after")), {"w": "nope"})
    assert sim.pending == ["in_default"]
    sim.complete("in_default")
    assert sim.pending == ["after"]

    sim = Sim(decider(switch(**kw), t("after")), {"w": "y"})  # empty case: straight on
    assert sim.pending == ["after"]
    assert sim.task("sw").output["evaluationResult"] == ["y"]

    no_default = t("sw", "SWITCH", decisionCases={"x": [t("in_x")]}, **kw)
    sim = Sim(decider(no_default, t("after")), {"w": "other"})  # no case, no default
    assert sim.pending == ["after"]


def test_switch_javascript_and_case_keys() -> None:
    js = switch(
        evaluatorType="javascript",
        expression="$.n > 5",
        inputParameters={"n": "${workflow.input.n}"},
    )
    assert Sim(decider(js), {"n": 9}).pending == ["in_true"]
    assert Sim(decider(js), {"n": 1}).pending == ["in_default"]  # "false" has no case
    number = switch(evaluatorType="javascript", expression="$.n / 2", inputParameters={"n": 2})
    assert Sim(decider(number)).pending == ["in_1"]


def test_a_replay_takes_switch_and_loop_scripts_from_the_deciders_memo() -> None:
    js = switch(
        evaluatorType="javascript",
        expression="$.n > 5",
        inputParameters={"n": "${workflow.input.n}"},
    )
    loop = t(
        "loop",
        "DO_WHILE",
        loopCondition="$.loop.iteration < 2",
        loopOver=[t("body", "SET_VARIABLE", inputParameters={"v": 1})],
    )
    memo = ScriptMemo()
    d = Decider(wf(js, loop), scripts=memo)
    first = Sim(d, {"n": 9})
    assert first.pending == ["in_true"]
    first.complete("in_true")
    assert first.finished is not None
    kept = len(memo)
    assert kept == 3  # the case key and the loop's condition after each iteration
    # a replay of the same run decides the same from the memo: nothing new is kept
    again = Sim(d, {"n": 9})
    again.complete("in_true")
    assert again.finished is not None and len(memo) == kept
    # a Decider of its own (another definition cache) does not share it
    assert Sim(Decider(wf(js)), {"n": 9}).pending == ["in_true"] and len(memo) == kept


def test_switch_legacy_decision() -> None:
    legacy = t(
        "sw",
        "DECISION",
        caseValueParam="p",
        inputParameters={"p": "x"},
        decisionCases={"x": [t("in_x")]},
    )
    assert Sim(decider(legacy)).pending == ["in_x"]
    expr = t(
        "sw",
        "DECISION",
        caseExpression="$.p == 'x' ? 'y' : 'x'",
        inputParameters={"p": "x"},
        decisionCases={"x": [t("in_x")], "y": [t("in_y")]},
    )
    assert Sim(decider(expr)).pending == ["in_y"]


def test_switch_script_error_fails_task_and_run() -> None:
    bad = switch(evaluatorType="javascript", expression="throw new Error('nope')")
    sim = Sim(decider(bad))
    assert sim.status("sw") == F
    assert "nope" in (sim.task("sw").reason or "")
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert sim.finished.failed_reference_task_names == ["sw"]


# ---------------------------------------------------------------------------- FORK / JOIN


def fork(*branches: list[dict[str, Any]], ref: str = "fork") -> dict[str, Any]:
    return t(ref, "FORK_JOIN", forkTasks=list(branches))


def test_fork_join_runs_branches_and_joins_outputs() -> None:
    d = decider(
        fork([t("a1"), t("a2")], [t("b1")], []),
        t("join", "JOIN", joinOn=["a2", "b1"]),
        t("after", inputParameters={"j": "${join.output}"}),
    )
    sim = Sim(d)
    assert sim.pending == ["a1", "b1"]
    assert sim.status("fork") == C
    assert sim.status("join") == TaskStatus.IN_PROGRESS
    sim.complete("b1", v="b")
    sim.complete("a1", v="a1")
    assert sim.pending == ["a2"]
    sim.complete("a2", v="a2")
    assert sim.status("join") == C
    assert sim.task("join").output == {"a2": {"v": "a2"}, "b1": {"v": "b"}}
    assert sim.actions["after"].input == {"j": {"a2": {"v": "a2"}, "b1": {"v": "b"}}}


def test_join_without_join_on_uses_last_task_of_each_branch() -> None:
    d = decider(fork([t("a1"), t("a2")], [t("b1")]), t("join", "JOIN"))
    sim = Sim(d)
    for ref in ("a1", "b1", "a2"):
        sim.complete(ref, r=ref)
    assert sim.task("join").output == {"a2": {"r": "a2"}, "b1": {"r": "b1"}}
    assert sim.finished is not None


def test_join_on_subset_waits_only_for_the_named_tasks() -> None:
    """As Conductor's JOIN: only the joinOn tasks gate it; the run still ends only when
    every task has."""
    d = decider(fork([t("a")], [t("b")]), t("join", "JOIN", joinOn=["a"]), t("after"))
    sim = Sim(d)
    sim.complete("a", x=1)
    assert sim.status("join") == TaskStatus.COMPLETED
    assert sim.task("join").input == {"joinOn": ["a"]}
    assert sim.task("join").output == {"a": {"x": 1}}
    assert sorted(sim.pending) == ["after", "b"]
    sim.complete("after")
    assert sim.finished is None
    sim.complete("b")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_branch_failure_fails_the_run_and_cancels_the_join_and_siblings() -> None:
    d = decider(
        fork([t("a1"), t("a2")], [t("b1")]),
        t("join", "JOIN", joinOn=["a2", "b1"]),
        t("after"),
    )
    sim = Sim(d)
    b1 = sim.actions["b1"].task_id
    sim.fail("a1", "disk full")
    assert sim.finished is not None
    assert sim.finished.status == RunStatus.FAILED
    assert sim.finished.failed_reference_task_names == ["a1"]
    assert sim.finished.failed_task_id == sim.task("a1").task_id
    assert "disk full" in (sim.finished.reason or "")
    assert sim.status("join") == TaskStatus.CANCELED  # as Conductor cancels open tasks
    assert sim.status("b1") == TaskStatus.CANCELED
    assert sim.last.cancel == [b1]
    assert "a2" not in sim.state.tasks and "after" not in sim.state.tasks
    assert sim.state.pending == {}


# ---------------------------------------------------------------------------- DO_WHILE


def loop(body: list[dict[str, Any]], cond: str, **kw: Any) -> dict[str, Any]:
    return t("loop", "DO_WHILE", loopOver=body, loopCondition=cond, **kw)


def test_do_while_iterations_refs_and_output() -> None:
    d = decider(
        loop(
            [t("a", inputParameters={"prev": "${a.output.n}", "it": "${loop.output.iteration}"})],
            "if ($.loop['iteration'] < $.max && $.a.n < 100) { true; } else { false; }",
            inputParameters={"max": "${workflow.input.max}"},
        ),
        t("after", inputParameters={"latest": "${a.output.n}", "first": "${a__1.output.n}"}),
    )
    sim = Sim(d, {"max": 3})
    assert sim.pending == ["a__1"]
    assert sim.actions["a__1"].input == {"prev": None, "it": 1}
    assert sim.status("loop") == TaskStatus.IN_PROGRESS
    sim.complete("a__1", n=10)
    assert sim.pending == ["a__2"]
    assert sim.actions["a__2"].input == {"prev": 10, "it": 2}  # `a` = latest iteration
    assert sim.actions["a__2"].task_id != sim.task("a__1").task_id
    sim.complete("a__2", n=20)
    sim.complete("a__3", n=30)
    assert sim.status("loop") == C
    assert sim.task("loop").output == {
        "iteration": 3,
        "1": {"a": {"n": 10}},
        "2": {"a": {"n": 20}},
        "3": {"a": {"n": 30}},
    }
    assert sim.actions["after"].input == {"latest": 30, "first": 10}
    assert [r.iteration for r in sim.records if r.ref.startswith("a__")][-1] == 3


def test_do_while_condition_sees_body_outputs() -> None:
    d = decider(loop([t("a")], "$.a.more"))
    sim = Sim(d)
    sim.complete("a__1", more=True)
    sim.complete("a__2", more=False)
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
    assert sim.task("loop").output["iteration"] == 2


def test_do_while_runs_once_without_condition_and_fails_on_script_error() -> None:
    sim = Sim(decider(loop([t("a")], "")))
    sim.complete("a__1")
    assert sim.finished is not None and sim.task("loop").output["iteration"] == 1

    sim = Sim(decider(loop([t("a")], "$.nothing.at.all")))
    sim.complete("a__1")
    assert sim.status("loop") == F
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED


def test_do_while_of_inline_scripts_schedules_one_evaluation_per_iteration() -> None:
    d = decider(
        loop(
            [
                t(
                    "i",
                    "INLINE",
                    inputParameters={"expression": "$.n * 2", "n": "${loop.output.iteration}"},
                )
            ],
            "$.loop.iteration < 4",
        )
    )
    sim = Sim(d)
    for n in range(1, 5):
        assert sim.pending == [f"i__{n}"]
        assert sim.actions[f"i__{n}"].input["n"] == n
        sim.complete(f"i__{n}", result=n * 2)
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
    assert sim.task("loop").output["4"] == {"i": {"result": 8}}


def test_a_do_while_fails_when_it_would_run_one_iteration_more_than_the_limit() -> None:
    definition = wf(loop([t("a")], "true"))
    sim = Sim(Decider(definition, max_loop_iterations=3))
    for n in range(1, 4):
        sim.complete(f"a__{n}")
    assert sim.status("loop") == F
    assert sim.task("loop").reason == "DO_WHILE 'loop' reached the limit of 3 iterations"
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert "reached the limit of 3 iterations" in (sim.finished.reason or "")


def test_a_running_loop_records_its_iteration_and_its_whole_output_when_it_ends() -> None:
    sim = Sim(decider(loop([t("a")], "$.loop.iteration < 2")))
    sim.complete("a__1", x=1)
    running = [r for r in sim.records if r.ref == "loop" and not r.status.is_terminal]
    assert running and all(r.output == {"iteration": r.output["iteration"]} for r in running)
    sim.complete("a__2", x=2)
    final = [r for r in sim.records if r.ref == "loop"][-1]
    assert final.status == C
    assert final.output == {"1": {"a": {"x": 1}}, "2": {"a": {"x": 2}}, "iteration": 2}


def test_do_while_that_never_ends_inline_fails_instead_of_hanging() -> None:
    definition = wf(loop([t("v", "SET_VARIABLE", inputParameters={"x": 1})], "true"))
    sim = Sim(Decider(definition, max_inline_steps=200))
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert "DO_WHILE" in (sim.finished.reason or "")


def test_nested_do_while_suffixes_compose() -> None:
    inner = t("inner", "DO_WHILE", loopOver=[t("x")], loopCondition="$.inner.iteration < 2")
    d = decider(loop([inner], "$.loop.iteration < 2"))
    sim = Sim(d)
    assert sim.pending == ["x__1__1"]
    sim.complete("x__1__1")
    sim.complete("x__1__2")
    assert sim.pending == ["x__2__1"]
    sim.complete("x__2__1")
    sim.complete("x__2__2")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
    assert sim.status("inner__1") == C and sim.status("inner__2") == C


# ---------------------------------------------------------------------------- inline types


def test_set_variable_merges_into_variables() -> None:
    d = decider(
        t("v1", "SET_VARIABLE", inputParameters={"a": 1, "b": "${workflow.input.b}"}),
        t("v2", "SET_VARIABLE", inputParameters={"a": 2}),
        t("use", inputParameters={"a": "${workflow.variables.a}", "b": "${workflow.variables.b}"}),
        variables={"keep": True},
    )
    sim = Sim(d, {"b": "B"})
    assert sim.state.variables == {"keep": True, "a": 2, "b": "B"}
    assert sim.actions["use"].input == {"a": 2, "b": "B"}


def test_inline_and_jq_are_scheduled_with_their_resolved_inputs() -> None:
    d = decider(
        t(
            "i",
            "INLINE",
            inputParameters={"evaluatorType": "javascript", "expression": "$.x + 1", "x": 1},
        ),
        t(
            "q",
            "JSON_JQ_TRANSFORM",
            inputParameters={"queryExpression": ".v[]", "v": "${i.output.result}"},
        ),
    )
    sim = Sim(d)
    assert sim.pending == ["i"]
    assert sim.actions["i"].type == "INLINE"
    assert sim.actions["i"].input == {
        "evaluatorType": "javascript",
        "expression": "$.x + 1",
        "x": 1,
    }
    sim.complete("i", result=[1, 2])
    assert sim.actions["q"].input == {"queryExpression": ".v[]", "v": [1, 2]}
    sim.complete("q", result=1, resultList=[1, 2])
    assert sim.finished is not None and sim.finished.output == {"result": 1, "resultList": [1, 2]}


def test_a_failed_optional_inline_task_lets_the_run_continue() -> None:
    d = decider(
        t("i", "INLINE", optional=True, inputParameters={"expression": "undefinedThing.x"}),
        t("after"),
    )
    sim = Sim(d)
    sim.fail("i", "ReferenceError: undefinedThing is not defined")
    assert sim.status("i") == TaskStatus.COMPLETED_WITH_ERRORS
    assert "undefinedThing" in (sim.task("i").reason or "")
    assert sim.pending == ["after"]


# ---------------------------------------------------------------------------- TERMINATE


def test_terminate_completed_with_workflow_output() -> None:
    d = decider(
        t("a"),
        t(
            "end",
            "TERMINATE",
            inputParameters={
                "terminationStatus": "COMPLETED",
                "terminationReason": "done early",
                "workflowOutput": {"v": "${a.output.v}"},
            },
        ),
        t("never"),
    )
    sim = Sim(d)
    sim.complete("a", v=5)
    assert sim.finished is not None
    assert (sim.finished.status, sim.finished.output, sim.finished.reason) == (
        RunStatus.COMPLETED,
        {"v": 5},
        "done early",
    )
    assert "never" not in sim.state.tasks


def test_terminate_without_output_leaves_the_run_output_empty() -> None:
    """As Conductor: a TERMINATE's output (here none) is the run's; outputParameters are
    not evaluated, and the reason names the TERMINATE task."""
    d = decider(
        t("a"),
        t("end", "TERMINATE", inputParameters={"terminationStatus": "FAILED"}),
        outputParameters={"x": "${a.output.x}"},
    )
    sim = Sim(d)
    sim.complete("a", x=1)
    assert sim.finished is not None
    assert sim.finished.status == RunStatus.FAILED and sim.finished.output == {}
    end = sim.task("end").task_id
    assert sim.finished.failed_task_id == end
    assert sim.finished.reason == f"Workflow is FAILED by TERMINATE task: {end}"


def test_terminate_output_is_the_workflow_output_map_or_wraps_a_value() -> None:
    for value, expected in (({"y": 2}, {"y": 2}), ("done", {"output": "done"})):
        d = decider(
            t(
                "end",
                "TERMINATE",
                inputParameters={"terminationStatus": "COMPLETED", "workflowOutput": value},
            ),
            outputParameters={"x": 1},
        )
        sim = Sim(d)
        assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
        assert sim.finished.output == expected == sim.task("end").output


def _nested_fork() -> Decider:
    switch = t(
        "sw",
        "SWITCH",
        evaluatorType="value-param",
        expression="v",
        inputParameters={"v": "x"},
        decisionCases={"x": [t("case_x")]},
    )
    inner = t("inner", "FORK_JOIN", forkTasks=[[t("a")], [t("b")]])
    return decider(
        t("outer", "FORK_JOIN", forkTasks=[[inner, t("inner_join", "JOIN")], [switch], [t("c")]]),
        t("outer_join", "JOIN"),
    )


def test_rows_of_a_nested_fork_come_in_conductors_order() -> None:
    """ForkJoinTaskMapper maps [fork, each branch's first tasks, join], recursively, and
    SwitchTaskMapper the chosen case's first task with the SWITCH (behaviour 2)."""
    sim = Sim(_nested_fork())
    rows = sorted({r.ref: r.seq for r in sim.records}.items(), key=lambda item: item[1])
    assert [ref for ref, _ in rows] == [
        "outer",
        "inner",
        "a",
        "b",
        "inner_join",
        "sw",
        "case_x",
        "c",
        "outer_join",
    ]


def test_runs_started_before_behaviour_2_keep_their_row_order() -> None:
    sim = Sim(_nested_fork(), behaviour=1)
    rows = sorted({r.ref: r.seq for r in sim.records}.items(), key=lambda item: item[1])
    assert [ref for ref, _ in rows] == [
        "outer",
        "inner",
        "a",
        "b",
        "sw",
        "c",
        "outer_join",
        "inner_join",
        "case_x",
    ]


def test_terminate_inside_fork_cancels_other_branches() -> None:
    d = decider(
        fork(
            [t("a"), t("end", "TERMINATE", inputParameters={"terminationStatus": "TERMINATED"})],
            [t("b")],
        ),
        t("join", "JOIN"),
    )
    sim = Sim(d)
    b = sim.actions["b"].task_id
    sim.complete("a")
    assert sim.finished is not None and sim.finished.status == RunStatus.TERMINATED
    assert sim.last.cancel == [b]
    assert sim.status("b") == TaskStatus.CANCELED
    assert sim.status("join") == TaskStatus.CANCELED
    assert sim.state.pending == {} and sim.state.frames == {}


def test_terminate_bad_status_fails_task() -> None:
    sim = Sim(decider(t("end", "TERMINATE", inputParameters={"terminationStatus": "MAYBE"})))
    assert sim.status("end") == F
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED


# ---------------------------------------------------------------------------- failures, retries


def test_optional_failure_completes_with_errors() -> None:
    d = decider(t("a", optional=True), t("b", inputParameters={"s": "${a.status}"}))
    sim = Sim(d)
    sim.fail("a", "meh")
    assert sim.status("a") == TaskStatus.COMPLETED_WITH_ERRORS
    assert sim.task("a").reason == "meh"
    assert sim.actions["b"].input == {"s": "COMPLETED_WITH_ERRORS"}
    sim.complete("b")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_exhausted_failure_fails_run() -> None:
    d = decider(t("a"), t("b"), defs={"a": {"retryCount": 1, "retryDelaySeconds": 0}})
    sim = Sim(d)
    sim.fail("a", "once")
    assert sim.actions["a"].attempt == 2
    sim.fail("a", "twice")
    assert sim.finished is not None
    assert sim.finished.status == RunStatus.FAILED
    assert sim.finished.failed_reference_task_names == ["a"]
    assert "twice" in (sim.finished.reason or "")
    assert sim.status("a") == F


def retry_delays(logic: str, n: int, **extra: Any) -> list[float]:
    d = decider(
        t("a"),
        defs={"a": {"retryCount": n, "retryLogic": logic, "retryDelaySeconds": 10, **extra}},
    )
    sim = Sim(d)
    delays = []
    for _ in range(n):
        sim.fail("a")
        delays.append(sim.actions["a"].delay_seconds)
    assert [a.attempt for a in sim.all_actions] == list(range(1, n + 2))
    return delays


def test_retry_logic_delays() -> None:
    assert retry_delays("FIXED", 3) == [10, 10, 10]
    assert retry_delays("LINEAR_BACKOFF", 3, backoffScaleFactor=2) == [20, 40, 60]
    assert retry_delays("EXPONENTIAL_BACKOFF", 4) == [10, 20, 40, 80]


def test_max_retry_delay_caps_the_backoff_as_conductor() -> None:
    """conductor-oss's maxRetryDelaySeconds: 'exponential backoff starting at 1 s and
    capped at 600 s will back off as 1, 2, 4, 8, ..., 600, 600' (TaskDef); 0 = no cap."""
    assert retry_delays("EXPONENTIAL_BACKOFF", 5, maxRetryDelaySeconds=30) == [10, 20, 30, 30, 30]
    assert retry_delays("LINEAR_BACKOFF", 3, maxRetryDelaySeconds=25) == [10, 20, 25]
    assert retry_delays("FIXED", 2, maxRetryDelaySeconds=5) == [5, 5]
    assert retry_delays("EXPONENTIAL_BACKOFF", 3, maxRetryDelaySeconds=0) == [10, 20, 40]


def test_backoff_jitter_adds_up_to_its_milliseconds_the_same_on_every_replay() -> None:
    """conductor-oss's backoffJitterMs adds 0..N ms to a retry's delay. The Decider
    decides again on replays, so the jitter comes from the attempt, not a draw: the same
    run gives the same delays, and attempts (and tasks) get different ones."""
    first = retry_delays("FIXED", 6, backoffJitterMs=500)
    assert all(10 <= delay <= 10.5 for delay in first), first
    assert len(set(first)) > 1, first  # spread, not one constant offset
    assert retry_delays("FIXED", 6, backoffJitterMs=500) == first
    assert retry_delays("FIXED", 2, backoffJitterMs=0) == [10, 10]


def test_a_retrys_callback_after_seconds_is_its_delay_without_the_jitter() -> None:
    """Conductor's DeciderService.retry: callbackAfterSeconds is the capped delay, the
    jitter only in when the retry is due; a start delay is a first attempt's."""
    d = decider(
        t("a", startDelay=3),
        defs={
            "a": {
                "retryCount": 2,
                "retryLogic": "EXPONENTIAL_BACKOFF",
                "retryDelaySeconds": 4,
                "maxRetryDelaySeconds": 6,
                "backoffJitterMs": 5000,
            }
        },
    )
    sim = Sim(d, now=0)
    assert (sim.actions["a"].callback_after_seconds, sim.task("a").callback_after_seconds) == (3, 3)
    for base in (4, 6):
        sim.fail("a")
        action = sim.actions["a"]
        assert action.callback_after_seconds == base
        assert base <= action.delay_seconds <= base + 5
        [row] = [r for r in sim.last.records if r.task_id == action.task_id]
        assert row.callback_after_seconds == base


def test_a_waits_callback_after_seconds_is_its_wait() -> None:
    """Conductor's WaitTaskMapper: the duration (or the time until ``until``) in seconds;
    a WAIT for a signal, Integer.MAX_VALUE."""
    d = decider(
        t("timed", "WAIT", inputParameters={"duration": "30 seconds"}),
        t("signal", "WAIT"),
    )
    sim = Sim(d, now=0)
    assert sim.task("timed").callback_after_seconds == 30
    sim.outcome("timed", at=30_000)
    assert sim.task("signal").callback_after_seconds == 2**31 - 1


def test_a_servers_retry_after_is_not_cut_by_the_cap() -> None:
    d = decider(
        t("a"), defs={"a": {"retryCount": 1, "retryDelaySeconds": 10, "maxRetryDelaySeconds": 5}}
    )
    sim = Sim(d, now=0)
    sim.fail("a", retry_after=120)
    assert sim.actions["a"].delay_seconds == 120


def test_retry_after_wins_when_larger() -> None:
    d = decider(t("a"), defs={"a": {"retryCount": 2, "retryDelaySeconds": 10}})
    sim = Sim(d, now=0)
    first = sim.actions["a"].task_id
    sim.fail("a", retry_after=120)
    assert sim.actions["a"].delay_seconds == 120
    assert sim.actions["a"].retried_task_id == first
    assert sim.task("a").scheduled_time == 120_000
    sim.fail("a", retry_after=1)
    assert sim.actions["a"].delay_seconds == 10


def test_workflow_task_retry_count_overrides_task_def() -> None:
    d = decider(t("a", retryCount=0), defs={"a": {"retryCount": 5}})
    sim = Sim(d)
    sim.fail("a")
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    d = decider(t("a", "HTTP", retryCount=1))  # no task def: 0 unless set
    sim = Sim(d)
    sim.fail("a")
    assert sim.actions["a"].attempt == 2


def test_wait_human_sub_workflow_do_not_retry_by_default() -> None:
    for task in (
        t("w", "WAIT"),
        t("h", "HUMAN"),
        t("s", "SUB_WORKFLOW", subWorkflowParam={"name": "child", "version": 2}),
    ):
        sim = Sim(decider(task))
        sim.fail(task["taskReferenceName"])
        assert sim.finished is not None and sim.finished.status == RunStatus.FAILED


def test_terminal_error_never_retries() -> None:
    d = decider(t("a"), defs={"a": {"retryCount": 3}})
    sim = Sim(d)
    sim.outcome("a", TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason="bad request")
    assert sim.status("a") == TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert len(sim.all_actions) == 1


def test_failure_awaiting_retry_is_canceled_when_run_ends() -> None:
    d = decider(fork([t("a")], [t("b")]), t("join", "JOIN"), defs={"a": {"retryCount": 1}, "b": {}})
    sim = Sim(d)
    a = sim.actions["a"].task_id
    sim.state = d.on_outcome(sim.state, TaskOutcome(task_id=a, attempt=1, status=F), sim.now)
    sim.actions.pop("a")
    sim.fail("b")  # before the retry of `a` was dispatched
    assert sim.finished is not None
    assert sim.status("a") == TaskStatus.CANCELED
    assert a in sim.last.cancel
    assert [x.ref for x in sim.all_actions].count("a") == 1


# ---------------------------------------------------------------------------- timeouts


WORKER_DEF = {
    "retryCount": 1,
    "retryDelaySeconds": 0,
    "pollTimeoutSeconds": 60,
    "responseTimeoutSeconds": 30,
    "timeoutSeconds": 300,
    "totalTimeoutSeconds": 1000,
}


def test_deadlines_of_a_worker_wait() -> None:
    d = decider(t("a"), defs={"a": WORKER_DEF})
    sim = Sim(d, now=0)
    a = sim.actions["a"].task_id
    assert d.wait_deadline(sim.state, a) == Deadline(at_ms=60_000, kind="poll")
    sim.started("a", at=50_000)
    assert sim.task("a").status == TaskStatus.IN_PROGRESS
    assert sim.task("a").worker_id == "w1"
    assert d.wait_deadline(sim.state, a) == Deadline(at_ms=80_000, kind="response")
    sim.started("a", at=280_000)  # handed out again after a callback
    assert d.wait_deadline(sim.state, a) == Deadline(at_ms=300_000, kind="task")
    sim.fail("a", at=900_000)  # retry at 900 s: total deadline comes first
    sim.started("a", at=990_000)
    retry = sim.actions["a"].task_id
    assert d.wait_deadline(sim.state, retry) == Deadline(at_ms=1_000_000, kind="total")
    assert d.wait_deadline(sim.state, "unknown") is None


def test_a_later_response_reference_moves_the_deadline_not_the_start() -> None:
    """A check that finds the worker's lease extended (or the attempt waiting out a
    callback) moves the response deadline; ``${a.startTime}`` stays the hand-out."""
    d = decider(t("a"), t("b", inputParameters={"s": "${a.startTime}"}), defs={"a": WORKER_DEF})
    sim = Sim(d, now=0)
    a = sim.actions["a"]
    sim.started("a", at=50_000)
    sim.state = d.on_started(sim.state, a.task_id, a.attempt, "w1", 50_000, response_from=200_000)
    assert d.wait_deadline(sim.state, a.task_id) == Deadline(at_ms=230_000, kind="response")
    assert roundtrip(sim.state).tasks["a"].response_from == 200_000
    sim.started("a", at=260_000)  # handed out again: the response runs from then
    assert d.wait_deadline(sim.state, a.task_id) == Deadline(at_ms=290_000, kind="response")
    sim.state = d.on_started(sim.state, a.task_id, a.attempt, "w1", 260_000, response_from=265_000)
    sim.complete("a")
    assert sim.actions["b"].input == {"s": 260_000}


def test_poll_timeout_unset_and_human_deadline() -> None:
    d = decider(t("a"), defs={"a": {"responseTimeoutSeconds": 5}})
    sim = Sim(d, now=0)
    assert d.wait_deadline(sim.state, sim.actions["a"].task_id) is None

    d = decider(t("h", "HUMAN", inputParameters={"timeoutSeconds": 3600}))
    sim = Sim(d, now=0)
    assert sim.actions["h"].timeout_seconds == 3600
    assert d.wait_deadline(sim.state, sim.actions["h"].task_id) == Deadline(
        at_ms=3_600_000, kind="human"
    )
    sim.outcome("h", TaskStatus.TIMED_OUT, at=3_600_000)
    assert sim.status("h") == TaskStatus.TIMED_OUT
    assert sim.finished is not None and sim.finished.status == RunStatus.TIMED_OUT


def test_timeout_policy_retry() -> None:
    d = decider(t("a"), defs={"a": {**WORKER_DEF, "timeoutPolicy": "RETRY"}})
    sim = Sim(d, now=0)
    sim.outcome("a", TaskStatus.TIMED_OUT, at=60_000)  # poll timeout
    assert sim.actions["a"].attempt == 2
    assert sim.task("a").status == TaskStatus.SCHEDULED
    sim.outcome("a", TaskStatus.TIMED_OUT, at=120_000)
    assert sim.status("a") == TaskStatus.TIMED_OUT
    # no retry left: the run times out (Conductor's DeciderService.retry)
    assert sim.finished is not None and sim.finished.status == RunStatus.TIMED_OUT
    assert sim.task("a").reason == (
        "Task poll timed out after 60 seconds. Poll timeout configured as 60 seconds. "
        "Timeout policy configured to RETRY"
    )


@pytest.mark.parametrize("policy", ["RETRY", "TIME_OUT_WF", "ALERT_ONLY"])
def test_a_response_timeout_retries_the_attempt_under_every_policy(policy: str) -> None:
    """Conductor times an attempt without response out whatever ``timeoutPolicy`` says
    (it governs ``timeoutSeconds``) and retries it per ``retryCount``; with none left the
    run is TIMED_OUT."""
    d = decider(t("a"), defs={"a": {**WORKER_DEF, "timeoutPolicy": policy}})
    sim = Sim(d, now=0)
    sim.started("a", at=10_000)
    first = sim.actions["a"].task_id
    sim.outcome("a", TaskStatus.TIMED_OUT, kind="response", at=40_000)
    retry = sim.actions["a"]
    assert (retry.attempt, retry.retried_task_id) == (2, first)
    assert sim.finished is None
    rows = {r.task_id: r for r in sim.records}
    assert rows[first].status == TaskStatus.TIMED_OUT
    assert rows[first].reason == (
        f"responseTimeout: 30 exceeded for the taskId: {first} with Task Definition: a"
    )
    sim.started("a", at=50_000)
    sim.outcome("a", TaskStatus.TIMED_OUT, kind="response", at=80_000)
    assert sim.finished is not None and sim.finished.status == RunStatus.TIMED_OUT


def test_timeout_policy_time_out_wf_even_when_optional() -> None:
    d = decider(t("a", optional=True), defs={"a": {**WORKER_DEF, "timeoutPolicy": "TIME_OUT_WF"}})
    sim = Sim(d, now=0)
    sim.outcome("a", TaskStatus.TIMED_OUT, at=60_000)
    assert sim.finished is not None and sim.finished.status == RunStatus.TIMED_OUT
    assert sim.status("a") == TaskStatus.TIMED_OUT
    assert len(sim.all_actions) == 1


def test_timeout_policy_alert_only_keeps_waiting() -> None:
    d = decider(t("a"), defs={"a": {**WORKER_DEF, "timeoutPolicy": "ALERT_ONLY"}})
    sim = Sim(d, now=0)
    a = sim.actions["a"].task_id
    sim.outcome("a", TaskStatus.TIMED_OUT, at=60_000)
    assert sim.finished is None
    assert d.is_waiting(sim.state, a)
    assert sim.status("a") == TaskStatus.SCHEDULED
    assert any("poll timeout" in w for w in sim.state.warnings)
    # the poll deadline is not reported again; the next one is the task timeout
    assert d.wait_deadline(sim.state, a) == Deadline(at_ms=300_000, kind="task")
    sim.complete("a", ok=1)
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_total_timeout_ends_retries() -> None:
    d = decider(t("a"), defs={"a": {**WORKER_DEF, "retryCount": 5, "timeoutPolicy": "RETRY"}})
    sim = Sim(d, now=0)
    sim.outcome("a", TaskStatus.TIMED_OUT, kind="total", at=1_000_000)
    assert sim.finished is not None and sim.finished.status == RunStatus.TIMED_OUT
    assert len(sim.all_actions) == 1
    # a retry delay that would pass the total timeout is not made either
    d = decider(
        t("a"), defs={"a": {"retryCount": 5, "retryDelaySeconds": 100, "totalTimeoutSeconds": 50}}
    )
    sim = Sim(d, now=0)
    sim.fail("a", at=1_000)
    assert sim.finished is not None and sim.status("a") == TaskStatus.TIMED_OUT


def test_workflow_timeout_policies() -> None:
    d = decider(t("a"), t("b"), timeoutSeconds=10, timeoutPolicy="TIME_OUT_WF")
    sim = Sim(d, now=0)
    assert d.workflow_deadline_ms(sim.state) == 10_000
    a = sim.actions["a"].task_id
    decision = sim.apply(d.on_workflow_timeout(sim.state, 10_000))
    assert decision.finished is not None and decision.finished.status == RunStatus.TIMED_OUT
    assert decision.cancel == [a]
    assert sim.status("a") == TaskStatus.CANCELED

    d = decider(t("a"), timeoutSeconds=10, timeoutPolicy="ALERT_ONLY")
    sim = Sim(d, now=0)
    decision = sim.apply(d.on_workflow_timeout(sim.state, 10_000))
    assert decision.finished is None and decision.cancel == []
    assert sim.state.timeout_alerted and sim.state.warnings
    sim.complete("a")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_external_terminate_cancels_pending() -> None:
    d = decider(fork([t("a")], [t("b")]), t("join", "JOIN"))
    sim = Sim(d)
    ids = sorted(a.task_id for a in sim.actions.values())
    decision = sim.apply(d.terminate(sim.state, "operator said so", sim.now))
    assert decision.finished is not None
    assert (decision.finished.status, decision.finished.reason) == (
        RunStatus.TERMINATED,
        "operator said so",
    )
    assert sorted(decision.cancel) == ids
    assert d.terminate(sim.state, "again", sim.now).cancel == []


def test_a_defect_fails_the_run_and_cancels_pending() -> None:
    d = decider(fork([t("a")], [t("b")]), t("join", "JOIN"))
    sim = Sim(d)
    ids = sorted(a.task_id for a in sim.actions.values())
    decision = sim.apply(d.fail(sim.state, "interpreter error: E: x", sim.now))
    assert decision.finished is not None
    assert (decision.finished.status, decision.finished.reason) == (
        RunStatus.FAILED,
        "interpreter error: E: x",
    )
    assert sorted(decision.cancel) == ids
    # Conductor's status for the open tasks of a run that ended FAILED
    assert {r.ref: r.status for r in decision.records} == {
        "a": TaskStatus.CANCELED,
        "b": TaskStatus.CANCELED,
        "join": TaskStatus.CANCELED,
    }
    # a run that had ended already: FAILED with the defect's reason, nothing more to end
    again = d.fail(sim.state, "interpreter error: E: y", sim.now)
    assert again.cancel == [] and again.records == []
    assert again.finished is not None and again.finished.reason == "interpreter error: E: y"


# ---------------------------------------------------------------------------- WAIT, SUB_WORKFLOW


def test_wait_actions() -> None:
    d = decider(
        t("w1", "WAIT", inputParameters={"duration": "1h 5m"}),
        t("w2", "WAIT", inputParameters={"until": "2030-01-02 03:04"}),
        t("w3", "WAIT"),
    )
    sim = Sim(d, now=1_000)
    assert sim.actions["w1"].wait_until_ms == 1_000 + 3_900_000
    sim.complete("w1")
    assert sim.actions["w2"].wait_until_ms == 1_893_553_440_000
    sim.complete("w2")
    assert sim.actions["w3"].wait_until_ms is None
    assert sim.actions["w3"].type == "WAIT"


def test_wait_with_bad_duration_fails() -> None:
    sim = Sim(decider(t("w", "WAIT", inputParameters={"duration": "soon"})))
    assert sim.status("w") == F and "duration" in (sim.task("w").reason or "")


@pytest.mark.parametrize(
    ("params", "value"),
    [
        ({"duration": "${workflow.input.d}"}, "99999999999d"),
        ({"duration": "${workflow.input.d}"}, 10**30),
        ({"until": "${workflow.input.d}"}, "9999-12-31T23:59:59-14:00"),
        ({"until": "${workflow.input.d}"}, "2200-01-01T00:00:00Z"),
    ],
)
def test_wait_past_the_bound_fails_the_task_not_the_run(params: dict[str, Any], value: Any) -> None:
    """An expression giving a WAIT past 100 years fails the WAIT with the value and the
    limit; it used to be scheduled, then crashed the run arming its timer (year out of
    range). The task row is there, FAILED, and the run goes on to fail as a task fails."""
    sim = Sim(decider(t("w", "WAIT", inputParameters=params)), input={"d": value})
    reason = sim.task("w").reason or ""
    assert sim.status("w") == F, reason
    assert "w" not in sim.actions
    assert "36500 days (100 years)" in reason and str(value)[:12] in reason


def test_wait_at_the_bound_is_armed() -> None:
    sim = Sim(decider(t("w", "WAIT", inputParameters={"duration": "36500d"})), now=1_000)
    assert sim.actions["w"].wait_until_ms == 1_000 + 36_500 * 86_400_000


def test_human_timeout_past_the_bound_fails_the_task() -> None:
    """A HUMAN ``timeoutSeconds`` past 100 years (a deadline past datetime's range) fails
    the task instead of the run; an infinite one is no timeout (as any unreadable one)."""
    sim = Sim(decider(t("h", "HUMAN", inputParameters={"timeoutSeconds": 10**15})))
    assert sim.status("h") == F
    assert "at most 3153600000 seconds" in (sim.task("h").reason or "")
    sim = Sim(decider(t("h", "HUMAN", inputParameters={"timeoutSeconds": float("inf")})))
    assert sim.actions["h"].timeout_seconds is None


def test_sub_workflow_and_activity_actions() -> None:
    d = decider(
        t(
            "s",
            "SUB_WORKFLOW",
            subWorkflowParam={"name": "child", "version": 3},
            inputParameters={"k": 1},
        ),
        t("h", "HTTP", inputParameters={"http_request": {"uri": "https://x"}}),
        defs={"HTTP_x": {}},
    )
    sim = Sim(d)
    action = sim.actions["s"]
    assert action.sub_workflow is not None
    assert (action.sub_workflow.name, action.sub_workflow.version, action.input) == (
        "child",
        3,
        {"k": 1},
    )
    sim.complete("s")
    assert sim.actions["h"].type == "HTTP"
    dumped = sim.actions["h"].model_dump(mode="json", by_alias=True)
    assert dumped["taskId"] and dumped["kind"] == "schedule_task"


def test_sub_workflow_without_params_fails() -> None:
    sim = Sim(decider(t("s", "SUB_WORKFLOW")))
    assert sim.status("s") == F


# ---------------------------------------------------------------------------- stale outcomes


def test_stale_and_duplicate_outcomes_are_ignored() -> None:
    d = decider(t("a"), t("b"), defs={"a": {"retryCount": 1}})
    sim = Sim(d)
    a = sim.actions["a"]
    sim.fail("a")
    before = sim.state.model_dump(mode="json")
    for outcome in (
        TaskOutcome(task_id=a.task_id, attempt=1, status=C),  # stale attempt
        TaskOutcome(task_id="nope", attempt=1, status=C),  # unknown task
        TaskOutcome(task_id=a.task_id, attempt=2, status=TaskStatus.IN_PROGRESS),
    ):
        assert d.on_outcome(sim.state, outcome, sim.now).model_dump(mode="json") == before
    assert d.on_started(sim.state, a.task_id, 1, "w", sim.now).model_dump(mode="json") == before
    sim.complete("a")
    after = sim.state.model_dump(mode="json")
    dup = TaskOutcome(task_id=a.task_id, attempt=2, status=F)
    assert d.on_outcome(sim.state, dup, sim.now).model_dump(mode="json") == after
    assert d.decide(sim.state, sim.now).actions == []
    sim.complete("b")
    done = sim.state.model_dump(mode="json")
    assert d.on_outcome(sim.state, dup, sim.now).model_dump(mode="json") == done
    assert d.decide(sim.state, sim.now).finished is not None


# ---------------------------------------------------------------------------- serialization


def test_state_json_roundtrip_mid_run_then_continue() -> None:
    body = [
        fork([t("a")], [t("b")], ref="f"),
        t("j", "JOIN"),
        t("v", "SET_VARIABLE", inputParameters={"n": "${loop.output.iteration}"}),
    ]
    d = decider(
        loop(body, "$.loop.iteration < 2"),
        t("after", inputParameters={"a": "${a.output.x}", "n": "${workflow.variables.n}"}),
    )
    sim = Sim(d)
    sim.complete("a__1", x=1)
    sim.state = roundtrip(sim.state)  # mid-fork, mid-loop
    sim.complete("b__1")
    assert sim.pending == ["a__2", "b__2"]
    sim.state = roundtrip(sim.state)
    sim.complete("b__2")
    sim.state = roundtrip(sim.state)
    sim.complete("a__2", x=2)
    assert sim.actions["after"].input == {"a": 2, "n": 2}
    dumped = sim.state.model_dump(mode="json")
    aliased = sim.state.model_dump(mode="json", by_alias=True)
    assert RunState.model_validate(aliased).model_dump(mode="json") == dumped
    sim.complete("after")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_state_copy_does_not_share_the_context_cache() -> None:
    d = decider(t("a"), t("b", inputParameters={"x": "${a.output.x}"}))
    sim = Sim(d)
    copy = sim.state.model_copy(deep=True)
    sim.complete("a", x=1)
    other = d.on_outcome(
        copy,
        TaskOutcome(task_id=sim.state.tasks["a"].task_id, attempt=1, status=C, output={"x": 2}),
        0,
    )
    assert d.decide(other, 0).actions[0].input == {"x": 2}
    assert sim.actions["b"].input == {"x": 1}


# ---------------------------------------------------------------------------- performance


def test_long_sequence_cost_per_step_is_flat() -> None:
    n = 1500
    d = decider(
        *[
            t(f"s{i}", inputParameters={"p": f"${{s{i - 1}.output.v}}" if i else 0})
            for i in range(n)
        ]
    )
    state = d.start(workflow_id="w", input={}, now_ms=0)
    decision = d.decide(state, 0)
    times: list[float] = []
    for i in range(n):
        action = decision.actions[0]
        assert action.input == {"p": i - 1 if i else 0}
        begin = time.perf_counter()
        state = d.on_outcome(
            state, TaskOutcome(task_id=action.task_id, attempt=1, status=C, output={"v": i}), i
        )
        decision = d.decide(state, i)
        times.append(time.perf_counter() - begin)
    assert decision.finished is not None
    early = sorted(times[100:300])[100]
    late = sorted(times[-200:])[100]
    assert late < early * 3, (early, late)


def test_terminate_in_one_branch_drops_actions_scheduled_in_the_same_step() -> None:
    d = decider(
        fork([t("b")], [t("end", "TERMINATE", inputParameters={"terminationStatus": "COMPLETED"})]),
        t("join", "JOIN"),
    )
    sim = Sim(d)
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
    assert sim.last.actions == [] and sim.last.cancel == []
    assert sim.status("b") == TaskStatus.CANCELED


def test_alert_only_duplicate_timeout_is_ignored() -> None:
    d = decider(t("a"), defs={"a": {"timeoutSeconds": 10, "timeoutPolicy": "ALERT_ONLY"}})
    sim = Sim(d, now=0)
    sim.outcome("a", TaskStatus.TIMED_OUT, at=10_000)
    before = sim.state.model_dump(mode="json")
    sim.outcome("a", TaskStatus.TIMED_OUT, at=11_000)
    assert sim.state.model_dump(mode="json") == before
    assert len(sim.state.warnings) == 1


# ---------------------------------------------------------------------------- Conductor's suite
# The language-level scenarios of Conductor's integration tests, as hand-written definitions.


def test_conductor_linear_workflow_with_expressions() -> None:
    d = decider(
        t(
            "t1",
            inputParameters={"p1": "${workflow.input.param1}", "p2": "${workflow.input.param2}"},
        ),
        t(
            "t2",
            inputParameters={
                "tp1": "${workflow.input.param1}",
                "tp2": "${t1.output.op}",
                "text": "id=${workflow.workflowId} corr=${workflow.correlationId}",
            },
        ),
        outputParameters={
            "o1": "${workflow.input.param1}",
            "o2": "${t2.output.uuid}",
            "o3": "${t1.output.op}",
        },
    )
    sim = Sim(d, {"param1": "p1 value", "param2": "p2 value"}, correlation_id="corr-1")
    assert sim.actions["t1"].input == {"p1": "p1 value", "p2": "p2 value"}
    sim.complete("t1", op="task1.done")
    assert sim.actions["t2"].input == {
        "tp1": "p1 value",
        "tp2": "task1.done",
        "text": "id=wf-1 corr=corr-1",
    }
    sim.complete("t2", uuid="u-1")
    assert sim.finished is not None
    assert sim.finished.output == {"o1": "p1 value", "o2": "u-1", "o3": "task1.done"}
    assert [r.status for r in sim.records if r.ref == "t2"][-1] == C


def conductor_switch() -> Decider:
    return decider(
        t(
            "decide",
            "SWITCH",
            evaluatorType="value-param",
            expression="case",
            inputParameters={"case": "${workflow.input.case}"},
            decisionCases={
                "c": [t("t1"), t("t2")],
                "d": [
                    t(
                        "nested",
                        "SWITCH",
                        evaluatorType="javascript",
                        expression="$.x > 10 ? 'big' : 'small'",
                        inputParameters={"x": "${workflow.input.x}"},
                        decisionCases={"big": [t("t5")]},
                        defaultCase=[t("t6")],
                    )
                ],
            },
            defaultCase=[t("t3")],
        ),
        t("t4", inputParameters={"chosen": "${decide.output.evaluationResult[0]}"}),
    )


def test_conductor_switch_case_nested_and_default() -> None:
    sim = Sim(conductor_switch(), {"case": "c"})
    sim.complete("t1")
    sim.complete("t2")
    assert sim.actions["t4"].input == {"chosen": "c"}
    sim.complete("t4")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED

    sim = Sim(conductor_switch(), {"case": "d", "x": 50})
    assert sim.pending == ["t5"]
    sim.complete("t5")
    assert sim.pending == ["t4"]

    sim = Sim(conductor_switch(), {"case": "d", "x": 1})
    assert sim.pending == ["t6"]

    sim = Sim(conductor_switch(), {"case": "zzz"})
    assert sim.pending == ["t3"]
    sim.complete("t3")
    assert sim.actions["t4"].input == {"chosen": "zzz"}


def test_conductor_fork_join_failure() -> None:
    d = decider(
        fork([t("t1"), t("t3")], [t("t2")], [t("t4"), t("t5")]),
        t("join", "JOIN", joinOn=["t3", "t2", "t5"]),
        t("t6"),
        defs={"t2": {"retryCount": 1, "retryDelaySeconds": 5}},
    )
    sim = Sim(d)
    assert sim.pending == ["t1", "t2", "t4"]
    sim.complete("t1")
    sim.fail("t2", "first")
    assert sim.actions["t2"].attempt == 2 and sim.actions["t2"].delay_seconds == 5
    sim.complete("t4")
    pending_ids = sorted(sim.actions[r].task_id for r in ("t3", "t5"))
    sim.fail("t2", "second")
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert sim.finished.failed_reference_task_names == ["t2"]
    assert sorted(sim.last.cancel) == pending_ids
    assert sim.status("join") == TaskStatus.CANCELED  # ForkJoinSpec: JOIN CANCELED
    assert {sim.status("t3"), sim.status("t5")} == {TaskStatus.CANCELED}
    assert "t6" not in sim.state.tasks


def test_conductor_do_while_with_nested_fork() -> None:
    body = [
        t("pre"),
        fork([t("a")], [t("b"), t("c")], ref="fork"),
        t("join", "JOIN", joinOn=["a", "c"]),
    ]
    d = decider(
        t(
            "loop",
            "DO_WHILE",
            loopOver=body,
            loopCondition="if ($.loop['iteration'] < $.value) { true; } else { false; }",
            inputParameters={"value": "${workflow.input.loops}"},
        ),
        t(
            "after",
            inputParameters={
                "it": "${loop.output.iteration}",
                "c2": "${c__2.output.n}",
                "last": "${join.output.c.n}",
            },
        ),
    )
    sim = Sim(d, {"loops": 3})
    for i in (1, 2, 3):
        assert sim.pending == [f"pre__{i}"]
        sim.complete(f"pre__{i}")
        assert sim.pending == [f"a__{i}", f"b__{i}"]
        sim.complete(f"b__{i}")
        sim.complete(f"a__{i}", n=i)
        assert sim.status(f"join__{i}") == TaskStatus.IN_PROGRESS
        sim.complete(f"c__{i}", n=10 * i)
        assert sim.task(f"join__{i}").output == {"a": {"n": i}, "c": {"n": 10 * i}}
    assert sim.actions["after"].input == {"it": 3, "c2": 20, "last": 30}
    out = sim.task("loop").output
    assert out["iteration"] == 3 and set(out["2"]) == {"pre", "fork", "a", "b", "c", "join"}
    sim.complete("after")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_conductor_terminate_inside_fork() -> None:
    d = decider(
        fork(
            [
                t("t1"),
                t(
                    "term",
                    "TERMINATE",
                    inputParameters={
                        "terminationStatus": "FAILED",
                        "terminationReason": "Early exit in terminate",
                        "workflowOutput": {"result": "${t1.output.v}"},
                    },
                ),
            ],
            [t("t2"), t("t3")],
        ),
        t("join", "JOIN", joinOn=["t1", "t3"]),
        t("t4"),
    )
    sim = Sim(d)
    t2 = sim.actions["t2"].task_id
    sim.complete("t1", v="early")
    assert sim.finished is not None
    assert (sim.finished.status, sim.finished.reason, sim.finished.output) == (
        RunStatus.FAILED,
        "Early exit in terminate",
        {"result": "early"},
    )
    assert sim.last.cancel == [t2]
    assert sim.status("t2") == TaskStatus.CANCELED and sim.status("join") == TaskStatus.CANCELED
    assert sim.status("term") == C


def test_conductor_optional_task() -> None:
    d = decider(
        t("opt", optional=True),
        t("t2", inputParameters={"s": "${opt.status}", "why": "${opt.reasonForIncompletion}"}),
        defs={"opt": {"retryCount": 1, "retryDelaySeconds": 0}},
    )
    sim = Sim(d)
    sim.fail("opt", "flaky")
    assert sim.actions["opt"].attempt == 2  # optional tasks still retry
    sim.outcome("opt", TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason="gave up")
    assert sim.status("opt") == TaskStatus.COMPLETED_WITH_ERRORS
    assert sim.actions["t2"].input == {"s": "COMPLETED_WITH_ERRORS", "why": "gave up"}
    sim.complete("t2", done=True)
    assert sim.finished is not None
    assert (sim.finished.status, sim.finished.output, sim.finished.failed_reference_task_names) == (
        RunStatus.COMPLETED,
        {"done": True},
        [],
    )


def test_durations_and_retry_arithmetic() -> None:
    from engine.language.durations import parse_duration, parse_until
    from engine.language.retry import retry_delay_seconds

    assert parse_duration("30s") == 30
    assert parse_duration("1h 5m") == 3900
    assert parse_duration("2 days") == 172_800
    assert parse_duration("1d2h, 3 minutes 4 secs") == 86_400 + 7_200 + 184
    assert parse_duration("45") == 45
    assert parse_duration("PT1H30M") == 5_400
    for bad in ("", "soon", "5 fortnights", "1h x"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    now = 1_700_000_000_000
    assert (
        parse_until("2030-01-02T03:04:00Z", now)
        == parse_until("2030-01-02 03:04", now)
        == 1_893_553_440_000
    )
    assert parse_until("2030-01-02T05:04:00+02:00", now) == 1_893_553_440_000
    assert parse_until("2030-01-02 03:04 UTC", now) == 1_893_553_440_000
    with pytest.raises(ValueError):
        parse_until("tomorrow", now)
    assert retry_delay_seconds("EXPONENTIAL_BACKOFF", 10, 1, 0) == 10
    assert retry_delay_seconds("LINEAR_BACKOFF", 10, 3, 1) == 60
    assert retry_delay_seconds("FIXED", 10, 1, 5, retry_after=2.5) == 10
    assert retry_delay_seconds("FIXED", 10, 1, 5, retry_after=99) == 99


def test_human_timeout_from_task_def() -> None:
    d = decider(t("h", "HUMAN"), defs={"h": {"timeoutSeconds": 60}})
    sim = Sim(d, now=0)
    assert sim.actions["h"].timeout_seconds == 60
    assert sim.actions["h"].task_def is not None
    assert d.wait_deadline(sim.state, sim.actions["h"].task_id) == Deadline(
        at_ms=60_000, kind="human"
    )


# ---------------------------------------------------------------------- running again


def test_a_retried_run_adopts_what_succeeded_and_makes_a_new_attempt_of_the_rest() -> None:
    """Conductor's workflow retry: a task that succeeded keeps its row and result, a
    scheduled task that did not gets a new attempt (new id, next seq, retriedTaskId)."""
    from protocol.runs import ReplayTask

    d = decider(t("a"), t("b", inputParameters={"x": "${a.output.x}"}))
    kept = [
        ReplayTask(ref="a", task_id="ta", seq=1, status="COMPLETED", output={"x": 7}),
        ReplayTask(ref="b", task_id="tb", seq=2, status="FAILED", attempt=1),
    ]
    state = d.start(workflow_id="w", input={}, now_ms=0, generation="g2", replay=kept, seq_base=2)
    decision = d.decide(state, 0)
    (b,) = decision.actions
    assert (b.ref, b.attempt, b.seq, b.retried_task_id) == ("b", 2, 3, "tb")
    assert b.input == {"x": 7}
    assert [r.ref for r in decision.records] == ["b"]  # the adopted row is not written
    assert state.tasks["a"].task_id == "ta"


def test_a_rerun_schedules_its_task_again_under_its_id_at_a_new_attempt() -> None:
    """``ReplayTask.rerun`` (the task a rerun starts from, conductor-oss's rerunWF resets
    it in place): scheduled again under its id and seq even when it had succeeded, at
    its next attempt (its queue message and lease are named by id and attempt), with no
    retriedTaskId; a control step (SET_VARIABLE) keeps its attempt (nothing is named by
    it)."""
    from protocol.runs import ReplayTask

    d = decider(t("a"), t("b", inputParameters={"x": "${a.output.x}"}))
    kept = [
        ReplayTask(ref="a", task_id="ta", seq=1, status="COMPLETED", output={"x": 7}),
        ReplayTask(ref="b", task_id="tb", seq=2, status="COMPLETED", attempt=2, rerun=True),
    ]
    state = d.start(workflow_id="w", input={}, now_ms=0, generation="g2", replay=kept, seq_base=2)
    decision = d.decide(state, 0)
    (b,) = decision.actions
    assert (b.ref, b.task_id, b.seq, b.attempt, b.retried_task_id) == ("b", "tb", 2, 3, None)
    assert b.input == {"x": 7}
    assert [(r.ref, r.task_id, r.status) for r in decision.records] == [
        ("b", "tb", TaskStatus.SCHEDULED)
    ]

    rerun_control = [ReplayTask(ref="c", task_id="tc", seq=3, status="COMPLETED", rerun=True)]
    d2 = decider(t("c", "SET_VARIABLE", inputParameters={"v": 1}))
    state2 = d2.start(
        workflow_id="w", input={}, now_ms=0, generation="g2", replay=rerun_control, seq_base=3
    )
    d2.decide(state2, 0)
    c = state2.tasks["c"]
    assert (c.task_id, c.seq, c.attempt) == ("tc", 3, 1)


def test_a_retry_resumes_a_sub_workflow_task_in_place() -> None:
    """``ReplayTask.resume`` (a retry with ``resumeSubworkflowTasks``, or of the child
    itself): the SUB_WORKFLOW task goes IN_PROGRESS again under its id, seq and attempt,
    its reason cleared and ``subWorkflowId`` kept, its action marked so that the
    interpreter waits for the child instead of starting one; the child's end then ends
    it as a sub-orchestration's would. A task not marked gets a new attempt."""
    from protocol.runs import ReplayTask

    sub = {"subWorkflowParam": {"name": "child", "version": 1}}
    d = decider(t("a"), t("s", "SUB_WORKFLOW", **sub), t("n", "SUB_WORKFLOW", **sub))
    kept = [
        ReplayTask(ref="a", task_id="ta", seq=1, status="COMPLETED"),
        ReplayTask(
            ref="s",
            task_id="ts",
            seq=2,
            status="FAILED",
            attempt=2,
            reason="sub workflow ts-2 FAILED",
            output={"subWorkflowId": "ts-2", "o": 1},
            resume=True,
        ),
    ]
    sim = Sim(d, generation="g2", replay=kept, seq_base=2)
    action = sim.actions["s"]
    assert (action.task_id, action.seq, action.attempt, action.resume_child) == ("ts", 2, 2, True)
    assert action.retried_task_id is None
    (row,) = sim.records
    assert (row.ref, row.task_id, row.status, row.reason, row.output) == (
        "s",
        "ts",
        TaskStatus.IN_PROGRESS,
        None,
        {"subWorkflowId": "ts-2"},
    )
    sim.outcome("s", output={"subWorkflowId": "ts-2", "done": True})
    n = sim.actions["n"]
    assert (n.attempt, n.resume_child) == (1, False)
    sim.complete("n")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_a_retry_without_resume_gives_a_sub_workflow_task_a_new_attempt() -> None:
    from protocol.runs import ReplayTask

    d = decider(t("s", "SUB_WORKFLOW", subWorkflowParam={"name": "child", "version": 1}))
    kept = [ReplayTask(ref="s", task_id="ts", seq=1, status="FAILED")]
    sim = Sim(d, generation="g2", replay=kept, seq_base=1)
    action = sim.actions["s"]
    assert (action.attempt, action.retried_task_id, action.resume_child) == (2, "ts", False)
    assert action.task_id != "ts"


def test_a_sub_workflow_named_by_expressions_is_resolved_against_the_run() -> None:
    """Conductor's SubWorkflowTaskMapper resolves ``subWorkflowParam``'s name and
    taskToDomain against the run and puts the child into the task's input
    (conductor-oss's hierarchical_fork_join_swf names its child
    ``${workflow.input.subwf}``)."""
    d = decider(
        t(
            "s",
            "SUB_WORKFLOW",
            subWorkflowParam={
                "name": "${workflow.input.subwf}",
                "version": 2,
                "taskToDomain": {"*": "${workflow.input.domain}"},
            },
        )
    )
    sim = Sim(d, input={"subwf": "leaf", "domain": "blue"})
    action = sim.actions["s"]
    assert action.sub_workflow is not None
    assert (action.sub_workflow.name, action.sub_workflow.version) == ("leaf", 2)
    assert action.sub_workflow.task_to_domain == {"*": "blue"}
    assert action.input["subWorkflowName"] == "leaf"
    # a name that resolves to nothing fails the task, saying why
    sim = Sim(d, input={})
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert "names no child" in (sim.finished.reason or "")


def test_a_sub_workflow_idempotency_key_given_as_an_expression_is_resolved() -> None:
    """Conductor's SubWorkflowTaskMapper resolves ``idempotencyKey`` with the rest of
    ``subWorkflowParam`` and forwards it with ``idempotencyStrategy`` into the task's
    input; the child's own input (``workflowInput``) does not get them."""
    d = decider(
        t(
            "s",
            "SUB_WORKFLOW",
            inputParameters={"order": "${workflow.input.order}"},
            subWorkflowParam={
                "name": "leaf",
                "version": 1,
                "idempotencyKey": "order-${workflow.input.order}",
                "idempotencyStrategy": "RETURN_EXISTING",
            },
        )
    )
    action = Sim(d, input={"order": 7}).actions["s"]
    assert action.sub_workflow is not None
    assert action.sub_workflow.idempotency_key == "order-7"
    assert action.sub_workflow.idempotency_strategy == "RETURN_EXISTING"
    assert (action.input["idempotencyKey"], action.input["idempotencyStrategy"]) == (
        "order-7",
        "RETURN_EXISTING",
    )
    assert action.input["workflowInput"] == {"order": 7}


@pytest.mark.parametrize("behaviour", [1, 2])
def test_expressions_read_a_tasks_times_from_behaviour_2(behaviour: int) -> None:
    """Conductor's ParametersUtils reads any field of a task: ``${a.endTime}``
    (EndTimeIssueTests); runs started before behaviour 2 go on reading null."""
    d = decider(t("a"), t("b", inputParameters={"end": "${a.endTime}", "who": "${a.workerId}"}))
    sim = Sim(d, now=1_000, behaviour=behaviour)
    sim.started("a", "w7", at=2_000)
    sim.outcome("a", at=5_000)
    expected = {"end": 5_000, "who": "w7"} if behaviour >= 2 else {"end": None, "who": None}
    assert sim.actions["b"].input == expected


def test_a_skipped_task_is_passed_by() -> None:
    d = decider(t("a"), t("b"), t("c"))
    sim = Sim(d)
    decision = sim.apply(d.skip(sim.state, "b", {"in": 1}, {"out": 2}, sim.now))
    (row,) = decision.records
    assert (row.ref, row.status, row.seq, row.output) == ("b", TaskStatus.SKIPPED, 0, {"out": 2})
    sim.complete("a")
    assert sim.pending == ["c"]
    assert d.skip(sim.state, "a", {}, {}, sim.now).records == []  # already processed


def test_a_definition_with_no_tasks_completes_at_once() -> None:
    """WorkflowAndTaskConfigurationSpec "Test workflow with no tasks": started under the
    API (registration refuses it, as Conductor's does), the run completes with none."""
    sim = Sim(decider())
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED
    assert sim.actions == {} and sim.records == []


def test_async_complete_holds_a_call_in_progress_until_its_outcome() -> None:
    """``asyncComplete`` on a call (HTTP here) marks its action so; the call's answer
    (``on_called``) leaves the task IN_PROGRESS with the call's output, recorded, and the
    run waiting; the outcome of a task update then ends it with the update's output. A
    script's asyncComplete is ignored (it completes itself, in Conductor too), and a stale
    attempt's answer changes nothing."""
    sim = Sim(
        decider(
            t("call", "HTTP", asyncComplete=True, inputParameters={"uri": "https://x.example"}),
            t("js", "INLINE", asyncComplete=True, inputParameters={"expression": "1"}),
        )
    )
    action = sim.actions["call"]
    assert action.async_complete
    response = {"response": {"statusCode": 202}}
    unchanged = sim.d.on_called(sim.state, action.task_id, action.attempt + 1, response)
    assert unchanged.tasks["call"].status == TaskStatus.SCHEDULED
    sim.state = sim.d.on_called(sim.state, action.task_id, action.attempt, response)
    decision = sim.decide()
    assert decision.actions == []
    assert [(r.ref, r.status, r.output) for r in decision.records] == [
        ("call", TaskStatus.IN_PROGRESS, response)
    ]
    assert sim.d.is_waiting(sim.state, action.task_id)
    sim.complete("call", done="yes")
    assert sim.task("call").output == {"done": "yes"}
    assert not sim.actions["js"].async_complete


# --------------------------------------------------------------------------- permissive


def test_a_permissive_body_task_that_failed_fails_its_loop_at_the_iterations_end() -> None:
    """conductor-oss's DoWhile: the body goes on past the permissive task that failed,
    then the loop fails with its reason (and the run with the loop, which is not)."""
    sim = Sim(decider(loop([t("p", permissive=True), t("q")], "true"), t("after")))
    sim.fail("p__1", "broke")
    assert sim.finished is None
    assert sim.pending == ["q__1"]
    sim.complete("q__1")
    assert sim.status("loop") == TaskStatus.FAILED
    assert sim.task("loop").reason == "broke"
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert "after" not in sim.state.tasks


def test_a_permissive_task_still_times_the_run_out_under_time_out_wf() -> None:
    """TIME_OUT_WF times the run out at once, permissive or optional alike."""
    d = decider(
        t("a", permissive=True), t("b"), defs={"a": {**WORKER_DEF, "timeoutPolicy": "TIME_OUT_WF"}}
    )
    sim = Sim(d, now=0)
    sim.outcome("a", TaskStatus.TIMED_OUT, at=60_000)
    assert sim.finished is not None and sim.finished.status == RunStatus.TIMED_OUT
    assert "b" not in sim.state.tasks


def test_permissive_failures_fail_the_run_when_it_would_have_completed() -> None:
    """Each permissive failure is in the run's reason (joined by ". ", Conductor's text for
    each) and in failedReferenceTaskNames; the run's output is not computed."""
    sim = Sim(
        decider(
            t("a", permissive=True),
            t("b", permissive=True, type="HTTP", inputParameters={"uri": "https://x.example"}),
            t("c"),
            outputParameters={"c": "${c.output.v}"},
        )
    )
    a = sim.actions["a"].task_id
    sim.fail("a", "first")
    b = sim.actions["b"].task_id
    sim.outcome("b", TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason="second")
    sim.complete("c", v=1)
    assert sim.finished is not None and sim.finished.status == RunStatus.FAILED
    assert sim.finished.reason == (
        f"Task {a} failed with status: FAILED and reason: 'first'. "
        f"Task {b} failed with status: FAILED_WITH_TERMINAL_ERROR and reason: 'second'"
    )
    assert sim.finished.failed_reference_task_names == ["a", "b"]
    assert sim.finished.output == {}


@pytest.mark.parametrize(
    ("type_", "marked"),
    [
        ("HTTP", True),
        ("CALL_TOOL", True),
        ("LOGIC_APP", True),
        ("DOCUMENT_INTELLIGENCE", True),
        ("JSON_JQ_TRANSFORM", False),
        ("WORKER", False),
    ],
)
def test_async_complete_marks_the_calls_only(type_: str, marked: bool) -> None:
    """Conductor's asyncComplete holds a call IN_PROGRESS after it answered; every
    built-in call type takes it, a script or a worker task ignores it."""
    sim = Sim(decider(t("x", type_, asyncComplete=True, inputParameters={"q": "."})))
    assert sim.actions["x"].async_complete is marked
