"""DO_WHILE over a list (conductor-oss's list iteration, core/.../tasks/DoWhile.java:
``items`` or Orkes' ``inputParameters._items``; ``loopItem``/``loopIndex`` in the loop's
output; an empty list completes at once; the loop goes on while there is a next item
and the loopCondition, if any, holds)."""

from __future__ import annotations

from typing import Any

from engine.decider.core import Decider
from engine.language.definitions import RunStatus, TaskStatus, WorkflowDef
from engine.language.validation import validate_workflow
from tests.unit.engine.decider.test_decider import Sim, decider, t, wf

C = TaskStatus.COMPLETED


def each(items: str | None = None, cond: str | None = None, **kw: Any) -> dict[str, Any]:
    body = [
        t(
            "p",
            inputParameters={
                "item": "${loop.output.loopItem}",
                "index": "${loop.output.loopIndex}",
            },
        )
    ]
    spec: dict[str, Any] = {"loopOver": body, **kw}
    if items is not None:
        spec["items"] = items
    if cond is not None:
        spec["loopCondition"] = cond
    return t("loop", "DO_WHILE", **spec)


def test_each_item_runs_the_body_once_with_its_item_and_index() -> None:
    sim = Sim(decider(each("${workflow.input.list}"), t("after")), {"list": ["a", {"b": 1}, 3]})
    seen = []
    for n in (1, 2, 3):
        action = sim.actions[f"p__{n}"]
        seen.append((action.input["item"], action.input["index"]))
        sim.complete(f"p__{n}", done=n)
    assert seen == [("a", 0), ({"b": 1}, 1), (3, 2)]
    loop = sim.task("loop")
    assert loop.status == C
    assert loop.output["iteration"] == 3
    assert (loop.output["loopIndex"], loop.output["loopItem"]) == (2, 3)
    assert loop.output["3"] == {"p": {"done": 3}}
    assert "after" in sim.actions


def test_an_empty_or_null_list_completes_the_loop_without_running_its_body() -> None:
    for value in ([], None):
        sim = Sim(decider(each("${workflow.input.list}"), t("after")), {"list": value})
        assert sim.status("loop") == C
        assert sim.task("loop").output == {"iteration": 0}
        assert list(sim.actions) == ["after"]


def test_a_single_value_is_a_list_of_one() -> None:
    sim = Sim(decider(each("${workflow.input.one}")), {"one": {"k": "v"}})
    assert sim.actions["p__1"].input == {"item": {"k": "v"}, "index": 0}
    sim.complete("p__1")
    assert sim.finished is not None and sim.finished.status == RunStatus.COMPLETED


def test_a_loop_condition_stops_the_list_early_and_sees_the_item() -> None:
    cond = "$.loopItem != 'stop' && $.p.ok"
    sim = Sim(decider(each("${workflow.input.list}", cond)), {"list": ["a", "stop", "c"]})
    sim.complete("p__1", ok=True)
    sim.complete("p__2", ok=True)
    assert sim.status("loop") == C
    assert sim.task("loop").output["iteration"] == 2
    assert "p__3" not in sim.actions


def test_the_orkes_form_items_in_input_parameters() -> None:
    loop = each(inputParameters={"_items": "${workflow.input.list}"})
    sim = Sim(decider(loop), {"list": [10, 20]})
    sim.complete("p__1")
    sim.complete("p__2")
    assert [sim.task(f"p__{n}").input["item"] for n in (1, 2)] == [10, 20]
    assert sim.task("loop").output["iteration"] == 2


def test_a_list_longer_than_the_iteration_limit_fails_the_loop_before_it_runs() -> None:
    d = Decider(wf(each("${workflow.input.list}")), max_loop_iterations=3)
    sim = Sim(d, {"list": list(range(10))})
    assert sim.status("loop") == TaskStatus.FAILED
    assert sim.task("loop").reason == (
        "DO_WHILE 'loop' has 10 items to iterate over, above the limit of 3 iterations"
    )
    assert sim.all_actions == []
    # a list that grows while the loop runs meets the limit as a counted loop does
    grow = t("grow", "SET_VARIABLE", inputParameters={"list": [1, 2, 3, 4, 5]})
    d = Decider(
        wf(
            t("seed", "SET_VARIABLE", inputParameters={"list": [1, 2]}),
            t(
                "loop",
                "DO_WHILE",
                items="${workflow.variables.list}",
                loopOver=[t("p"), grow],
            ),
        ),
        max_loop_iterations=3,
    )
    sim = Sim(d)
    for n in (1, 2, 3):
        sim.complete(f"p__{n}")
    assert sim.status("loop") == TaskStatus.FAILED
    assert "limit of 3 iterations" in (sim.task("loop").reason or "")


def test_validation_takes_items_instead_of_a_loop_condition() -> None:
    def problems(**loop: Any) -> list[str]:
        definition = WorkflowDef.model_validate(
            {"name": "w", "tasks": [t("loop", "DO_WHILE", loopOver=[t("p")], **loop)]}
        )
        return [f"{i.path}: {i.message}" for i in validate_workflow(definition)]

    assert problems(items="${workflow.input.list}") == []
    assert problems(inputParameters={"_items": [1, 2]}) == []
    [missing] = problems()
    assert "loopCondition" in missing and "items" in missing
    [unknown] = problems(items="${nowhere.output.list}")
    assert ".items" in unknown and "nowhere" in unknown


def test_keep_last_n_keeps_the_last_iterations_in_the_output() -> None:
    """conductor-oss's keepLastN (DoWhile.java): older iterations leave the output."""
    loop = t(
        "loop",
        "DO_WHILE",
        loopCondition="$.loop['iteration'] < 5",
        inputParameters={"keepLastN": 2},
        loopOver=[t("p")],
    )
    sim = Sim(decider(loop))
    for n in range(1, 6):
        sim.complete(f"p__{n}", n=n)
        kept = sorted(k for k in sim.task("loop").output if k.isdigit())
        assert kept == [str(i) for i in range(max(1, n - 1), n + 1)]
    assert sim.status("loop") == C
    assert sim.task("loop").output == {"iteration": 5, "4": {"p": {"n": 4}}, "5": {"p": {"n": 5}}}
