"""``stepway apply PATH... [--dry-run]``: register task definitions, then workflows.

Goes through the metadata API (``PUT``-style, idempotent). ``--dry-run`` asks the
server for the plan (``dryRun=true``) and prints what would be created, updated or
left unchanged, queues included, without writing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from control_plane.cli.runs import Server, check, client


def apply(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH...")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan only.")] = False,
    server: Server = None,
) -> None:
    """Register task definitions and workflow definitions from files."""
    from engine.language.loading import load_paths

    loaded = load_paths(paths)
    for issue in loaded.issues:
        typer.echo(str(issue), err=True)
    if loaded.issues:
        raise typer.Exit(code=1)
    taskdefs = [i.data for i in loaded.items if i.kind == "taskdef"]
    workflows = [i.data for i in loaded.items if i.kind == "workflow"]
    params = {"dryRun": "true"} if dry_run else {}
    prefix = "would " if dry_run else ""
    with client(server) as c:
        if taskdefs:
            report: dict[str, Any] = check(
                c.post("/api/metadata/taskdefs", json=taskdefs, params=params)
            ).json()
            for td in report["taskDefs"]:
                typer.echo(f"taskdef {td['name']}: {prefix}{td['action']}")
                for q in td["queues"]:
                    typer.echo(f"  queue {q['name']}: {prefix}{q['action']}")
        if workflows:
            if dry_run and taskdefs:
                typer.echo("(workflows are checked against the task definitions registered now)")
            report = check(c.put("/api/metadata/workflow", json=workflows, params=params)).json()
            for wf in report["workflows"]:
                typer.echo(f"workflow {wf['name']} v{wf['version']}: {prefix}{wf['action']}")
