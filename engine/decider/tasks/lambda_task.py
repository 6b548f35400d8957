"""LAMBDA: ``inputParameters.scriptExpression`` is the body of a javascript function,
run with ``$`` = the resolved inputs by the evaluator INLINE uses, into
``{"result": value}`` (Conductor's Lambda). An empty script or an error fails the task
(no retry), with the error in the output."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import TaskFailed, TaskHandler, TaskStart
from engine.language.scripting import ScriptError, evaluate

if TYPE_CHECKING:
    from engine.decider.core import Decider


class LambdaTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        task = start.task
        script = task.input.get("scriptExpression")
        if not isinstance(script, str) or not script.strip():
            raise TaskFailed(
                "Empty 'scriptExpression' in Lambda task's input parameters. A non-empty "
                "String value must be provided."
            )
        try:
            result = evaluate(f"function scriptFun(){{{script}}} scriptFun();", {"$": task.input})
        except ScriptError as exc:
            task.output = {"error": str(exc)}
            raise TaskFailed(str(exc)) from None
        decider.complete_inline(start.state, task, {"result": result}, start.now_ms)
