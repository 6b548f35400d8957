"""The worker's spans, written against the OpenTelemetry API only (no SDK needed).

A polled task carries ``traceparent``, the W3C trace context of the engine's span that
dispatched it; the worker's span for executing the task is that span's child, and its
span for posting the result is the execution's child. The post sends its own context as
the ``traceparent`` header, so the Task API's span for the result joins the run's trace
too. Attributes are ids, the task type, the attempt and the status: never input, output
or reasons.

The spans go to the tracer provider the :class:`~stepway_worker.runner.Worker` is given,
else to OpenTelemetry's global one: nothing is recorded until the process configures
an SDK (``python -m stepway_worker`` does when the ``telemetry`` extra is installed and
an exporter is configured, see :mod:`stepway_worker.telemetry`; an application can set
its own). Without one, a task's ``traceparent`` is still passed on to the Task API, and
its context is current while the handler runs and while the result is posted, exactly
as the API's no-op tracer would leave it; that case skips the tracer's machinery (a
no-op span cost about as much CPU as a tenth of the rest of a task).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanKind,
    Status,
    StatusCode,
    TracerProvider,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["TRACEPARENT", "WorkerTracing"]

TRACEPARENT = "traceparent"

WORKFLOW_ID = "stepway.workflowId"
TASK_ID = "stepway.taskId"
TASK_TYPE = "stepway.taskType"
ATTEMPT = "stepway.attempt"
STATUS = "stepway.status"
ERROR_TYPE = "error.type"

_PROPAGATOR = TraceContextTextMapPropagator()


def _context_of(traceparent: Any) -> Context | None:
    if not isinstance(traceparent, str) or not traceparent:
        return None
    ctx = _PROPAGATOR.extract({TRACEPARENT: traceparent})
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def _traceparent_of(span: Span) -> str | None:
    """The W3C ``traceparent`` of ``span``, as the propagator writes it."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


@contextmanager
def _current(parent: Context | None) -> Iterator[Span]:
    """What a no-op tracer's span does: ``parent``'s span (else the current one) is the
    span, current until the block ends."""
    if parent is None:
        yield trace.get_current_span()
        return
    token = otel_context.attach(parent)
    try:
        yield trace.get_current_span(parent)
    finally:
        otel_context.detach(token)


def _attributes(values: dict[str, Any]) -> dict[str, str | int]:
    return {k: v for k, v in values.items() if isinstance(v, str | int) and v != ""}


class WorkerTracing:
    """The spans of one worker (thread safe)."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        source = provider if provider is not None else trace.get_tracer_provider()
        self._tracer = source.get_tracer("stepway_worker")
        #: the provider given, None: the global one (looked up on each span, as the
        #: global tracer follows a provider set later)
        self._given = None if isinstance(provider, ProxyTracerProvider) else provider

    def _recording(self) -> bool:
        """False when spans go to the no-op tracer (no SDK configured)."""
        provider = self._given if self._given is not None else trace.get_tracer_provider()
        return not isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)

    @contextmanager
    def _span(
        self, name: str, parent: Context | None, kind: SpanKind, attributes: dict[str, Any]
    ) -> Iterator[Span]:
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes=_attributes(attributes),
            # an exception's message can quote the task's data: only its type is kept
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR))
                raise

    @contextmanager
    def execute(self, task: dict[str, Any], task_type: str) -> Iterator[Span]:
        """The span of running the handler of ``task`` (Conductor Task JSON), a child
        of the dispatch span its ``traceparent`` names; current while it is open, so
        spans the handler makes are its children."""
        if not self._recording():
            with _current(_context_of(task.get(TRACEPARENT))) as current:
                yield current
            return
        with self._span(
            "stepway.worker.execute",
            _context_of(task.get(TRACEPARENT)),
            SpanKind.CONSUMER,
            {
                WORKFLOW_ID: task.get("workflowInstanceId") or task.get("workflowId"),
                TASK_ID: task.get("taskId"),
                TASK_TYPE: task_type,
                ATTEMPT: task.get("attempt"),
            },
        ) as span:
            yield span

    @staticmethod
    def finished(span: Span, status: str) -> None:
        """Record the outcome's status on the execution span (a failure marks it)."""
        span.set_attribute(STATUS, status)
        if status.startswith("FAILED"):
            span.set_status(Status(StatusCode.ERROR))

    @staticmethod
    def carried(span: Span, task: dict[str, Any]) -> str | None:
        """The trace context a result of ``task`` is posted under: the execution span's,
        else (no SDK configured) the task's own, passed on unchanged."""
        own = _traceparent_of(span)
        given = task.get(TRACEPARENT)
        return own or (given if isinstance(given, str) and given else None)

    @contextmanager
    def post(
        self, traceparent: str | None, body: dict[str, Any], task_type: str, attempt: int | None
    ) -> Iterator[dict[str, str]]:
        """The span of posting one result (one try); yields the headers that carry its
        context (``traceparent``) to the Task API."""
        if not self._recording():
            with _current(_context_of(traceparent)) as current:
                header = _traceparent_of(current) or traceparent
                yield {TRACEPARENT: header} if header else {}
            return
        with self._span(
            "stepway.worker.post_result",
            _context_of(traceparent),
            SpanKind.CLIENT,
            {
                WORKFLOW_ID: body.get("workflowInstanceId"),
                TASK_ID: body.get("taskId"),
                TASK_TYPE: task_type,
                ATTEMPT: attempt,
                STATUS: body.get("status"),
            },
        ) as span:
            own = _traceparent_of(span)
            header = own or traceparent
            yield {TRACEPARENT: header} if header else {}
