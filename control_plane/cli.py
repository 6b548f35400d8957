"""The `stepway` command line."""

from __future__ import annotations

import typer

from control_plane import cli_apply, cli_runs, cli_validate

app = typer.Typer(
    name="stepway",
    help="Stepway: Conductor-shaped workflows on Durable Task.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def dev() -> None:
    """Run the whole platform on this machine (embedded backend, engine, control plane)."""
    typer.echo("stepway dev: the embedded platform is not assembled yet (issue 3).", err=True)
    raise typer.Exit(code=1)


app.command("validate")(cli_validate.validate)
app.command("apply")(cli_apply.apply)
for _command in (cli_runs.run, cli_runs.status, cli_runs.workers, cli_runs.runs):
    app.command()(_command)

if __name__ == "__main__":
    app()
