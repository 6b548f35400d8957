"""``stepway defs`` and ``stepway taskdefs``: the registered workflow and task definitions
(``list``, the default, and ``show NAME``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from control_plane.cli.present import OutputFormat, print_json, short, table, wants_json
from control_plane.cli.runs import Server, check, client

defs_app = typer.Typer(
    name="defs", help="Workflow definitions: list (default), show NAME.", no_args_is_help=False
)
taskdefs_app = typer.Typer(
    name="taskdefs", help="Task definitions: list (default), show NAME.", no_args_is_help=False
)


def _list_defs(output: str, server: str | None) -> None:
    as_json = wants_json(output)
    with client(server) as c:
        found: list[dict[str, Any]] = check(c.get("/api/metadata/workflow")).json()
    if as_json:
        print_json(found)
        return
    by_name: dict[str, list[dict[str, Any]]] = {}
    for d in found:
        by_name.setdefault(d["name"], []).append(d)
    rows = []
    for name, versions in sorted(by_name.items()):
        versions.sort(key=lambda d: d.get("version", 1))
        latest = versions[-1]
        rows.append(
            [
                name,
                ", ".join(str(d.get("version", 1)) for d in versions),
                str(sum(1 for _ in _walk(latest.get("tasks") or []))),
                short(latest.get("description"), 70),
            ]
        )
    typer.echo(table(["NAME", "VERSIONS", "TASKS", "DESCRIPTION"], rows) if rows else "(none)")


def _walk(tasks: list[dict[str, Any]]) -> Any:
    for t in tasks:
        yield t
        for case in (t.get("decisionCases") or {}).values():
            yield from _walk(case)
        yield from _walk(t.get("defaultCase") or [])
        for branch in t.get("forkTasks") or []:
            yield from _walk(branch)
        yield from _walk(t.get("loopOver") or [])


def _tree(tasks: list[dict[str, Any]], depth: int = 1) -> list[str]:
    """The tasks of a definition as an indented outline."""
    pad = "  " * depth
    lines: list[str] = []
    for t in tasks:
        kind = t.get("type", "WORKER")
        what = f"{kind} {t['name']}" if kind in ("WORKER", "SIMPLE") else kind
        if kind == "SUB_WORKFLOW" and t.get("subWorkflowParam"):
            what += f" -> {t['subWorkflowParam'].get('name')}"
        lines.append(f"{pad}{t['taskReferenceName']}  ({what})")
        for case, nested in (t.get("decisionCases") or {}).items():
            lines.append(f"{pad}  case {case}:")
            lines += _tree(nested, depth + 2)
        if t.get("defaultCase"):
            lines.append(f"{pad}  default:")
            lines += _tree(t["defaultCase"], depth + 2)
        for i, branch in enumerate(t.get("forkTasks") or []):
            lines.append(f"{pad}  branch {i + 1}:")
            lines += _tree(branch, depth + 2)
        if t.get("loopOver"):
            lines.append(f"{pad}  loop while {t.get('loopCondition')}:")
            lines += _tree(t["loopOver"], depth + 2)
    return lines


@defs_app.callback(invoke_without_command=True)
def defs_default(ctx: typer.Context, output: OutputFormat = "text", server: Server = None) -> None:
    """Workflow definitions (every version)."""
    if ctx.invoked_subcommand is None:
        _list_defs(output, server)


@defs_app.command("list")
def defs_list(output: OutputFormat = "text", server: Server = None) -> None:
    """Every workflow definition with its versions."""
    _list_defs(output, server)


@defs_app.command("show")
def defs_show(
    name: str,
    version: Annotated[int | None, typer.Option("--version", help="Default: the latest.")] = None,
    output: OutputFormat = "text",
    server: Server = None,
) -> None:
    """One workflow definition: its tasks as an outline (--output json: the definition)."""
    as_json = wants_json(output)
    params = {"version": version} if version is not None else {}
    with client(server) as c:
        d = check(c.get(f"/api/metadata/workflow/{name}", params=params)).json()
    if as_json:
        print_json(d)
        return
    typer.echo(f"{d['name']} v{d.get('version', 1)}")
    if d.get("description"):
        typer.echo(f"  {d['description']}")
    if d.get("inputParameters"):
        typer.echo("  input: " + ", ".join(d["inputParameters"]))
    typer.echo("  tasks:")
    typer.echo("\n".join(_tree(d.get("tasks") or [], 2)))


def _list_taskdefs(output: str, server: str | None) -> None:
    as_json = wants_json(output)
    with client(server) as c:
        found: list[dict[str, Any]] = check(c.get("/api/metadata/taskdefs")).json()
    if as_json:
        print_json(found)
        return
    rows = [
        [
            d["name"],
            f"{d.get('retryCount', 3)} {d.get('retryLogic', 'FIXED')}",
            f"{d.get('responseTimeoutSeconds', 3600)} s",
            f"{d.get('timeoutSeconds', 0)} s",
            str(d.get("concurrentExecLimit") or "-"),
            short(d.get("description"), 50),
        ]
        for d in sorted(found, key=lambda d: d["name"])
    ]
    headers = ["NAME", "RETRIES", "RESPONSE TIMEOUT", "TIMEOUT", "CONCURRENCY", "DESCRIPTION"]
    typer.echo(table(headers, rows) if rows else "(none)")


@taskdefs_app.callback(invoke_without_command=True)
def taskdefs_default(
    ctx: typer.Context, output: OutputFormat = "text", server: Server = None
) -> None:
    """Task definitions."""
    if ctx.invoked_subcommand is None:
        _list_taskdefs(output, server)


@taskdefs_app.command("list")
def taskdefs_list(output: OutputFormat = "text", server: Server = None) -> None:
    """Every task definition with its retries and timeouts."""
    _list_taskdefs(output, server)


@taskdefs_app.command("show")
def taskdefs_show(name: str, output: OutputFormat = "text", server: Server = None) -> None:
    """One task definition: retries, timeouts, limits (--output json: its JSON)."""
    as_json = wants_json(output)
    with client(server) as c:
        d = check(c.get(f"/api/metadata/taskdefs/{name}")).json()
    if as_json:
        print_json(d)
        return
    fields = [
        ("retries", f"{d.get('retryCount', 3)} ({d.get('retryLogic', 'FIXED')}, "
                    f"{d.get('retryDelaySeconds', 60)} s)"),
        ("timeouts", f"response {d.get('responseTimeoutSeconds', 3600)} s, per attempt "
                     f"{d.get('timeoutSeconds', 0)} s, total {d.get('totalTimeoutSeconds', 0)} s, "
                     f"policy {d.get('timeoutPolicy', 'TIME_OUT_WF')}"),
        ("limits", f"concurrency {d.get('concurrentExecLimit') or '-'}, rate "
                   f"{d.get('rateLimitPerFrequency') or '-'} per "
                   f"{d.get('rateLimitFrequencyInSeconds') or '-'} s"),
    ]  # fmt: skip
    typer.echo(d["name"] + (f"  {d['description']}" if d.get("description") else ""))
    for label, value in fields:
        typer.echo(f"  {label}: {value}")
    for key in ("inputKeys", "outputKeys"):
        if d.get(key):
            typer.echo(f"  {key}: {', '.join(d[key])}")
