"""DO_WHILE ``keepLastN`` (conductor-oss's DoWhile.java ``removeIterations``): when
iteration n ends, iteration n - N leaves the loop's output and its task instances
(nested ones too) leave the run: the Decider drops them and emits a ``removed`` record
for each, after any record of theirs. A retried run re-enters such a loop at the oldest
iteration it kept rows of."""

from __future__ import annotations

from typing import Any

from engine.decider.state import TaskChange
from engine.language.definitions import TaskStatus
from protocol.runs import ReplayTask
from tests.unit.engine.decider.test_decider import Sim, decider, roundtrip, t

C = TaskStatus.COMPLETED


def keep_loop(keep: int, body: list[dict[str, Any]], times: int = 5) -> dict[str, Any]:
    return t(
        "loop",
        "DO_WHILE",
        loopCondition=f"$.loop['iteration'] < {times}",
        inputParameters={"keepLastN": keep},
        loopOver=body,
    )


def removed(records: list[TaskChange]) -> list[str]:
    return [r.ref for r in records if r.removed]


def test_an_iteration_past_the_last_n_leaves_the_run_with_its_rows() -> None:
    sim = Sim(decider(keep_loop(2, [t("p"), t("v", "SET_VARIABLE", inputParameters={"x": 1})])))
    for n in (1, 2):
        sim.complete(f"p__{n}")
    assert removed(sim.records) == []
    sim.records.clear()
    sim.complete("p__3")  # iteration 3 ended: iteration 1 leaves
    assert removed(sim.records) == ["p__1", "v__1"]
    # emitted last: after every row the step wrote (iteration 3's end, iteration 4's start)
    assert [r.removed for r in sim.last.records][-2:] == [True, True]
    assert not any(r.removed for r in sim.last.records[:-2])
    assert "p__1" not in sim.state.tasks and "v__1" not in sim.state.tasks
    sim.complete("p__4")
    sim.complete("p__5")
    assert sim.status("loop") == C
    assert sorted(r for r in sim.state.tasks if r != "loop") == ["p__4", "p__5", "v__4", "v__5"]
    assert sorted(k for k in sim.task("loop").output if k.isdigit()) == ["4", "5"]
    assert removed(sim.records) == ["p__1", "v__1", "p__2", "v__2", "p__3", "v__3"]


def test_a_removed_record_names_the_instance_and_carries_no_row() -> None:
    sim = Sim(decider(keep_loop(1, [t("p")], times=2)))
    sim.complete("p__1", big="x" * 1000)
    sim.records.clear()
    sim.complete("p__2")
    [gone] = [r for r in sim.records if r.removed]
    assert (gone.ref, gone.def_ref, gone.task_id, gone.output, gone.input) == (
        "p__1",
        "p",
        "",
        {},
        {},
    )


def test_a_removed_iteration_takes_its_nested_loops_iterations_along() -> None:
    inner = t(
        "inner",
        "DO_WHILE",
        loopCondition="$.inner['iteration'] < 2",
        loopOver=[t("q")],
    )
    sim = Sim(decider(keep_loop(1, [inner], times=3), t("after")))
    for n in (1, 2):
        sim.complete(f"q__{n}__1")
        sim.complete(f"q__{n}__2")
    # q__1 stands for every instance of q in outer iteration 1 (q__1__1, q__1__2)
    assert removed(sim.records) == ["inner__1", "q__1"]
    assert not {"inner__1", "q__1__1", "q__1__2"} & set(sim.state.tasks)
    assert "q__2__2" in sim.state.tasks


def test_no_keep_last_n_removes_nothing() -> None:
    sim = Sim(
        decider(t("loop", "DO_WHILE", loopCondition="$.loop['iteration'] < 4", loopOver=[t("p")]))
    )
    for n in range(1, 5):
        sim.complete(f"p__{n}")
    assert removed(sim.records) == []
    assert [r for r in sim.state.tasks if r.startswith("p__")] == ["p__1", "p__2", "p__3", "p__4"]


def test_a_task_only_a_removed_iteration_ran_reads_null_before_and_after_a_reload() -> None:
    """The expression context after a removal is the one a reloaded state (a new
    execution, a replay without the cache) builds: a task whose only instances left reads
    as missing in both, so that decisions do not depend on which one decides."""
    switch = t(
        "sw",
        "SWITCH",
        evaluatorType="value-param",
        expression="n",
        inputParameters={"n": "${loop.output.iteration}"},
        decisionCases={"1": [t("once")]},
        defaultCase=[],
    )
    body = [switch, t("p")]
    after = t("after", inputParameters={"once": "${once.output.v}"})
    sim = Sim(decider(keep_loop(1, body, times=3), after))
    sim.complete("once__1", v=7)
    sim.complete("p__1")
    sim.complete("p__2")  # iteration 1 leaves: once__1 was the only instance of "once"
    reloaded = roundtrip(sim.state)
    sim.complete("p__3")
    assert sim.actions["after"].input == {"once": None}
    assert sim.d.context(reloaded).get("once") is None


def test_a_retried_run_re_enters_the_loop_at_its_oldest_kept_iteration() -> None:
    """The run failed in iteration 5 (keepLastN 2: iterations 3 and 4 were kept, 1 and 2
    removed); its retry adopts 3 and 4 and retries p__5, instead of running 1 again."""
    d = decider(keep_loop(2, [t("p")], times=6), t("after"))
    kept = [
        ReplayTask(ref="p__3", task_id="t3", seq=3, status="COMPLETED", output={"n": 3}),
        ReplayTask(ref="p__4", task_id="t4", seq=4, status="COMPLETED", output={"n": 4}),
        ReplayTask(ref="p__5", task_id="t5", seq=5, status="FAILED"),
    ]
    sim = Sim(d, generation="g2", replay=kept, seq_base=6)
    assert sim.pending == ["p__5"]
    assert (sim.actions["p__5"].attempt, sim.actions["p__5"].retried_task_id) == (2, "t5")
    assert sim.task("loop").output["iteration"] == 5
    sim.complete("p__5", n=5)
    sim.complete("p__6", n=6)
    assert sim.status("loop") == C
    assert sim.task("loop").output == {"iteration": 6, "5": {"p": {"n": 5}}, "6": {"p": {"n": 6}}}
    assert sim.pending == ["after"]


def test_a_retried_run_without_removed_iterations_starts_the_loop_at_one() -> None:
    d = decider(keep_loop(3, [t("p")], times=3))
    kept = [
        ReplayTask(ref="p__1", task_id="t1", seq=1, status="COMPLETED"),
        ReplayTask(ref="p__2", task_id="t2", seq=2, status="FAILED"),
    ]
    state = d.start(workflow_id="w", input={}, now_ms=0, generation="g2", replay=kept, seq_base=2)
    decision = d.decide(state, 0)
    assert [a.ref for a in decision.actions] == ["p__2"]


def test_an_iteration_a_new_execution_no_longer_holds_is_removed_from_the_store_too() -> None:
    """The state carried into a new execution is compacted (Decider.compact drops ended
    instances nothing reads again): the rows of such an iteration are still removed, by
    reference name."""
    sim = Sim(decider(keep_loop(1, [t("p"), t("q")], times=4)))
    for n in (1, 2):
        sim.complete(f"p__{n}")
        sim.complete(f"q__{n}")
    sim.complete("p__3")
    sim.state = roundtrip(sim.d.compact(sim.state))
    assert "q__2" not in sim.state.tasks
    sim.records.clear()
    sim.complete("q__3")
    assert removed(sim.records) == ["p__2", "q__2"]
