"""``stepway engine`` and ``stepway serve``: the processes of a deployed environment,
configured from environment variables (docs/configuration.md).

``stepway engine --role orchestrator|activities|all`` runs
:func:`engine.app.process.run_engine`; ``stepway serve`` runs
:func:`control_plane.cli.serve.run`. A bad configuration exits 2 with every bad variable
named.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass


__all__ = ["engine", "serve"]

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
    from engine.app.config import ConfigError, EngineConfig
    from engine.app.process import run_engine

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
    from control_plane.cli.serve import ServeConfig, run
    from engine.app.config import ConfigError

    _configure_logging()
    try:
        config = ServeConfig.from_env(host=host, port=port)
    except ConfigError as exc:
        typer.echo(f"stepway serve: {exc}", err=True)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    run(config)
