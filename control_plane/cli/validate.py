"""``stepway validate PATH...``: the command. The checks live in
:mod:`control_plane.cli.validate_files`, imported when the command runs so that every other
``stepway`` command starts without loading the engine's validation stack."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def validate(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...",
            help="Definition files and folders (folders are searched for *.json).",
        ),
    ],
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog",
            help="Worker catalog folder (workers/<area>/worker.yaml). Default: ./workers.",
        ),
    ] = None,
    no_coverage: Annotated[
        bool,
        typer.Option(
            "--no-coverage",
            help="Skip the check that every WORKER type has a task definition and a worker.",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Fail on warnings too (references Conductor accepts that read null).",
        ),
    ] = False,
) -> None:
    """Validate workflow and task definition files offline; print every problem.

    Exits 1 when there is an error (what registration refuses), or with --strict any
    warning; warnings alone are printed and exit 0."""
    from control_plane.cli.validate_files import run_validation

    issues = run_validation(paths, catalog, coverage=not no_coverage)
    for issue in issues:
        typer.echo(str(issue))
    if any(issue.is_error or strict for issue in issues):
        raise typer.Exit(code=1)
