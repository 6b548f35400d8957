"""JSON_JQ_TRANSFORM: runs ``queryExpression`` over the resolved inputs with the
Decider's jq evaluator into ``{"result": first, "resultList": all}``. A jq error fails
the task (no retry)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import TaskFailed, TaskHandler, TaskStart

if TYPE_CHECKING:
    from engine.decider.core import Decider


class JsonJqTransformTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        ts = start.task
        query = ts.input.get("queryExpression")
        if not isinstance(query, str) or not query.strip():
            raise TaskFailed("JSON_JQ_TRANSFORM task without inputParameters.queryExpression")
        try:
            results = list(decider.jq(query, ts.input))
        except Exception as exc:  # jq raises ValueError and others for bad programs/data
            raise TaskFailed(f"jq: {exc}") from None
        decider.complete_inline(
            start.state,
            ts,
            {"result": results[0] if results else None, "resultList": results},
            start.now_ms,
        )
