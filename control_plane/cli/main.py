"""The `stepway` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from control_plane.cli import actions as cli_actions
from control_plane.cli import apply as cli_apply
from control_plane.cli import defs as cli_defs
from control_plane.cli import engine as cli_engine
from control_plane.cli import runs as cli_runs
from control_plane.cli import validate as cli_validate

app = typer.Typer(
    name="stepway",
    help="Stepway: Conductor-shaped workflows on Durable Task.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="Port of the control plane.")] = 8080,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where runs, queues and payloads are kept.")
    ] = Path(".stepway"),
    with_workers: Annotated[
        bool, typer.Option("--with-workers", help="Also run the example code-area workers.")
    ] = False,
) -> None:
    """Run the whole platform on this machine (embedded backend, engine, control plane)."""
    from control_plane.cli.dev import serve

    serve(data_dir, host, port, with_workers)


app.command("validate")(cli_validate.validate)
app.command("apply")(cli_apply.apply)
app.command("engine")(cli_engine.engine)
app.command("serve")(cli_engine.serve)
for _command in (
    cli_runs.run,
    cli_runs.status,
    cli_runs.runs,
    cli_runs.logs,
    cli_runs.complete,
    cli_runs.workers,
    cli_actions.terminate,
    cli_actions.pause,
    cli_actions.resume,
    cli_actions.retry,
    cli_actions.restart,
    cli_actions.rerun,
    cli_actions.skip,
):
    app.command()(_command)
app.add_typer(cli_defs.defs_app)
app.add_typer(cli_defs.taskdefs_app)
