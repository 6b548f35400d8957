"""INLINE: evaluates ``inputParameters.expression`` (``evaluatorType`` javascript, the
default, in sandboxed QuickJS with ``$`` = the resolved inputs; or ``value-param``)
into ``{"result": value}``. A script error fails the task (no retry)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.tasks.base import TaskFailed, TaskHandler, TaskStart
from engine.language.scripting import ScriptError, evaluate

if TYPE_CHECKING:
    from engine.decider.core import Decider


def script_result(inputs: dict[str, Any]) -> Any:
    evaluator = str(inputs.get("evaluatorType") or "javascript").lower()
    expression = inputs.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        raise TaskFailed("INLINE task without inputParameters.expression")
    if evaluator == "value-param":
        return inputs.get(expression)
    try:
        return evaluate(expression, {"$": inputs})
    except ScriptError as exc:
        raise TaskFailed(str(exc)) from None


class InlineTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        result = script_result(start.task.input)
        decider.complete_inline(start.state, start.task, {"result": result}, start.now_ms)
