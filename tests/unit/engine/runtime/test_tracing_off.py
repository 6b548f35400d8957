"""Spans with tracing off (the no-op provider every process has by default)."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine.runtime.tracing import span, traceparent_of, tracer


def test_a_span_with_tracing_off_is_invalid_and_leaves_the_current_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    other = provider.get_tracer("another library")
    off = tracer(None, "stepway")
    with other.start_as_current_span("outer") as outer:
        with span(off, "stepway.workflow.start", root=True) as current:
            assert current is trace.INVALID_SPAN
            assert traceparent_of(current) is None
            # the no-op span is not made current: what another library records
            # inside stays a child of the span around it
            assert trace.get_current_span() is outer
        with pytest.raises(ValueError), span(off, "stepway.task.dispatch"):
            raise ValueError("passes through")
    assert [s.name for s in exporter.get_finished_spans()] == ["outer"]
