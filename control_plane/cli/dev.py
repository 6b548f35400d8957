"""``stepway dev``: the whole platform on one machine.

The embedded durable backend, one engine process hosting the interpreter and its
activities, and the control plane, in this process, over the embedded adapters (SQLite
run store and queues, local payload directory) under ``--data-dir``. With
``--with-workers`` the example code-area workers run as child processes and poll the Task
API over HTTP like any remote worker.

The embedded backend keeps orchestration state in memory: runs in flight do not survive a
restart of ``stepway dev``. Their records are not left RUNNING: at start, runs the
previous session left RUNNING or PAUSED are marked FAILED with that reason.

As the engine's activities do when deployed, it sweeps the deferred messages of
attempts that are over and that a queue outage left unsettled
(engine/runtime/deferred_sweep.py; every ``STEPWAY_DEFERRED_SWEEP_SECONDS``).

Tracing is off unless the environment names an exporter (engine/app/telemetry.py, e.g.
``OTEL_EXPORTER_OTLP_ENDPOINT`` of a local collector); the worker processes read the same
variables.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from opentelemetry.trace import TracerProvider

from control_plane.api.app import create_app
from control_plane.cli.dev_sandbox import Sandbox
from control_plane.cli.http_server import uvicorn_config
from control_plane.deps import Deps, Settings
from control_plane.services.metadata import MetadataService
from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client, start_worker, stop_worker
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.adapters.backend.sessions import DEFAULT_SESSION_CAPACITY
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.app.config import ConfigError, EnvReader
from engine.app.host import (
    LocalSettings,
    build_local_services,
    engine_concurrency,
    make_engine_worker,
)
from engine.app.telemetry import TelemetryConfig, build_tracer_provider
from engine.language.definitions import RunStatus, TaskStatus
from engine.language.loading import load_paths
from engine.ports.payload_store import PayloadLimits
from engine.ports.queue import QueueError
from engine.ports.run_store import RunQuery, RunUpdate, TaskUpdate
from engine.runtime.builtins.secrets import Secrets
from engine.runtime.deferred_sweep import DEFAULT_INTERVAL_SECONDS
from engine.runtime.evaluators import EvaluatorLimits
from engine.runtime.run_limits import RunLimits
from engine.runtime.services import EngineServices
from engine.runtime.settlement import MessageSettlement, release_slot
from workers.catalog import load_catalog

LOST_REASON = (
    "stepway dev was restarted while this run was in flight; the embedded backend keeps "
    "orchestration state in memory, so the run cannot resume"
)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _payload_secret(data_dir: Path) -> str:
    path = data_dir / "payload-secret"
    if path.exists():
        return path.read_text().strip()
    value = secrets.token_hex(32)
    path.touch(mode=0o600)
    path.write_text(value)
    return value


def fail_lost_runs(services: EngineServices) -> int:
    """Mark runs left RUNNING/PAUSED by a previous session FAILED, cancel their tasks and
    remove their queue messages, so that no worker runs work of a run that is gone (a
    result posted for one of their tasks gets 409: the task is CANCELED). Returns how
    many runs."""
    store = services.run_store
    count = 0
    queues: set[str] = set()
    while True:
        found = store.search_runs(
            RunQuery(statuses=[RunStatus.RUNNING, RunStatus.PAUSED], size=500)
        )
        if not found.results:
            break
        now = _now_ms()
        for run in found.results:
            queues |= _cancel_tasks(services, run.workflow_id, now)
            store.update_run(
                run.workflow_id,
                RunUpdate(
                    status=RunStatus.FAILED, reason_for_incompletion=LOST_REASON, end_time=now
                ),
                now,
            )
            count += 1
    for queue in sorted(queues):
        _drop_stale_messages(services, queue)
    return count


def _cancel_tasks(services: EngineServices, workflow_id: str, now: int) -> set[str]:
    """Cancel the unfinished tasks of a lost run; settle the messages workers held. The
    queues its tasks were sent to are returned."""
    store = services.run_store
    settlement = MessageSettlement(store, services.queue)
    queues: set[str] = set()
    for row in store.list_tasks(workflow_id):
        if row.queue_name:
            queues.add(row.queue_name)
        if row.status.is_terminal:
            continue
        held = row.status == TaskStatus.IN_PROGRESS
        applied = store.update_task(
            row.task_id,
            row.attempt,
            TaskUpdate(
                status=TaskStatus.CANCELED, reason_for_incompletion=LOST_REASON, end_time=now
            ),
            now,
        )
        if applied and held:
            release_slot(store, row.task_id, row.attempt)
        settlement.settle_attempt(row.task_id, row.attempt)
    return queues


def _drop_stale_messages(services: EngineServices, queue: str) -> None:
    """Remove the messages waiting on ``queue`` whose task is over (all of them at a
    restart: nothing runs yet). A message scheduled for later is dropped when it comes
    due, by the Task API's hand-out, which never hands out a task that is over."""
    store = services.run_store
    try:
        while True:
            messages = services.queue.receive(queue, 100, max_wait_seconds=0)
            if not messages:
                return
            for message in messages:
                try:
                    task_id = str(message.json().get("taskId"))
                except ValueError:
                    task_id = ""
                row = store.get_task(task_id)
                if row is None or row.status.is_terminal:
                    services.queue.complete(queue, message)
                else:
                    services.queue.abandon(queue, message)
                    return
    except QueueError as exc:  # a queue deleted meanwhile: nothing to remove
        logging.getLogger(__name__).info("queue %s: %s", queue, exc)


