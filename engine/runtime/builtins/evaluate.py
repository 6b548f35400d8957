"""INLINE, LAMBDA and JSON_JQ_TRANSFORM as activities: evaluated once, in an evaluator process.

The orchestration schedules them like any built-in activity, so their result is recorded
in the history and a replay reads it instead of evaluating again (determinism by
construction, whatever the script does). The evaluation itself runs in
:class:`engine.runtime.evaluators.EvaluatorPool` (``ActivityDeps.evaluators``), under its limits.

* INLINE: ``inputParameters.expression`` is JavaScript evaluated with ``$`` = the task's
  resolved inputs; ``evaluatorType: value-param`` instead takes the input parameter the
  expression names. Output ``{"result": value}``.
* LAMBDA: ``inputParameters.scriptExpression`` is the body of a JavaScript function,
  called with ``$`` = the task's resolved inputs (Conductor's Lambda). Output
  ``{"result": value}``; an empty script fails the task; a script error fails it with
  ``{"error": message}`` as its output.
* JSON_JQ_TRANSFORM: ``inputParameters.queryExpression`` runs over the resolved inputs.
  Output ``{"result": first output or null, "resultList": every output}``.

A script or program error fails the task (``FAILED``, with the script's message; jq's is
prefixed ``jq:``); a breached limit fails it ``FAILED_WITH_TERMINAL_ERROR`` with a reason
naming the limit and its value, since another attempt would breach it again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.runtime.builtins.results import ActivityDeps, ActivityResult
from engine.runtime.evaluators import EvaluationError, Kind

__all__ = ["inline_activity", "jq_activity", "lambda_activity"]


def _inputs(task_input: dict[str, Any]) -> dict[str, Any]:
    """The task's inputs without the engine's reserved keys (``_payloadKeyPrefix``)."""
    return {k: v for k, v in task_input.items() if not k.startswith("_")}


def _evaluate(
    deps: ActivityDeps, kind: Kind, what: str, program: str, data: Any
) -> tuple[Any, ActivityResult | None]:
    if deps.evaluators is None:
        return None, ActivityResult.terminal(f"{what}: this engine process has no evaluators")
    try:
        return deps.evaluators.evaluate(kind, program, data, within=deps.within_seconds), None
    except EvaluationError as exc:
        if exc.is_limit:
            return None, ActivityResult.terminal(f"{what}: {exc}")
        if exc.message.startswith("the evaluator process"):  # a crash: same input, same end
            return None, ActivityResult.terminal(f"{what}: {exc}")
        prefix = "jq: " if kind == "jq" else ""
        return None, ActivityResult.failed(prefix + exc.message)


def inline_activity(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    inputs = _inputs(task_input)
    expression = inputs.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        return ActivityResult.terminal("INLINE task without inputParameters.expression")
    if str(inputs.get("evaluatorType") or "javascript").lower() == "value-param":
        return ActivityResult.completed({"result": inputs.get(expression)})
    value, failure = _evaluate(deps, "js", "INLINE", expression, {"$": inputs})
    return failure or ActivityResult.completed({"result": value})


def lambda_activity(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    inputs = _inputs(task_input)
    script = inputs.get("scriptExpression")
    if not isinstance(script, str) or not script.strip():
        return ActivityResult.terminal(
            "Empty 'scriptExpression' in Lambda task's input parameters. A non-empty "
            "String value must be provided."
        )
    program = f"function scriptFun(){{{script}}} scriptFun();"
    value, failure = _evaluate(deps, "js", "LAMBDA", program, {"$": inputs})
    if failure is not None:
        return dataclasses.replace(failure, output={"error": failure.reason})
    return ActivityResult.completed({"result": value})


def jq_activity(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    inputs = _inputs(task_input)
    query = inputs.get("queryExpression")
    if not isinstance(query, str) or not query.strip():
        return ActivityResult.terminal(
            "JSON_JQ_TRANSFORM task without inputParameters.queryExpression"
        )
    results, failure = _evaluate(deps, "jq", "JSON_JQ_TRANSFORM", query, inputs)
    if failure is not None:
        return failure
    outputs = list(results) if isinstance(results, list) else [results]
    return ActivityResult.completed(
        {"result": outputs[0] if outputs else None, "resultList": outputs}
    )
