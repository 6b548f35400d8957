"""The Task API's spans (engine/runtime/tracing.py): a hand-out is a child of the
dispatch span that queued the attempt (the message's ``traceparent``, handed on in the
Task JSON); a posted result is a child of the caller's ``traceparent`` header, which
Stepway's SDK sets to its span for posting the result, itself a child of its span for
executing the task. So a run's trace shows dispatch, hand-out, execution and result.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import INVALID_SPAN, NoOpTracerProvider, Span, SpanKind, TracerProvider

from control_plane.services.task_results import TaskResultIn
from engine.runtime.tracing import (
    TRACEPARENT,
    attributes,
    context_of,
    span,
    tracer,
)

__all__ = ["TRACER_NAME", "record_handout", "result_span"]

TRACER_NAME = "stepway.control_plane"


def record_handout(provider: TracerProvider, task: dict[str, Any], began_ns: int) -> None:
    """Record the hand-out of ``task`` (Conductor Task JSON), which began at
    ``began_ns`` and is over, as a span under the dispatch span it names. With
    tracing off (the no-op provider) nothing is parsed or built."""
    if isinstance(provider, NoOpTracerProvider):
        return
    hand_out = tracer(provider, TRACER_NAME).start_span(
        "stepway.task.handout",
        context=context_of(task.get(TRACEPARENT)),
        kind=SpanKind.SERVER,
        attributes=attributes(
            workflow_id=task.get("workflowInstanceId"),
            task_id=task.get("taskId"),
            task_type=task.get("taskType"),
            attempt=task.get("attempt"),
            status=task.get("status"),
        ),
        start_time=began_ns,
    )
    hand_out.end(time.time_ns())


@contextmanager
def result_span(
    provider: TracerProvider, result: TaskResultIn, caller_trace: str | None
) -> Iterator[Span]:
    """The span of accepting a posted TaskResult (set the task type on it once known).
    With tracing off (the no-op provider): the invalid span, and nothing parsed or
    built (the caller's ``traceparent`` is not even read)."""
    if isinstance(provider, NoOpTracerProvider):
        yield INVALID_SPAN
        return
    with span(
        tracer(provider, TRACER_NAME),
        "stepway.task.result",
        parent=caller_trace,
        kind=SpanKind.SERVER,
        attrs=attributes(
            workflow_id=result.workflow_instance_id,
            task_id=result.task_id,
            attempt=result.attempt,
            status=result.status,
        ),
    ) as current:
        yield current
