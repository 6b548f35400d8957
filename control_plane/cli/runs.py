"""``stepway run | status | complete | workers | runs | logs``: talk to the control plane
over HTTP. Times are shown in this machine's local time, relative when recent; every
read command takes ``--output json`` for scripts (the API's JSON)."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from control_plane.cli.present import (
    OutputFormat,
    human_time,
    print_json,
    short,
    table,
    wants_json,
)
from control_plane.durations import human_duration

DEFAULT_SERVER = "http://127.0.0.1:8080"
FAILED_TASK = {"FAILED", "FAILED_WITH_TERMINAL_ERROR", "TIMED_OUT", "CANCELED"}
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


def _now() -> int:
    return int(time.time() * 1000)


def _epoch_ms(text: str | None, default: int = 0) -> int:
    """A search result's time (WorkflowSummary's UTC text) as epoch ms; ``default``
    when there is none (``endTime`` of a run still going)."""
    if not text:
        return default
    return round(datetime.fromisoformat(text).timestamp() * 1000)


def failed_tasks(wf: dict[str, Any]) -> list[dict[str, Any]]:
    """The tasks a finished run names as failed, else those that ended failed."""
    tasks = wf.get("tasks") or []
    named = set(wf.get("failedReferenceTaskNames") or [])
    found = [t for t in tasks if t["referenceTaskName"] in named]
    return found or [t for t in tasks if t["status"] in FAILED_TASK]


def _outcome(wf: dict[str, Any]) -> dict[str, Any]:
    """What ``run --wait`` prints at the end (JSON): status, output, and for a run that
    did not complete, its reason and failed tasks."""
    result: dict[str, Any] = {
        "workflowId": wf["workflowId"],
        "status": wf["status"],
        "output": wf.get("output") or {},
    }
    if wf["status"] != "COMPLETED":
        result["reasonForIncompletion"] = wf.get("reasonForIncompletion")
        result["failedTasks"] = [
            {
                "referenceTaskName": t["referenceTaskName"],
                "taskType": t["taskType"],
                "status": t["status"],
                "reasonForIncompletion": t.get("reasonForIncompletion"),
            }
            for t in failed_tasks(wf)
        ]
    return result


def _explain(wf: dict[str, Any]) -> None:
    """On stderr: why a run did not complete, and which task failed."""
    typer.echo(f"run {wf['workflowId']} ended {wf['status']}", err=True)
    if wf.get("reasonForIncompletion"):
        typer.echo(f"  reason: {wf['reasonForIncompletion']}", err=True)
    for t in failed_tasks(wf):
        why = f": {t['reasonForIncompletion']}" if t.get("reasonForIncompletion") else ""
        typer.echo(
            f"  failed task: {t['referenceTaskName']} ({t['taskType']}) {t['status']}{why}",
            err=True,
        )


def _progress(wf: dict[str, Any], seen: dict[str, str], started: float) -> None:
    """On stderr: one line per task that changed status since the last look."""
    for t in sorted(wf.get("tasks") or [], key=lambda t: t.get("scheduledTime") or 0):
        key = t["taskId"]
        if seen.get(key) == t["status"]:
            continue
        seen[key] = t["status"]
        took = ""
        if t["status"] in TASK_TERMINAL and t.get("startTime") and t.get("endTime"):
            took = f" in {human_duration(t['endTime'] - t['startTime'])}"
        attempt = f" (attempt {t['attempt']})" if t.get("attempt", 1) > 1 else ""
        typer.echo(
            f"[{time.monotonic() - started:6.1f}s] {t['referenceTaskName']}: "
            f"{t['status']}{attempt}{took}",
            err=True,
        )


def run(
    name: Annotated[str, typer.Argument(help="Workflow definition name.")],
    input: Annotated[str, typer.Option("--input", help="JSON, or @file.")] = "{}",
    version: Annotated[int | None, typer.Option("--version")] = None,
    correlation_id: Annotated[str | None, typer.Option("--correlation-id")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the run ends.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="With --wait: no progress lines.")
    ] = False,
    output: OutputFormat = "text",
    server: Server = None,
) -> None:
    """Start a run; print its workflowId (with --wait: progress, then the outcome).

    With --wait, each task's progress goes to stderr, then the final status and output are
    printed (JSON); a run that does not complete also prints its reason and failed task,
    and the command exits 1. --output json prints the whole run, tasks included."""
    as_json = wants_json(output)
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
        seen: dict[str, str] = {}
        started = time.monotonic()
        while True:
            wf = check(c.get(f"/api/workflow/{workflow_id}", params={"includeTasks": True})).json()
            if not quiet:
                _progress(wf, seen, started)
            if wf["status"] in TERMINAL:
                print_json(wf if as_json else _outcome(wf))
                if wf["status"] != "COMPLETED":
                    _explain(wf)
                    raise typer.Exit(code=1)
                return
            _announce_human_tasks(wf, announced)
            time.sleep(0.5)


def _announce_human_tasks(wf: dict[str, Any], announced: set[str]) -> None:
    """Tell the person waiting (on stderr, once per task) which HUMAN task the run waits
    for and how to complete it."""
    workflow_id = wf["workflowId"]
    for t in wf.get("tasks") or []:
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
    workflow_id: Annotated[str, typer.Argument(metavar="ID")],
    output: OutputFormat = "text",
    server: Server = None,
) -> None:
    """Show a run with its tasks (a waiting HUMAN task says how to complete it)."""
    as_json = wants_json(output)
    with client(server) as c:
        wf = check(c.get(f"/api/workflow/{workflow_id}")).json()
    if as_json:
        print_json(wf)
        return
    now = _now()
    end = wf.get("endTime") or (now if wf["status"] not in TERMINAL else None)
    typer.echo(f"{wf['workflowId']}  {wf['workflowName']} v{wf['workflowVersion']}  {wf['status']}")
    took = human_duration(end - wf["createTime"]) if end else "-"
    line = f"  started {human_time(wf.get('createTime'), now)}, {took}"
    if wf.get("correlationId"):
        line += f", correlation id {wf['correlationId']}"
    typer.echo(line)
    if wf.get("parentWorkflowId"):
        typer.echo(f"  parent run: {wf['parentWorkflowId']}")
    if wf.get("reasonForIncompletion"):
        typer.echo(f"  reason: {wf['reasonForIncompletion']}")
    if wf["status"] in TERMINAL and wf["status"] != "COMPLETED":
        for t in failed_tasks(wf):
            typer.echo(f"  failed task: {t['referenceTaskName']} ({t['taskType']}) {t['status']}")
    # scheduling order (rows of some task kinds carry no sequence number)
    tasks = sorted(wf.get("tasks") or [], key=lambda t: t.get("scheduledTime") or 0)
    waiting = [t for t in tasks if t["taskType"] == "HUMAN" and t["status"] not in TASK_TERMINAL]
    if tasks:
        rows = []
        for t in tasks:
            ran = (
                human_duration((t.get("endTime") or now) - t["startTime"])
                if t.get("startTime")
                else "-"
            )
            rows.append(
                [
                    t["referenceTaskName"],
                    t["taskType"],
                    t["status"],
                    str(t["attempt"]),
                    human_time(t.get("scheduledTime"), now),
                    ran,
                    t.get("workerId") or "",
                    short(t.get("reasonForIncompletion"), 50),
                ]
            )
        typer.echo("")
        body = table(
            ["TASK", "TYPE", "STATUS", "ATTEMPT", "SCHEDULED", "RAN", "WORKER", "REASON"], rows
        )
        typer.echo("\n".join("  " + line for line in body.splitlines()))
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
        details = {
            k: v
            for k, v in (t.get("inputData") or {}).items()
            if k not in ("instructions", "instructionsText")
        }
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


def workers(output: OutputFormat = "text", server: Server = None) -> None:
    """Poll data and queue depth per task type; warns about types nobody polled in 10 s."""
    as_json = wants_json(output)
    with client(server) as c:
        types = [d["name"] for d in check(c.get("/api/metadata/taskdefs")).json()]
        polls = check(c.get("/api/tasks/queue/polldata/all")).json()
        sizes = (
            check(c.get("/api/tasks/queue/sizes", params={"taskType": types})).json()
            if types
            else {}
        )
    now = _now()
    report = []
    for task_type in sorted(set(types) | {p["queueName"] for p in polls}):
        mine = [p for p in polls if p["queueName"] == task_type]
        last = max((p["lastPollTime"] for p in mine), default=None)
        report.append(
            {
                "taskType": task_type,
                "pending": sizes.get(task_type, 0),
                "workers": mine,
                "lastPollTime": last,
                "activeWorker": last is not None and now - last <= 10_000,
            }
        )
    if as_json:
        print_json(report)
        return
    rows = [
        [
            r["taskType"],
            str(r["pending"]),
            str(len(r["workers"])),
            "never" if r["lastPollTime"] is None else human_time(r["lastPollTime"], now),
            "" if r["activeWorker"] else "WARNING: no active worker",
        ]
        for r in report
    ]
    typer.echo(table(["TYPE", "PENDING", "WORKERS", "LAST POLL", ""], rows))


def runs(
    status: Annotated[str | None, typer.Option("--status")] = None,
    name: Annotated[str | None, typer.Option("--name")] = None,
    correlation_id: Annotated[str | None, typer.Option("--correlation-id")] = None,
    size: Annotated[int, typer.Option("--size")] = 20,
    output: OutputFormat = "text",
    server: Server = None,
) -> None:
    """List recent runs, newest first."""
    as_json = wants_json(output)
    params: dict[str, Any] = {"size": size}
    if status:
        params["status"] = status
    if name:
        params["workflowType"] = name
    if correlation_id:
        params["correlationId"] = correlation_id
    with client(server) as c:
        found = check(c.get("/api/workflow/search", params=params)).json()
    if as_json:
        print_json(found)
        return
    now = _now()
    rows = [
        [
            r["workflowId"],
            f"{r['workflowType']} v{r['version']}",
            r["status"],
            human_time(_epoch_ms(r["startTime"]), now),
            human_duration(_epoch_ms(r["endTime"] or None, now) - _epoch_ms(r["startTime"])),
            short(r.get("reasonForIncompletion"), 50),
        ]
        for r in found["results"]
    ]
    if rows:
        typer.echo(table(["RUN", "DEFINITION", "STATUS", "STARTED", "DURATION", "REASON"], rows))
    typer.echo(f"({found['totalHits']} total)")


def logs(
    workflow_id: Annotated[str, typer.Argument(metavar="WORKFLOW_ID")],
    task_ref: Annotated[
        str | None, typer.Argument(metavar="[TASK_REF]", help="Only this task's logs.")
    ] = None,
    output: OutputFormat = "text",
    server: Server = None,
) -> None:
    """Log lines the workers posted for the tasks of a run (or of one task)."""
    as_json = wants_json(output)
    with client(server) as c:
        wf = check(c.get(f"/api/workflow/{workflow_id}")).json()
        tasks = sorted(wf.get("tasks") or [], key=lambda t: t.get("scheduledTime") or 0)
        if task_ref is not None:
            tasks = [t for t in tasks if t["referenceTaskName"] == task_ref]
            if not tasks:
                typer.echo(f"run {workflow_id} has no task {task_ref!r}", err=True)
                raise typer.Exit(code=1)
        entries = []
        for t in tasks:
            for entry in check(c.get(f"/api/tasks/{t['taskId']}/log")).json():
                entries.append({**entry, "referenceTaskName": t["referenceTaskName"]})
    entries.sort(key=lambda e: e.get("createdTime") or 0)
    if as_json:
        print_json(entries)
        return
    if not entries:
        typer.echo("(no log lines)")
        return
    now = _now()
    for e in entries:
        typer.echo(f"{human_time(e.get('createdTime'), now)}  {e['referenceTaskName']}  {e['log']}")