@dataclass
class DevPlatform:
    """The embedded platform, started and stopped as one."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    repo_root: Path = field(default_factory=Path.cwd)
    backend: EmbeddedBackend = field(default_factory=EmbeddedBackend)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)
    sandbox: Sandbox = field(default_factory=Sandbox)
    #: variables the sandbox gave the workers (empty: the caller configured real systems)
    sandbox_env: dict[str, str] = field(default_factory=dict)
    #: where the engine's and the control plane's spans go (None: tracing off)
    tracer_provider: TracerProvider | None = None
    #: limits (``stepway dev`` reads them from the same variables as a deployed engine)
    payload_limits: PayloadLimits = field(default_factory=PayloadLimits)
    evaluator_limits: EvaluatorLimits = field(default_factory=EvaluatorLimits)
    run_limits: RunLimits = field(default_factory=RunLimits)
    #: live orchestrations kept between their work items (engine/adapters/backend/sessions.py)
    orchestration_sessions: int = DEFAULT_SESSION_CAPACITY
    #: activity work items run at once (``STEPWAY_MAX_CONCURRENT_ACTIVITIES``; None: the
    #: engine's default, engine/app/host.py)
    max_concurrent_activities: int | None = None
    #: seconds between sweeps of deferred messages (engine/runtime/deferred_sweep.py); 0: none
    deferred_sweep_seconds: float = DEFAULT_INTERVAL_SECONDS
    #: the secrets an HTTP task's request may carry (``STEPWAY_SECRET_HOSTS``)
    secrets: Secrets = field(default_factory=Secrets)

    def start(self) -> Any:
        """Start backend and engine; return the control plane ASGI app."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        address = self.backend.start()
        config = BackendConfig.embedded(address)
        self.services = build_local_services(
            LocalSettings(
                data_dir=self.data_dir,
                payload_secret=_payload_secret(self.data_dir),
                public_url=f"http://{self.host}:{self.port}",
                limits=self.payload_limits,
                evaluator_limits=self.evaluator_limits,
                run_limits=self.run_limits,
                secrets=self.secrets,
            ),
            config,
            tracer_provider=self.tracer_provider,
        )
        if self.services.activity_deps.evaluators is not None:
            self.services.activity_deps.evaluators.start()
        self.lost_runs = fail_lost_runs(self.services)
        self.engine = make_engine_worker(
            config,
            self.services,
            concurrency=engine_concurrency(self.max_concurrent_activities),
            sessions=self.orchestration_sessions,
        )
        start_worker(self.engine)
        self.services.start_sweep(self.deferred_sweep_seconds)
        self.client = make_client(config)
        catalog_dir = self.repo_root / "workers"
        catalog = load_catalog(catalog_dir) if catalog_dir.is_dir() else []
        domains: dict[str, list[str]] = {}
        for entry in catalog:
            for task_type in entry.task_types:
                domains.setdefault(task_type, []).extend(entry.domains)
        settings = Settings(task_domains=domains)
        deps = Deps(
            run_store=self.services.run_store,
            queue=self.services.queue,
            provisioner=SqliteQueueProvisioner(self.data_dir / "queues.db"),
            payloads=self.services.payloads,
            signals=DurableRunSignals(self.client),
            tracer_provider=self.services.tracer_provider,
            local_adapters=True,
        )
        self.metadata = MetadataService(settings, deps)
        self.catalog = catalog
        app = self.app = create_app(settings, deps)
        self.sandbox.mount(app)
        return app

    def register_examples(self) -> None:
        """Register the example task definitions, workflows and instruction texts."""
        paths = [
            p for p in (self.repo_root / "workers", self.repo_root / "definitions") if p.is_dir()
        ]
        if not paths:
            return
        loaded = load_paths(paths)
        taskdefs = [i.data for i in loaded.items if i.kind == "taskdef"]
        workflows = [i.data for i in loaded.items if i.kind == "workflow"]
        if taskdefs:
            self.metadata.register_task_defs(taskdefs)
        if workflows:
            self.metadata.register_workflows(workflows, single=False, create_only=False)
        instructions = self.repo_root / "definitions" / "instructions"
        if instructions.is_dir():
            for text_file in sorted(instructions.glob("*.md")):
                self.services.run_store.put_instruction(
                    text_file.stem, 1, text_file.read_text(), _now_ms()
                )
        self.registered = {
            "taskdefs": sorted(str(t["name"]) for t in taskdefs),
            "workflows": sorted(str(w["name"]) for w in workflows),
        }

    def start_workers(self) -> None:
        url = f"http://{self.host}:{self.port}"
        self.sandbox_env = self.sandbox.worker_env(url, dict(os.environ))
        env = {
            "STEPWAY_LOG_LEVEL": "WARNING",
            **os.environ,
            **self.sandbox_env,
            "STEPWAY_SERVER_URL": url,
        }
        for entry in self.catalog:
            self.workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "stepway_worker", "--app", f"workers.{entry.name}"],
                    env={**env, "OTEL_SERVICE_NAME": f"stepway-worker-{entry.name}"},
                    cwd=self.repo_root,
                )
            )

    def stop(self) -> None:
        for proc in self.workers:
            proc.terminate()
        for proc in self.workers:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if hasattr(self, "app"):
            self.app.close()
        if hasattr(self, "engine"):
            stop_worker(self.engine)
        if hasattr(self, "services"):
            self.services.close()
        self.backend.stop()

    def banner(self) -> str:
        url = f"http://{self.host}:{self.port}"
        lines = [
            "Stepway is running (embedded: no cloud account).",
            f"  console         {url}/",
            f"  control plane   {url}/api   (API docs: {url}/docs)",
            f"  durable backend {self.backend.address} (in memory)",
            f"  data            {self.data_dir}",
        ]
        if self.registered.get("workflows"):
            lines.append("  workflows       " + ", ".join(self.registered["workflows"]))
        if self.workers:
            lines.append(f"  workers         {len(self.workers)} code-area worker processes")
        if self.sandbox_env:
            lines.append(
                f"  SANDBOX         the connector worker lodges with a made-up tax authority "
                f"and bank at {url}/dev-sandbox/ (not real systems; set CONNECTOR_TAX_URL, "
                "CONNECTOR_BANK_URL and CONNECTOR_API_KEY to use real ones)"
            )
        if self.lost_runs:
            lines.append(
                f"  note            {self.lost_runs} run(s) of the previous session "
                "were in flight and are now marked FAILED"
            )
        lines += [
            "Runs in flight do not survive a restart of stepway dev.",
            "Start an example run:",
            "  uv run stepway run invoice_intake --input @docs/samples/invoice.json --wait",
            "Press Ctrl-C to stop.",
        ]
        return "\n".join(lines)


