"""``stepway run | status | complete | workers | runs``: talk to the control plane over HTTP."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

DEFAULT_SERVER = "http://127.0.0.1:8080"
TERMINAL = {"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"}
TASK_TERMINAL = {
    "COMPLETED",
    "COMPLETED_WITH_ERRORS",
    "FAILED",
    "FAILED_WITH_TERMINAL_ERROR",
    "TIMED_OUT",
    "CANCELED",
    "SKIPPED",
}
#: Where ``stepway dev`` and ``stepway validate`` find the text a HUMAN task's
#: ``inputParameters.instructions`` names.
INSTRUCTIONS_DIR = "definitions/instructions"

Server = Annotated[
    str | None,
    typer.Option(
        "--server", help=f"Control plane URL (default $STEPWAY_SERVER_URL or {DEFAULT_SERVER})."
    ),
]


def server_url(server: str | None) -> str:
    return (server or os.environ.get("STEPWAY_SERVER_URL") or DEFAULT_SERVER).rstrip("/")


def client(server: str | None) -> httpx.Client:
    headers = {}
    token = os.environ.get("STEPWAY_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=server_url(server), headers=headers, timeout=30)


def check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        try:
            body = response.json()
            message = body.get("message", response.text)
            for err in body.get("validationErrors") or []:
                message += f"\n  {err['path']}: {err['message']}"
        except ValueError:
            message = response.text
        typer.echo(f"error {response.status_code}: {message}", err=True)
        raise typer.Exit(code=1)
    return response


def _input(value: str, option: str = "--input") -> Any:
    try:
        text = Path(value[1:]).read_text(encoding="utf-8") if value.startswith("@") else value
    except OSError as exc:
        typer.echo(f"{option}: cannot read {value[1:]}: {exc.strerror or exc}", err=True)
        raise typer.Exit(code=2) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        typer.echo(f"{option} is not valid JSON: {exc}", err=True)
        raise typer.Exit(code=2) from None


def run(
    name: Annotated[str, typer.Argument(help="Workflow definition name.")],
    input: Annotated[str, typer.Option("--input", help="JSON, or @file.")] = "{}",
    version: Annotated[int | None, typer.Option("--version")] = None,
    correlation_id: Annotated[str | None, typer.Option("--correlation-id")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the run ends.")] = False,
    server: Server = None,
) -> None:
    """Start a run; print its workflowId (and, with --wait, its final status and output)."""
    body = {
        "name": name,
        "input": _input(input),
        "version": version,
        "correlationId": correlation_id,
    }
    with client(server) as c:
        workflow_id = check(c.post("/api/workflow", json=body)).text
        typer.echo(workflow_id)
        if not wait:
            return
        announced: set[str] = set()
        while True:
            status = check(c.get(f"/api/workflow/{workflow_id}/status")).json()
            if status["status"] in TERMINAL:
                typer.echo(json.dumps(status, indent=2))
                if status["status"] != "COMPLETED":
                    raise typer.Exit(code=1)
                return
            _announce_human_tasks(c, workflow_id, announced)
            time.sleep(0.5)


def _announce_human_tasks(c: httpx.Client, workflow_id: str, announced: set[str]) -> None:
    """Tell the person waiting (on stderr, once per task) which HUMAN task the run waits
    for and how to complete it."""
    response = c.get(f"/api/workflow/{workflow_id}")
    if response.status_code != 200:
        return
    for t in response.json().get("tasks") or []:
        if t["taskType"] != "HUMAN" or t["status"] in TASK_TERMINAL or t["taskId"] in announced:
            continue
        announced.add(t["taskId"])
        instructions = (t.get("inputData") or {}).get("instructions")
        where = f" (instructions: {INSTRUCTIONS_DIR}/{instructions}.md)" if instructions else ""
        typer.echo(
            f"waiting for HUMAN task {t['referenceTaskName']}{where}; complete it with: "
            f"stepway complete {workflow_id} {t['referenceTaskName']} --output '{{...}}'",
            err=True,
        )


def status(
    workflow_id: Annotated[str, typer.Argument(metavar="ID")], server: Server = None
) -> None:
    """Show a run with its tasks; a HUMAN task that waits says what to read and how to
    complete it."""
    with client(server) as c:
        wf = check(c.get(f"/api/workflow/{workflow_id}")).json()
    typer.echo(f"{wf['workflowId']}  {wf['workflowName']} v{wf['workflowVersion']}  {wf['status']}")
    if wf.get("reasonForIncompletion"):
        typer.echo(f"  reason: {wf['reasonForIncompletion']}")
    # scheduling order (rows of some task kinds carry no sequence number)
    tasks = sorted(wf.get("tasks") or [], key=lambda t: t.get("scheduledTime") or 0)
    waiting = [t for t in tasks if t["taskType"] == "HUMAN" and t["status"] not in TASK_TERMINAL]
    for t in tasks:
        typer.echo(
            f"  {t['referenceTaskName']:<30} {t['taskType']:<20} {t['status']:<12} "
            f"attempt {t['attempt']}"
        )
    if wf["status"] in TERMINAL:
        if wf.get("output"):
            typer.echo("  output: " + json.dumps(wf["output"]))
        return
    for t in waiting:
        typer.echo("")
        typer.echo(f"  waiting for a person: {t['referenceTaskName']}")
        instructions = (t.get("inputData") or {}).get("instructions")
        if isinstance(instructions, str) and instructions:
            typer.echo(f"    instructions: {instructions} ({INSTRUCTIONS_DIR}/{instructions}.md)")
        details = {k: v for k, v in (t.get("inputData") or {}).items() if k != "instructions"}
        if details:
            typer.echo("    input: " + json.dumps(details))
        typer.echo(
            f"    complete: stepway complete {wf['workflowId']} {t['referenceTaskName']} "
            "--output '{...}'  (--status FAILED fails the task)"
        )


def complete(
    workflow_id: Annotated[str, typer.Argument(metavar="WORKFLOW_ID")],
    task_ref: Annotated[
        str, typer.Argument(metavar="TASK_REF", help="taskReferenceName, e.g. approval.")
    ],
    output: Annotated[
        str, typer.Option("--output", help="The task's output: JSON object, or @file.")
    ] = "{}",
    status: Annotated[
        str, typer.Option("--status", help="COMPLETED or FAILED.", case_sensitive=False)
    ] = "COMPLETED",
    server: Server = None,
) -> None:
    """Complete (or fail) a waiting task by reference name, such as a HUMAN approval.

    Posts the output to POST /api/tasks/{workflowId}/{taskRef}/{status} (operator role).
    """
    result = status.upper()
    if result not in ("COMPLETED", "FAILED"):
        typer.echo("--status must be COMPLETED or FAILED", err=True)
        raise typer.Exit(code=2)
    body = _input(output, "--output")
    if not isinstance(body, dict):
        typer.echo("--output must be a JSON object", err=True)
        raise typer.Exit(code=2)
    with client(server) as c:
        task_id = check(c.post(f"/api/tasks/{workflow_id}/{task_ref}/{result}", json=body)).text
    typer.echo(f"{task_ref} {result} (task {task_id})")


def workers(server: Server = None) -> None:
    """Poll data and queue depth per task type; warns about types nobody polled in 10 s."""
    with client(server) as c:
        types = [d["name"] for d in check(c.get("/api/metadata/taskdefs")).json()]
        polls = check(c.get("/api/tasks/queue/polldata/all")).json()
        sizes = (
            check(c.get("/api/tasks/queue/sizes", params={"taskType": types})).json()
            if types
            else {}
        )
    now = int(time.time() * 1000)
    typer.echo(f"{'TYPE':<30} {'PENDING':>7}  {'WORKERS':>7}  LAST POLL")
    for task_type in sorted(set(types) | {p["queueName"] for p in polls}):
        mine = [p for p in polls if p["queueName"] == task_type]
        last = max((p["lastPollTime"] for p in mine), default=None)
        ago = "never" if last is None else f"{(now - last) / 1000:.1f} s ago"
        line = f"{task_type:<30} {sizes.get(task_type, 0):>7}  {len(mine):>7}  {ago}"
        if last is None or now - last > 10_000:
            line += "  WARNING: no active worker"
        typer.echo(line)


def runs(
    status: Annotated[str | None, typer.Option("--status")] = None,
    name: Annotated[str | None, typer.Option("--name")] = None,
    size: Annotated[int, typer.Option("--size")] = 20,
    server: Server = None,
) -> None:
    """List recent runs, newest first."""
    params: dict[str, Any] = {"size": size}
    if status:
        params["status"] = status
    if name:
        params["workflowType"] = name
    with client(server) as c:
        found = check(c.get("/api/workflow/search", params=params)).json()
    for r in found["results"]:
        typer.echo(
            f"{r['workflowId']}  {r['workflowType']:<25} v{r['version']:<3} "
            f"{r['status']:<10} {r['startTime']}"
        )
    typer.echo(f"({found['totalHits']} total)")
