"""The worker's spans (stepway_worker/tracing.py) over real HTTP against the fake Task
API: the execution is a child of the span the task's ``traceparent`` names, the result
post a child of the execution, and the post's ``traceparent`` header names the post.
The spans go to an in-memory exporter (opentelemetry-sdk, a test dependency only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.propagate import inject
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, NoOpTracerProvider
from opentelemetry.trace import TracerProvider as TracerProviderApi
from stepway_worker import Registry, Worker, handle_queue_message, worker_task
from stepway_worker.telemetry import tracer_provider_from_env
from stepway_worker.testing import FakeTaskServer
from stepway_worker.tracing import WorkerTracing

from .conftest import fast_settings  # type: ignore[import-not-found]

DISPATCH_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
DISPATCH_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{DISPATCH_TRACE}-{DISPATCH_SPAN}-01"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _echo(reg: Registry) -> None:
    @worker_task("echo", registry=reg)
    def echo(text: str) -> dict[str, str]:
        return {"said": text}


def _named(exporter: InMemorySpanExporter, name: str) -> Any:
    (found,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return found


def test_execution_and_post_are_children_of_the_dispatch_span(
    server: FakeTaskServer, reg: Registry, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    _echo(reg)
    task_id = server.enqueue("echo", {"text": "secret"}, traceparent=TRACEPARENT)
    with Worker(reg, settings=fast_settings(server.url), tracer_provider=provider):
        assert server.wait_result(task_id)["status"] == "COMPLETED"
    execute = _named(exporter, "stepway.worker.execute")
    post = _named(exporter, "stepway.worker.post_result")
    assert f"{execute.context.trace_id:032x}" == DISPATCH_TRACE
    assert f"{execute.parent.span_id:016x}" == DISPATCH_SPAN
    assert execute.parent.is_remote
    assert post.parent.span_id == execute.context.span_id
    assert server.result_traceparent(task_id) == (
        f"00-{DISPATCH_TRACE}-{post.context.span_id:016x}-01"
    )
    assert dict(execute.attributes) == {
        "stepway.workflowId": "wf-1",
        "stepway.taskId": task_id,
        "stepway.taskType": "echo",
        "stepway.attempt": 1,
        "stepway.status": "COMPLETED",
    }
    assert all("secret" not in str(v) for s in (execute, post) for v in s.attributes.values())


def test_a_failed_task_marks_its_execution_span_failed(
    server: FakeTaskServer, reg: Registry, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    provider, exporter = spans

    @worker_task("breaks", registry=reg)
    def breaks() -> None:
        raise RuntimeError("account 12345 is locked")

    task_id = server.enqueue("breaks", traceparent=TRACEPARENT)
    with Worker(reg, settings=fast_settings(server.url), tracer_provider=provider):
        assert server.wait_result(task_id)["status"] == "FAILED"
    execute = _named(exporter, "stepway.worker.execute")
    assert execute.status.is_ok is False
    assert execute.attributes["stepway.status"] == "FAILED"
    # the reason is the task's business, not the trace's
    assert execute.status.description is None and not execute.events


def test_without_an_sdk_the_tasks_trace_context_is_passed_on(
    server: FakeTaskServer, reg: Registry
) -> None:
    """A worker whose process configured no OpenTelemetry SDK records nothing, but the
    Task API still learns which trace the result belongs to."""
    _echo(reg)
    task_id = server.enqueue("echo", {"text": "x"}, traceparent=TRACEPARENT)
    with Worker(reg, settings=fast_settings(server.url), tracer_provider=NoOpTracerProvider()):
        assert server.wait_result(task_id)["status"] == "COMPLETED"
    assert server.result_traceparent(task_id) == TRACEPARENT


def test_a_task_without_trace_context_starts_a_trace_of_its_own(
    server: FakeTaskServer, reg: Registry, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    _echo(reg)
    task_id = server.enqueue("echo", {"text": "x"})
    with Worker(reg, settings=fast_settings(server.url), tracer_provider=provider):
        server.wait_result(task_id)
    execute = _named(exporter, "stepway.worker.execute")
    assert execute.parent is None


def test_the_functions_shape_traces_the_queue_messages_context(
    server: FakeTaskServer, reg: Registry, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    _echo(reg)
    task_id = server.enqueue("echo", {"text": "hi"})  # known to the fake, never polled
    body = {
        "taskId": task_id,
        "workflowId": "wf-1",
        "taskRef": "echo_ref",
        "taskType": "echo",
        "attempt": 1,
        "input": {"text": "hi"},
        "traceparent": TRACEPARENT,
    }
    posted = handle_queue_message(
        body, handlers=reg, settings=fast_settings(server.url), tracer_provider=provider
    )
    assert posted is not None and posted["status"] == "COMPLETED"
    execute = _named(exporter, "stepway.worker.execute")
    post = _named(exporter, "stepway.worker.post_result")
    assert f"{execute.parent.span_id:016x}" == DISPATCH_SPAN
    assert post.parent.span_id == execute.context.span_id


def test_telemetry_is_off_unless_an_exporter_is_named() -> None:
    assert tracer_provider_from_env({}) is None
    assert tracer_provider_from_env({"OTEL_SERVICE_NAME": "stepway-worker-x"}) is None
    otlp = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_SDK_DISABLED": "true"}
    assert tracer_provider_from_env(otlp) is None
    provider = tracer_provider_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_SERVICE_NAME": "w"}
    )
    assert provider is not None
    try:
        assert provider.resource.attributes["service.name"] == "w"
    finally:
        provider.shutdown()


def test_without_an_sdk_the_handler_runs_in_the_tasks_trace_context(
    server: FakeTaskServer, reg: Registry
) -> None:
    """What the handler sees as current (and so what its own outbound calls propagate)
    is the dispatch's context, as under the API's no-op tracer."""
    seen: list[str] = []

    @worker_task("peek", registry=reg)
    def peek() -> None:
        carrier: dict[str, str] = {}
        inject(carrier)
        seen.append(carrier.get("traceparent", ""))

    task_id = server.enqueue("peek", traceparent=TRACEPARENT)
    with Worker(reg, settings=fast_settings(server.url), tracer_provider=NoOpTracerProvider()):
        assert server.wait_result(task_id)["status"] == "COMPLETED"
    assert seen == [TRACEPARENT]


class _NoOpTracerBehindAnotherProvider(TracerProviderApi):
    """The API's no-op tracer, from a provider the worker does not know to be no-op: the
    worker then goes through the tracer for every span."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> NoOpTracer:
        return NoOpTracer()


@pytest.mark.parametrize(
    "traceparent",
    [TRACEPARENT, f"00-{DISPATCH_TRACE}-{DISPATCH_SPAN}-00", "not-a-traceparent", None],
)
def test_the_no_op_shortcut_passes_on_what_the_no_op_tracer_would(
    traceparent: str | None,
) -> None:
    task = {"taskId": "t1", "workflowInstanceId": "wf-1", "attempt": 1}
    if traceparent is not None:
        task["traceparent"] = traceparent
    body = {"taskId": "t1", "workflowInstanceId": "wf-1", "status": "COMPLETED"}
    answers = []
    for provider in (NoOpTracerProvider(), _NoOpTracerBehindAnotherProvider()):
        tracing = WorkerTracing(provider)
        with tracing.execute(task, "echo") as span:
            inside: dict[str, str] = {}
            inject(inside)
            tracing.finished(span, "COMPLETED")
        carried = tracing.carried(span, task)
        with tracing.post(carried, body, "echo", 1) as headers:
            during: dict[str, str] = {}
            inject(during)
        answers.append((inside, carried, headers, during))
    assert answers[0] == answers[1]
