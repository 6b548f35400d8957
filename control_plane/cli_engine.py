"""``stepway engine`` and ``stepway serve``: the processes of a deployed environment,
configured from environment variables (docs/configuration.md).

``stepway engine --role orchestrator|activities|all`` builds the engine services from the
environment, installs them, starts a durabletask worker that hosts (and, through work
item filtering, receives) only its role's work, and blocks until SIGTERM or SIGINT; then
it stops taking work, lets the work items in progress finish, and exits 0. A bad
configuration exits 2 with every bad variable named.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from engine.config import EngineConfig


__all__ = ["engine", "run_engine", "serve"]

log = logging.getLogger("stepway.engine")

CONFIG_ERROR_EXIT = 2


def _configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    for name in ("durabletask-worker", "durabletask-client", "durabletask"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("azure").setLevel(logging.WARNING)


def run_engine(config: EngineConfig, stop: threading.Event | None = None) -> None:
    """Run an engine process until ``stop`` is set (by SIGTERM/SIGINT when ``stop`` is
    None and this is the main thread)."""
    from durabletask.worker import ConcurrencyOptions

    from engine.azure_services import build_services
    from engine.backend.connect import start_worker, stop_worker
    from engine.host import install, make_engine_worker

    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():

        def _on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("received %s: stopping", signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)

    services = build_services(config)
    install(services)
    concurrency = None
    if config.max_concurrent_work_items is not None:
        n = config.max_concurrent_work_items
        concurrency = ConcurrencyOptions(
            maximum_concurrent_activity_work_items=n,
            maximum_concurrent_orchestration_work_items=n,
        )
    worker = make_engine_worker(config.backend, config.role, concurrency=concurrency)
    start_worker(worker)
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
        install(None)
        store_close = getattr(services.run_store, "close", None)
        if callable(store_close):
            store_close()
        log.warning("stepway engine stopped")


def engine(
    role: Annotated[
        str | None,
        typer.Option(
            "--role",
            help="orchestrator | activities | all (default: $STEPWAY_ENGINE_ROLE).",
        ),
    ] = None,
) -> None:
    """Run an engine process configured from the environment (deployed shape)."""
    from engine.config import ConfigError, EngineConfig

    _configure_logging()
    try:
        config = EngineConfig.from_env(role=role)
    except ConfigError as exc:
        typer.echo(f"stepway engine: {exc}", err=True)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    run_engine(config)


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on (default: $STEPWAY_HOST or 0.0.0.0).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: $STEPWAY_PORT or 8080).")] = None,
) -> None:
    """Run the control plane configured from the environment (deployed shape)."""
    from control_plane.serve import ServeConfig, run
    from engine.config import ConfigError

    _configure_logging()
    try:
        config = ServeConfig.from_env(host=host, port=port)
    except ConfigError as exc:
        typer.echo(f"stepway serve: {exc}", err=True)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    run(config)
