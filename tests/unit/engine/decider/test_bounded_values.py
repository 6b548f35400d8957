"""No large value enters the run state: whole references to offloaded data stay pointers,
and a value computed in the run above the inline threshold fails its step, naming it."""

from __future__ import annotations

from typing import Any

from engine.decider import Decider, TaskOutcome
from engine.language.definitions import RunStatus, TaskStatus, WorkflowDef
from engine.runtime.payload_refs import pointer

LIMIT = 1000
BIG = "x" * 5000
STORE: dict[str, Any] = {
    "out-1": {"text": BIG, "n": 2},
    "in-1": {"doc": {"body": BIG}, "small": 1},
}


def decider(*tasks: dict[str, Any], **kw: Any) -> Decider:
    definition = WorkflowDef.model_validate({"name": "wf", "tasks": list(tasks), **kw})
    return Decider(definition, payloads=STORE.__getitem__, max_value_bytes=LIMIT)


def t(ref: str, type: str = "WORKER", **params: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": type, "inputParameters": params}


def complete_first(d: Decider, output: dict[str, Any], input: dict[str, Any] | None = None) -> Any:
    state = d.start(workflow_id="w", input=input or {}, now_ms=0)
    first = d.decide(state, 0).actions[0]
    d.on_outcome(
        state,
        TaskOutcome(task_id=first.task_id, attempt=1, status=TaskStatus.COMPLETED, output=output),
        1,
    )
    return state, d.decide(state, 1)


def test_an_interpolated_string_above_the_limit_fails_the_task_and_names_it() -> None:
    d = decider(t("a"), t("b", text="summary: ${a.output.text}"))
    state, decision = complete_first(d, {"outputRef": "out-1"})
    assert decision.actions == []
    assert state.tasks["b"].status == TaskStatus.FAILED
    assert state.tasks["b"].reason == (
        f"input 'text' of task 'b' is more than {LIMIT} bytes, above the limit of {LIMIT} "
        "bytes for a value computed in the run (the inline threshold); pass a large value "
        "whole by reference, as one ${...} expression, so that it travels through the "
        "payload store"
    )
    assert decision.finished is not None and decision.finished.status == RunStatus.FAILED


def test_a_template_repeating_a_large_value_is_not_built() -> None:
    d = decider(t("a"), t("b", text="${a.output.text}" * 100_000))
    state, _ = complete_first(d, {"outputRef": "out-1"})
    assert state.tasks["b"].status == TaskStatus.FAILED
    assert "more than 1000 bytes" in (state.tasks["b"].reason or "")


def test_a_copied_value_above_the_limit_fails_with_its_size() -> None:
    d = decider(t("a"), t("b", items="${a.output.items}"))
    items = list(range(400))
    state, _ = complete_first(d, {"items": items})
    size = len(str(items).replace(" ", ""))
    assert state.tasks["b"].reason is not None
    assert state.tasks["b"].reason.startswith(f"input 'items' of task 'b' is {size} bytes")


def test_a_whole_reference_into_the_offloaded_workflow_input_stays_a_pointer() -> None:
    d = decider(t("a", doc="${workflow.input.doc}", body="${workflow.input.doc.body}"))
    state = d.start(workflow_id="w", input={"inputRef": "in-1"}, now_ms=0)
    action = d.decide(state, 0).actions[0]
    assert action.input == {
        "doc": pointer("in-1", "$.doc"),
        "body": pointer("in-1", "$.doc.body"),
    }


def test_a_default_of_the_input_template_is_resolved_not_pointed_at() -> None:
    d = decider(t("a", mode="${workflow.input.mode}"), inputTemplate={"mode": "fast"})
    state = d.start(workflow_id="w", input={"inputRef": "in-1"}, now_ms=0)
    assert d.decide(state, 0).actions[0].input == {"mode": "fast"}


def test_a_variable_set_to_a_large_output_keeps_a_pointer_that_later_tasks_follow() -> None:
    d = decider(
        t("a"),
        t("v", "SET_VARIABLE", doc="${a.output}"),
        t("b", doc="${workflow.variables.doc}", text="${workflow.variables.doc.text}"),
        {
            "name": "s",
            "taskReferenceName": "s",
            "type": "SWITCH",
            "evaluatorType": "javascript",
            "expression": "$.n > 1 ? 'many' : 'few'",
            "inputParameters": {"n": "${workflow.variables.doc.n}"},
            "decisionCases": {"many": [t("c")]},
        },
    )
    state, decision = complete_first(d, {"outputRef": "out-1"})
    assert state.variables == {"doc": pointer("out-1", "$")}
    assert decision.actions[0].input == {
        "doc": pointer("out-1", "$"),
        "text": pointer("out-1", "$.text"),
    }
    d.on_outcome(
        state,
        TaskOutcome(task_id=decision.actions[0].task_id, attempt=1, status=TaskStatus.COMPLETED),
        2,
    )
    after = d.decide(state, 2)
    assert state.tasks["s"].output["selectedCase"] == "many"  # evaluated on the value
    assert [a.ref for a in after.actions] == ["c"]


def test_run_output_keeps_whole_references_as_pointers() -> None:
    d = decider(t("a"), outputParameters={"all": "${a.output}", "n": "${a.output.n}"})
    _, decision = complete_first(d, {"outputRef": "out-1"})
    assert decision.finished is not None
    assert decision.finished.output == {
        "all": pointer("out-1", "$"),
        "n": pointer("out-1", "$.n"),
    }


def test_a_computed_run_output_above_the_limit_fails_the_run() -> None:
    d = decider(t("a"), outputParameters={"s": "text=${a.output.text}"})
    _, decision = complete_first(d, {"outputRef": "out-1"})
    assert decision.finished is not None and decision.finished.status == RunStatus.FAILED
    assert (decision.finished.reason or "").startswith(
        f"output 's' of the run is more than {LIMIT} bytes"
    )
