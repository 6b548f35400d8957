"""Tracing of runs with the OpenTelemetry API: one trace per run.

The trace of a run begins with the control plane's start span; its W3C ``traceparent``
travels with the run (:class:`protocol.runs.RunInput`), so the orchestration passes it
to every activity input without creating anything itself (replay stays deterministic:
spans are made only in activities and API handlers, never in orchestration code). The
dispatch activity's span becomes the parent of the worker's span through the task
message (:class:`protocol.messages.TaskMessage`) and the Conductor Task JSON a worker
polls (``traceparent``), and the Task API's hand-out span is its child too.

Processes get a tracer provider from their entry point (``engine.app.telemetry``); the
default is OpenTelemetry's no-op provider, so with tracing off no span is recorded and
no ``traceparent`` is written anywhere. Span attributes carry ids, types, attempts and
statuses only: never payloads, reasons or credentials.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "ATTEMPT",
    "ERROR_TYPE",
    "STATUS",
    "TASK_ID",
    "TASK_TYPE",
    "TRACEPARENT",
    "WORKFLOW_ID",
    "attributes",
    "context_of",
    "failed",
    "link_to",
    "span",
    "traceparent_of",
    "tracer",
]

#: span attribute names (Conductor's names, in the ``stepway`` namespace)
WORKFLOW_ID = "stepway.workflowId"
TASK_ID = "stepway.taskId"
TASK_TYPE = "stepway.taskType"
ATTEMPT = "stepway.attempt"
STATUS = "stepway.status"

#: OpenTelemetry's attribute for the kind of error an operation ended with
ERROR_TYPE = "error.type"

#: the W3C Trace Context field (and HTTP header) name
TRACEPARENT = "traceparent"

_PROPAGATOR = TraceContextTextMapPropagator()


def tracer(provider: TracerProvider | None, name: str) -> Tracer:
    """The tracer ``name`` of ``provider``; no provider: a no-op tracer."""
    return (provider or trace.NoOpTracerProvider()).get_tracer(name)


def context_of(traceparent: str | None) -> Context | None:
    """The parent context a ``traceparent`` names; None when there is none or it is
    not a valid W3C traceparent."""
    if not traceparent:
        return None
    ctx = _PROPAGATOR.extract({TRACEPARENT: traceparent})
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def traceparent_of(current: Span) -> str | None:
    """The W3C ``traceparent`` of a span (None for a no-op span: tracing is off)."""
    if not current.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(current))
    return carrier.get(TRACEPARENT)


def link_to(traceparent: str | None) -> list[Link]:
    """A span link to the span a ``traceparent`` names (none when it names none)."""
    ctx = context_of(traceparent)
    if ctx is None:
        return []
    return [Link(trace.get_current_span(ctx).get_span_context())]


def attributes(
    *,
    workflow_id: str | None = None,
    task_id: str | None = None,
    task_type: str | None = None,
    attempt: int | None = None,
    status: str | None = None,
) -> dict[str, str | int]:
    """Span attributes of the given ids, leaving out the unknown ones."""
    values: dict[str, str | int | None] = {
        WORKFLOW_ID: workflow_id,
        TASK_ID: task_id,
        TASK_TYPE: task_type,
        ATTEMPT: attempt,
        STATUS: status,
    }
    return {k: v for k, v in values.items() if v is not None}


@contextmanager
def span(
    tracer_: Tracer,
    name: str,
    *,
    parent: str | None = None,
    root: bool = False,
    kind: SpanKind = SpanKind.INTERNAL,
    attrs: Mapping[str, str | int] | None = None,
    links: list[Link] | None = None,
) -> Iterator[Span]:
    """A current span named ``name``: a child of the span ``parent`` (a traceparent)
    names, else a new root when ``root``, else a child of the current context.

    An exception marks the span failed with the exception's type only: messages are
    not recorded, since they can quote payloads (a validation error, a SQL error's
    parameters).

    With tracing off (a no-op tracer) it yields the invalid span and sets no current
    span: OpenTelemetry's no-op tracer would still attach it to the context (6.8 against
    2.1 microseconds a span, docs/benchmarks.md); nothing reads it there but
    :func:`traceparent_of`, which answers None for it either way."""
    if type(tracer_) is trace.NoOpTracer:
        yield trace.INVALID_SPAN
        return
    context = context_of(parent)
    if context is None and root:
        context = Context()
    with tracer_.start_as_current_span(
        name,
        context=context,
        kind=kind,
        attributes=attrs,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            failed(current, type(exc).__qualname__)
            raise


def failed(current: Span, error_type: str) -> None:
    """Mark a span failed, naming the kind of error (never its message)."""
    current.set_attribute(ERROR_TYPE, error_type)
    current.set_status(Status(StatusCode.ERROR))
