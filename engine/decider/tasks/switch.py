"""SWITCH: evaluate a case key (``value-param``: an input parameter; ``javascript``: an
expression over the inputs; legacy ``caseValueParam`` / ``caseExpression``) and run the
matching case, else ``defaultCase``. The SWITCH completes at once with
``{"evaluationResult": [key], "selectedCase": key}`` and ``case`` (and ``hasChildren``)
added to its input; a task declared ``DECISION`` has input ``{case}`` and output
``{"caseOutput": [key]}``, as Conductor's. The sequence resumes after the chosen case
has run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.tasks.base import TaskFailed, TaskHandler, TaskStart
from engine.language.scripting import ScriptError, evaluate

if TYPE_CHECKING:
    from engine.decider.core import Decider


def case_key(value: Any) -> str:
    """A value as a case key: booleans ``true``/``false``, ``null``, integral numbers
    without ``.0``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class SwitchTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        state, frame, ts, wt = start.state, start.frame, start.task, start.definition
        inputs = decider.dereferenced(ts.input)
        evaluator = (wt.evaluator_type or "").lower()
        try:
            if evaluator in ("javascript", "graaljs"):
                value = evaluate(wt.expression or "", {"$": inputs}, memo=decider.scripts)
            elif evaluator == "value-param" or (not evaluator and wt.expression):
                value = inputs.get(wt.expression or "")
            elif wt.case_value_param:
                value = inputs.get(wt.case_value_param)
            elif wt.case_expression:
                value = evaluate(wt.case_expression, {"$": inputs}, memo=decider.scripts)
            else:
                value = None
        except ScriptError as exc:
            raise TaskFailed(str(exc)) from None
        key = case_key(value)
        label = f"case:{key}" if key in wt.decision_cases else "default"
        list_id = decider.nodes[wt.task_reference_name].branches.get(label)
        has_children = list_id is not None and bool(decider.lists[list_id])
        # as Conductor's mappers: the case is recorded in the input; a DECISION's input is
        # only that, its output "caseOutput"
        if wt.declared_type == "DECISION":
            ts.input = {"case": key}
            output: dict[str, Any] = {"caseOutput": [key]}
        else:
            # the input as resolved (a large value stays a pointer), plus the case
            ts.input = {**ts.input, "case": key}
            output = {"evaluationResult": [key], "selectedCase": key}
        if has_children:
            ts.input["hasChildren"] = "true"
        decider.complete_inline(state, ts, output, start.now_ms)
        if list_id is not None and has_children:
            decider.open_frame(state, frame, ts.ref, list_id, label, frame.suffix, True)