def serve(data_dir: Path, host: str, port: int, with_workers: bool) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    for name in ("durabletask-worker", "durabletask-client", "durabletask"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from control_plane.cli.serve import is_loopback

    if not is_loopback(host) and os.environ.get("STEPWAY_ALLOW_ANONYMOUS", "").lower() != "true":
        # stepway dev has no authentication: every caller is admin, operator and worker
        raise SystemExit(
            f"stepway dev: refusing to listen on {host}: the embedded platform has no "
            "authentication, so anyone who can reach it could run and change workflows. "
            "Use 127.0.0.1, or set STEPWAY_ALLOW_ANONYMOUS=true if that is really intended."
        )
    from engine.app.config import (
        read_deferred_sweep,
        read_engine_limits,
        read_gc_tuning,
        read_max_concurrent_activities,
        read_orchestration_sessions,
        read_payload_limits,
        read_secrets,
    )
    from engine.app.garbage_collection import settle_heap

    env = EnvReader()
    payload_limits = read_payload_limits(env)
    evaluator_limits, run_limits = read_engine_limits(env)
    sessions = read_orchestration_sessions(env)
    max_activities = read_max_concurrent_activities(env)
    gc_tuning = read_gc_tuning(env)
    deferred_sweep = read_deferred_sweep(env)
    secrets = read_secrets(env)
    telemetry = TelemetryConfig.read(env, "stepway-dev")
    try:
        env.raise_if_errors()
    except ConfigError as exc:
        raise SystemExit(f"stepway dev: {exc}") from None
    tracer_provider = build_tracer_provider(telemetry)
    platform = DevPlatform(
        data_dir=data_dir.resolve(),
        host=host,
        port=port,
        payload_limits=payload_limits,
        evaluator_limits=evaluator_limits,
        run_limits=run_limits,
        orchestration_sessions=sessions,
        max_concurrent_activities=max_activities,
        deferred_sweep_seconds=deferred_sweep,
        tracer_provider=tracer_provider,
        secrets=secrets,
    )
    # SIGTERM and SIGINT stop the platform cleanly (workers, engine, backend) and the
    # process exits 0; uvicorn's own handling would re-raise the signal after serving and
    # kill the process before the platform is stopped.
    stopping = threading.Event()
    servers: list[uvicorn.Server] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()
        for running in servers:
            running.should_exit = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        app = platform.start()
        platform.register_examples()
        server = _DevServer(uvicorn_config(app, host=host, port=port, log_level="warning"))
        servers.append(server)
        if with_workers and not stopping.is_set():
            platform.start_workers()
        settle_heap(gc_tuning)
        print(platform.banner(), flush=True)
        if not stopping.is_set():
            server.run()
    finally:
        platform.stop()
        if tracer_provider is not None:
            tracer_provider.shutdown()  # exports the spans still batched
        print("Stepway stopped.", flush=True)


class _DevServer(uvicorn.Server):
    """uvicorn without its signal handling: :func:`serve` handles SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
