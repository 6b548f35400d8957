"""One trace per run: a WORKER run started through the workflow API of the embedded
platform (``stepway dev``'s, over real HTTP), its task executed by the Python worker SDK
polling the Task API. The platform and the worker each export to their own in-memory
exporter (as two processes would), so the spans can only share a trace through what
travels between them: the orchestration input, the task message, the Task JSON and the
result post's ``traceparent`` header. The C# worker SDK (``workers/sdk-dotnet``, built
with Mono) runs as a process of its own: it records no spans, but passes the trace on."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from stepway_worker import Registry, TaskContext, Worker, WorkerSettings, worker_task

from control_plane.cli.dev import DevPlatform
from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client, start_worker, stop_worker
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.app.host import (
    LocalSettings,
    build_local_services,
    make_engine_worker,
)
from engine.language.definitions import RunStatus
from engine.ports.run_store import NewRun
from engine.runtime.tracing import ATTEMPT, STATUS, TASK_ID, TASK_TYPE, WORKFLOW_ID
from protocol.runs import ORCHESTRATOR_NAME, RunInput
from tests.dotnet_build import build_dotnet
from tests.e2e.conftest import Platform, now_ms

REPO = Path(__file__).resolve().parents[2]
TRACEPARENT_HEADER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    platform: DevPlatform
    http: httpx.Client
    url: str
    #: None: the platform runs without a tracer provider (tracing off)
    spans: InMemorySpanExporter | None


def _serve(tmp_path: Path, traced: bool) -> Iterator[Served]:
    exporter = InMemorySpanExporter() if traced else None
    provider = None
    if exporter is not None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    port = _free_port()
    platform = DevPlatform(
        data_dir=tmp_path / "data", port=port, repo_root=REPO, tracer_provider=provider
    )
    app = platform.start()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            _register(http)
            yield Served(platform, http, url, exporter)
    finally:
        server.should_exit = True
        thread.join(10)
        platform.stop()


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Served]:
    yield from _serve(tmp_path, traced=True)


@pytest.fixture
def untraced(tmp_path: Path) -> Iterator[Served]:
    yield from _serve(tmp_path, traced=False)


def _register(http: httpx.Client) -> None:
    taskdef = {"name": "traced_echo", "retryCount": 0, "responseTimeoutSeconds": 30}
    assert http.put("/api/metadata/taskdefs", json=taskdef).status_code < 300
    response = http.post(
        "/api/metadata/workflow",
        json={
            "name": "traced_flow",
            "tasks": [
                {
                    "name": "traced_echo",
                    "taskReferenceName": "echo",
                    "type": "SIMPLE",
                    "inputParameters": {"text": "${workflow.input.text}"},
                }
            ],
            "outputParameters": {"said": "${echo.output.said}"},
        },
    )
    assert response.status_code < 300, response.text


def _run_with_worker(
    served: Served, worker_provider: TracerProvider | None, headers: dict[str, str] | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Start a run through the API, let an SDK worker execute its task; the run's id and
    the Task JSON the worker was handed."""
    handed: list[dict[str, Any]] = []
    reg = Registry()

    @worker_task("traced_echo", registry=reg)
    def echo(text: str, ctx: TaskContext) -> dict[str, str]:
        handed.append(dict(ctx.task))
        return {"said": text}

    settings = WorkerSettings(
        server_url=served.url,
        worker_id="tracing-worker",
        long_poll_ms=500,
        poll_interval=0.05,
        retry_initial=0.05,
        shutdown_grace=5.0,
    )
    workflow_id = served.http.post(
        "/api/workflow/traced_flow", json={"text": "hello"}, headers=headers or {}
    ).text
    with Worker(reg, settings=settings, tracer_provider=worker_provider):
        deadline = time.monotonic() + 30
        while True:
            run = served.http.get(f"/api/workflow/{workflow_id}").json()
            if run["status"] != "RUNNING":
                break
            assert time.monotonic() < deadline, "the run did not finish"
            time.sleep(0.05)
    assert run["status"] == "COMPLETED", run
    assert run["output"] == {"said": "hello"}
    return workflow_id, handed


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def _wait_for(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The finished spans once one named ``name`` is among them (the finish activity
    ends its span just after the run is recorded COMPLETED)."""
    deadline = time.monotonic() + 10
    while True:
        spans = list(exporter.get_finished_spans())
        if any(s.name == name for s in spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.05)


def test_a_worker_run_is_one_trace_across_api_engine_and_worker(traced: Served) -> None:
    assert traced.spans is not None
    worker_spans = InMemorySpanExporter()
    worker_provider = TracerProvider()
    worker_provider.add_span_processor(SimpleSpanProcessor(worker_spans))

    workflow_id, handed = _run_with_worker(
        traced, worker_provider, headers={"traceparent": TRACEPARENT_HEADER}
    )

    platform = _wait_for(traced.spans, "stepway.finish")
    worker = list(worker_spans.get_finished_spans())
    start = _one(platform, "stepway.workflow.start")
    dispatch = _one(platform, "stepway.dispatch")
    handout = _one(platform, "stepway.task.handout")
    result = _one(platform, "stepway.task.result")
    finish = _one(platform, "stepway.finish")
    execute = _one(worker, "stepway.worker.execute")
    post = _one(worker, "stepway.worker.post_result")

    # one trace, begun by the API's start span (a root: the caller's trace is linked)
    trace_id = start.context.trace_id
    assert start.parent is None
    assert [link.context.trace_id for link in start.links] == [
        int(TRACEPARENT_HEADER.split("-")[1], 16)
    ]
    run_spans = [s for s in platform if s.attributes.get(WORKFLOW_ID) == workflow_id]
    assert {s.context.trace_id for s in [*run_spans, execute, post]} == {trace_id}
    assert {s.name for s in run_spans} >= {
        "stepway.workflow.start",
        "stepway.dispatch",
        "stepway.task.handout",
        "stepway.task.result",
        "stepway.finish",
    }

    # the engine's activities are children of the start span
    assert dispatch.parent is not None and dispatch.parent.span_id == start.context.span_id
    assert finish.parent is not None and finish.parent.span_id == start.context.span_id
    assert dispatch.kind == SpanKind.PRODUCER
    # the Task JSON carried the dispatch span's context to the worker ...
    (task,) = handed
    assert task["traceparent"].split("-")[2] == f"{dispatch.context.span_id:016x}"
    # ... whose execution span is the dispatch span's child, as is the hand-out's
    assert execute.parent is not None and execute.parent.span_id == dispatch.context.span_id
    assert handout.parent is not None and handout.parent.span_id == dispatch.context.span_id
    # the result post is the execution's child, the Task API's result span the post's
    assert post.parent is not None and post.parent.span_id == execute.context.span_id
    assert result.parent is not None and result.parent.span_id == post.context.span_id

    task_id = task["taskId"]
    for traced_span in (dispatch, handout, execute, post, result):
        assert traced_span.attributes[TASK_ID] == task_id
        assert traced_span.attributes[TASK_TYPE] == "traced_echo"
        assert traced_span.attributes[WORKFLOW_ID] == workflow_id
    for traced_span in (dispatch, handout, execute, post):
        assert traced_span.attributes[ATTEMPT] == 1
    assert execute.attributes[STATUS] == "COMPLETED"
    assert result.attributes[STATUS] == "COMPLETED"
    assert finish.attributes[STATUS] == "COMPLETED"
    # ids, types and statuses only: the run's data is in no attribute
    for any_span in [*platform, *worker]:
        assert not any("hello" in str(v) for v in any_span.attributes.values()), any_span.name


def test_a_worker_without_an_sdk_passes_the_trace_on_to_the_task_api(traced: Served) -> None:
    """A worker process that configured no OpenTelemetry SDK records nothing, but its
    result post still carries the task's trace context: the Task API's result span
    stays in the run's trace, under the dispatch span."""
    assert traced.spans is not None
    from opentelemetry.trace import NoOpTracerProvider

    _run_with_worker(traced, NoOpTracerProvider())
    spans = _wait_for(traced.spans, "stepway.finish")
    dispatch = _one(spans, "stepway.dispatch")
    result = _one(spans, "stepway.task.result")
    assert result.context.trace_id == dispatch.context.trace_id
    assert result.parent is not None and result.parent.span_id == dispatch.context.span_id


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_csharp_worker_passes_the_trace_on_to_the_task_api(
    traced: Served, tmp_path: Path
) -> None:
    """The C# worker SDK records no spans of its own, but posts a task's result with the
    task's ``traceparent`` as its header, as the Python SDK does without an OpenTelemetry
    SDK: the Task API's result span is in the run's trace, the dispatch span's child."""
    assert traced.spans is not None
    build = build_dotnet(tmp_path / "dotnet")
    taskdef = {"name": "cs_traced_echo", "retryCount": 0, "responseTimeoutSeconds": 30}
    assert traced.http.put("/api/metadata/taskdefs", json=taskdef).status_code < 300
    flow = {
        "name": "cs_traced_flow",
        "tasks": [
            {
                "name": "cs_traced_echo",
                "taskReferenceName": "echo",
                "type": "SIMPLE",
                "inputParameters": {"text": "${workflow.input.text}"},
            }
        ],
        "outputParameters": {
            "said": "${echo.output.said}",
            "traceparent": "${echo.output.traceparent}",
        },
    }
    assert traced.http.post("/api/metadata/workflow", json=flow).status_code < 300
    log = tmp_path / "dotnet-worker.log"
    env = {
        **os.environ,
        "STEPWAY_SERVER_URL": traced.url,
        "STEPWAY_WORKER_ID": "dotnet-tracing",
        "STEPWAY_LONG_POLL_MS": "500",
        "STEPWAY_POLL_INTERVAL": "0.05",
        "STEPWAY_SHUTDOWN_GRACE": "5",
    }
    with log.open("wb") as out:
        worker = subprocess.Popen(
            ["mono", "--debug", str(build / "E2eWorker.exe"), "cs_traced_echo"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=build,
        )
    try:
        workflow_id = traced.http.post("/api/workflow/cs_traced_flow", json={"text": "hi"}).text
        deadline = time.monotonic() + 90  # Mono's start on a loaded machine included
        while True:
            run = traced.http.get(
                f"/api/workflow/{workflow_id}", params={"includeTasks": True}
            ).json()
            if run["status"] != "RUNNING":
                break
            assert worker.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, f"the run did not finish\n{log.read_text()}"
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            code = worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            code = worker.wait(10)
    assert code == 0, log.read_text(errors="replace")
    assert run["status"] == "COMPLETED", run
    (task,) = run["tasks"]
    assert task["workerId"] == "dotnet-tracing"

    spans = _wait_for(traced.spans, "stepway.finish")
    dispatch = _one(spans, "stepway.dispatch")
    result = _one(spans, "stepway.task.result")
    # the handler was handed the dispatch span's context (TaskContext.TraceParent) ...
    ctx = dispatch.context
    handed = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    assert run["output"] == {"said": "hi", "traceparent": handed}
    # ... and the result post carried it: the Task API's span joined the run's trace
    assert result.context.trace_id == dispatch.context.trace_id
    assert result.parent is not None and result.parent.span_id == dispatch.context.span_id
    assert result.attributes[TASK_ID] == task["taskId"]
    assert result.attributes[WORKFLOW_ID] == workflow_id
    assert result.attributes[STATUS] == "COMPLETED"


def test_without_a_tracer_provider_nothing_is_traced_or_carried(untraced: Served) -> None:
    """Tracing off (no exporter configured, the default): no trace context is created,
    so none is kept with the run, sent in the task message or handed to the worker."""
    worker_spans = InMemorySpanExporter()
    worker_provider = TracerProvider()
    worker_provider.add_span_processor(SimpleSpanProcessor(worker_spans))

    workflow_id, handed = _run_with_worker(untraced, worker_provider)

    (task,) = handed
    assert "traceparent" not in task
    state = untraced.platform.client.get_orchestration_state(workflow_id, fetch_payloads=True)
    assert state is not None and "traced_flow" in (state.serialized_input or "")
    assert "traceparent" not in (state.serialized_input or "")
    # the worker's own spans start a trace of their own: nothing tied them to a run
    execute = _one(list(worker_spans.get_finished_spans()), "stepway.worker.execute")
    assert execute.parent is None


@pytest.fixture
def traced_engine(
    backend: EmbeddedBackend, tmp_path: Path
) -> Iterator[tuple[Platform, InMemorySpanExporter]]:
    """The engine alone (no control plane) with an in-memory span exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = BackendConfig.embedded(backend.address)
    services = build_local_services(
        LocalSettings(data_dir=tmp_path), config, tracer_provider=provider
    )
    worker = make_engine_worker(config, services)
    start_worker(worker)
    try:
        yield (
            Platform(services, make_client(config), SqliteQueueProvisioner(tmp_path / "queues.db")),
            exporter,
        )
    finally:
        stop_worker(worker)


def test_child_runs_and_the_failure_workflow_stay_in_the_runs_trace(
    traced_engine: tuple[Platform, InMemorySpanExporter],
) -> None:
    platform, exporter = traced_engine
    for name in ("inner_work", "doomed"):
        platform.register_task_def({"name": name, "retryCount": 0})
    inner_work = {"name": "inner_work", "taskReferenceName": "w", "type": "WORKER"}
    platform.register({"name": "inner", "tasks": [inner_work]})
    platform.register(
        {
            "name": "cleanup",
            "tasks": [
                {
                    "name": "note",
                    "taskReferenceName": "note",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"failed": "${workflow.input.workflowId}"},
                }
            ],
        }
    )
    platform.register(
        {
            "name": "outer",
            "failureWorkflow": "cleanup",
            "tasks": [
                {
                    "name": "inner",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "inner", "version": 1},
                },
                {"name": "doomed", "taskReferenceName": "doomed", "type": "WORKER"},
            ],
        }
    )
    workflow_id = "traced-outer"
    platform.services.run_store.create_run(
        NewRun(workflow_id=workflow_id, name="outer", version=1, create_time=now_ms())
    )
    # the run's trace context, as the workflow API's start span would give it
    platform.client.schedule_new_orchestration(
        ORCHESTRATOR_NAME,
        input=RunInput(name="outer", version=1, traceparent=TRACEPARENT_HEADER).wire(),
        instance_id=workflow_id,
    )
    inner_task = platform.take("inner_work")
    platform.complete(inner_task, {})
    doomed = platform.take("doomed")
    platform.complete(doomed, status="FAILED", reason="disk full")
    assert platform.wait(workflow_id).status == RunStatus.FAILED
    assert platform.wait(f"{workflow_id}-failure").status == RunStatus.COMPLETED

    spans = list(exporter.get_finished_spans())
    run_trace = int(TRACEPARENT_HEADER.split("-")[1], 16)
    assert spans and {s.context.trace_id for s in spans} == {run_trace}
    resolve = _one(spans, "stepway.resolve_child")
    by_run: dict[str, list[ReadableSpan]] = {}
    for span_ in spans:
        by_run.setdefault(str(span_.attributes.get(WORKFLOW_ID)), []).append(span_)
    child_id = f"{resolve.attributes[TASK_ID]}-1"
    # the child run's activities are children of the span that resolved it
    child_dispatch = _one(by_run[child_id], "stepway.dispatch")
    assert child_dispatch.parent is not None
    assert child_dispatch.parent.span_id == resolve.context.span_id
    assert inner_task["traceparent"].split("-")[2] == f"{child_dispatch.context.span_id:016x}"
    # the failure workflow's activities are children of the failed run's finish span
    outer_finish = _one(by_run[workflow_id], "stepway.finish")
    assert outer_finish.attributes[STATUS] == "FAILED"
    cleanup_finish = _one(by_run[f"{workflow_id}-failure"], "stepway.finish")
    assert cleanup_finish.parent is not None
    assert cleanup_finish.parent.span_id == outer_finish.context.span_id
