"""An engine process: services built from settings, and the interpreter and its activities
bound to them and registered on a durabletask worker for a role (``orchestrator`` |
``activities`` | ``all``).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from durabletask.worker import ConcurrencyOptions, TaskHubGrpcWorker
from opentelemetry.trace import NoOpTracerProvider, TracerProvider

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import Role, make_client, make_worker, register
from engine.adapters.backend.sessions import DEFAULT_SESSION_CAPACITY
from engine.adapters.payload_local import LocalPayloadStore
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_store_sql import SqlRunStore
from engine.ports.payload_store import PayloadLimits
from engine.runtime.activities import RunActivities
from engine.runtime.builtins import ActivityDeps
from engine.runtime.builtins.secrets import Secrets
from engine.runtime.encoded_json import EncodedJsonConverter
from engine.runtime.evaluators import EvaluatorLimits, EvaluatorPool
from engine.runtime.local_steps import LocalSteps
from engine.runtime.registry import activities, orchestrators
from engine.runtime.run_limits import RunLimits
from engine.runtime.services import EngineServices

#: activity work items one engine process runs at once unless configured
#: (``STEPWAY_MAX_CONCURRENT_ACTIVITIES``), each on a thread of its own: Stepway's
#: activities wait on I/O (an HTTP call may wait up to 300 s for its answer, an INLINE for
#: an evaluator process), so their threads mostly wait. Temporal's Python worker runs 100
#: activities at once by default (``max_concurrent_activities``); Durable Functions 10 per
#: core (``maxConcurrentActivityFunctions``), 20 on 2 cores, which a few slow endpoints
#: fill.
DEFAULT_MAX_CONCURRENT_ACTIVITIES = 100


def engine_concurrency(
    activities: int | None = None, work_items: int | None = None
) -> ConcurrencyOptions:
    """How many work items of each kind an engine process runs at once, and the threads
    for them. ``activities``: ``STEPWAY_MAX_CONCURRENT_ACTIVITIES``; ``work_items``:
    ``STEPWAY_MAX_CONCURRENT_WORK_ITEMS`` (both kinds; activities too unless
    ``activities`` is given). Orchestration work items default to durabletask's thread
    count (CPUs + 4): they compute under the GIL and wait only briefly (the run store, an
    evaluator process for a SWITCH script; in role ``all``, half of them at most in a
    quick built-in step, engine/runtime/local_steps.py).

    Each kind gets a pool of exactly as many threads as its limit (the embedded backend's
    direct dispatch, engine/adapters/backend/direct_dispatch.py), so a work item never
    waits for a thread that a work item of the other kind holds; durabletask's own
    dispatch (the Durable Task Scheduler) shares one pool, sized for both limits
    together for the same reason."""
    orchestrations = work_items or (os.cpu_count() or 1) + 4
    activity_items = activities or work_items or DEFAULT_MAX_CONCURRENT_ACTIVITIES
    return ConcurrencyOptions(
        maximum_concurrent_activity_work_items=activity_items,
        maximum_concurrent_orchestration_work_items=orchestrations,
        maximum_thread_pool_workers=activity_items + orchestrations,
    )


@dataclass
class LocalSettings:
    """Where the embedded adapters keep their data (``stepway dev``, tests)."""

    data_dir: Path
    run_store_url: str | None = None
    payload_secret: str = field(default_factory=lambda: secrets.token_hex(32))
    public_url: str = "http://127.0.0.1:8080"
    limits: PayloadLimits = field(default_factory=PayloadLimits)
    evaluator_limits: EvaluatorLimits = field(default_factory=EvaluatorLimits)
    run_limits: RunLimits = field(default_factory=RunLimits)
    #: the secrets an HTTP task's request may carry (engine/runtime/builtins/secrets.py)
    secrets: Secrets = field(default_factory=Secrets)

    @property
    def queue_path(self) -> Path:
        return self.data_dir / "queues.db"

    def store_url(self) -> str:
        return self.run_store_url or f"sqlite:///{self.data_dir / 'runs.db'}"


def build_local_services(
    settings: LocalSettings,
    backend: BackendConfig,
    activity_deps: ActivityDeps | None = None,
    tracer_provider: TracerProvider | None = None,
) -> EngineServices:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = SqlRunStore(settings.store_url())
    queue = SqliteTaskQueue(settings.queue_path)
    payloads = LocalPayloadStore(
        settings.data_dir / "payloads",
        secret=settings.payload_secret,
        base_url=settings.public_url,
        limits=settings.limits,
    )
    deps = activity_deps or ActivityDeps(
        payload_store=payloads,
        payload_threshold_bytes=settings.limits.task_output_threshold,
        evaluators=EvaluatorPool(settings.evaluator_limits),
        secrets=settings.secrets,
    )
    return EngineServices(
        run_store=store,
        queue=queue,
        payloads=payloads,
        payload_limits=settings.limits,
        client_factory=lambda: make_client(backend),
        activity_deps=deps,
        tracer_provider=tracer_provider or NoOpTracerProvider(),
        run_limits=settings.run_limits,
        provisioner=SqliteQueueProvisioner(settings.queue_path),
    )


def make_engine_worker(
    backend: BackendConfig,
    services: EngineServices,
    role: Role = "all",
    *,
    concurrency: ConcurrencyOptions | None = None,
    sessions: int = DEFAULT_SESSION_CAPACITY,
) -> TaskHubGrpcWorker:
    """A durabletask worker (not started) hosting what ``role`` names, bound to
    ``services``, running at once the work items ``concurrency`` allows (default:
    :func:`engine_concurrency`'s defaults). It logs through the standard ``logging``
    tree (``durabletask-worker``), so the process's logging configuration applies
    (durabletask's own default logger ignores it). ``sessions``: live orchestrations
    kept between their work items (engine/adapters/backend/sessions.py)."""
    concurrency = concurrency or engine_concurrency()
    worker = make_worker(
        backend,
        concurrency_options=concurrency,
        # the interpreter's activity inputs are encoded once (engine/runtime/encoded_json.py)
        data_converter=EncodedJsonConverter(),
        session_capacity=sessions,
    )
    # one per process: its caches serve both halves; at most half the orchestration
    # threads in built-in steps done in work items (engine/runtime/local_steps.py)
    orchestration_threads = concurrency.maximum_concurrent_orchestration_work_items
    bound = RunActivities(services, LocalSteps(slots=orchestration_threads // 2))
    hosted = orchestrators(services, hosts_activities=role == "all", bound=bound)
    register(worker, role, hosted, activities(services, bound))
    return worker


__all__ = [
    "DEFAULT_MAX_CONCURRENT_ACTIVITIES",
    "LocalSettings",
    "build_local_services",
    "engine_concurrency",
    "make_engine_worker",
]
