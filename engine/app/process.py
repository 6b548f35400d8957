"""The engine process of a deployed environment (``stepway engine``).

:func:`run_engine` builds the engine services from an :class:`EngineConfig`, starts a
durabletask worker that hosts (and, through work item filtering, receives) only its
role's work (and, hosting the activities, the sweep of deferred messages:
engine/runtime/deferred_sweep.py), and blocks until SIGTERM or SIGINT; then it stops
taking work, lets the work items in progress finish, and returns. Its tracer provider
(if the configuration names an exporter, engine/app/telemetry.py) is built here and
flushed at the end.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from engine.adapters.backend.connect import start_worker, stop_worker
from engine.app.azure_services import build_credential, build_services, telemetry_credential
from engine.app.config import EngineConfig
from engine.app.garbage_collection import settle_heap
from engine.app.host import engine_concurrency, make_engine_worker
from engine.app.telemetry import build_tracer_provider

__all__ = ["run_engine"]

log = logging.getLogger("stepway.engine")


def run_engine(config: EngineConfig, stop: threading.Event | None = None) -> None:
    """Run an engine process until ``stop`` is set (by SIGTERM/SIGINT when ``stop`` is
    None and this is the main thread)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():

        def _on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("received %s: stopping", signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)

    credential = build_credential(config.data)
    tracer_provider = build_tracer_provider(
        config.telemetry, telemetry_credential(config.data, credential)
    )
    services = build_services(config, credential=credential, tracer_provider=tracer_provider)
    if services.activity_deps.evaluators is not None:
        services.activity_deps.evaluators.start()
    worker = make_engine_worker(
        config.backend,
        services,
        config.role,
        concurrency=engine_concurrency(
            config.max_concurrent_activities, config.max_concurrent_work_items
        ),
        sessions=config.orchestration_sessions,
    )
    start_worker(worker)
    if config.role != "orchestrator":
        # a process that holds the queue settles what a queue outage left deferred
        services.start_sweep(config.deferred_sweep_seconds)
    settle_heap(config.gc_tuning)
    target = (
        config.backend.address if config.backend.kind == "embedded" else config.backend.endpoint
    )
    log.warning("stepway engine started: role %s, backend %s", config.role, target)
    print(f"stepway engine ready (role {config.role})", flush=True)
    try:
        stop.wait()
    finally:
        log.warning("stepway engine stopping: finishing the work items in progress")
        stop_worker(worker)
        services.close()
        store_close = getattr(services.run_store, "close", None)
        if callable(store_close):
            store_close()
        if tracer_provider is not None:
            tracer_provider.shutdown()  # exports the spans still batched
        log.warning("stepway engine stopped")
