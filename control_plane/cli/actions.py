"""``stepway terminate | pause | resume | retry | restart | rerun | skip``: steer a run
through the workflow API's Conductor paths (operator role)."""

from __future__ import annotations

from typing import Annotated, Any

import httpx
import typer

from control_plane.cli.runs import Server, _input, check, client

RunId = Annotated[str, typer.Argument(metavar="WORKFLOW_ID")]


def _send(response: httpx.Response, what: str) -> httpx.Response:
    """A route the server does not have says so, instead of a bare 404/405."""
    if response.status_code in (404, 405):
        try:
            message = str(response.json().get("message", ""))
        except ValueError:
            message = response.text
        if message in ("Not Found", "Method Not Allowed"):
            typer.echo(f"error: this control plane does not support {what} yet", err=True)
            raise typer.Exit(code=1)
    return check(response)


def terminate(
    workflow_id: RunId,
    reason: Annotated[str | None, typer.Option("--reason", help="Why it is ended.")] = None,
    server: Server = None,
) -> None:
    """End a running or paused run as TERMINATED (DELETE /api/workflow/{id})."""
    params = {"reason": reason} if reason else {}
    with client(server) as c:
        _send(c.delete(f"/api/workflow/{workflow_id}", params=params), "terminate")
    typer.echo(f"terminated {workflow_id}")


def pause(workflow_id: RunId, server: Server = None) -> None:
    """Pause a run: nothing new is scheduled until it is resumed."""
    with client(server) as c:
        _send(c.put(f"/api/workflow/{workflow_id}/pause"), "pause")
    typer.echo(f"paused {workflow_id}")


def resume(workflow_id: RunId, server: Server = None) -> None:
    """Resume a paused run."""
    with client(server) as c:
        _send(c.put(f"/api/workflow/{workflow_id}/resume"), "resume")
    typer.echo(f"resumed {workflow_id}")


def retry(
    workflow_id: RunId,
    resume_subworkflow_tasks: Annotated[
        bool,
        typer.Option(
            "--resume-subworkflow-tasks",
            help="Retry the failed child run in place (its parents wait for it again) "
            "instead of starting a new child.",
        ),
    ] = False,
    server: Server = None,
) -> None:
    """Retry a failed, timed out or terminated run (POST /api/workflow/{id}/retry)."""
    params = {"resumeSubworkflowTasks": "true"} if resume_subworkflow_tasks else {}
    with client(server) as c:
        _send(c.post(f"/api/workflow/{workflow_id}/retry", params=params), "retry")
    typer.echo(f"retrying {workflow_id}")


def restart(
    workflow_id: RunId,
    use_latest_definitions: Annotated[
        bool,
        typer.Option("--use-latest-definitions", help="Run the latest definition version."),
    ] = False,
    server: Server = None,
) -> None:
    """Run a finished run again from the start with the same input."""
    params = {"useLatestDefinitions": "true"} if use_latest_definitions else {}
    with client(server) as c:
        _send(c.post(f"/api/workflow/{workflow_id}/restart", params=params), "restart")
    typer.echo(f"restarted {workflow_id}")


def rerun(
    workflow_id: RunId,
    from_task: Annotated[
        str | None,
        typer.Option("--from-task", help="Task reference name (or task id) to rerun from."),
    ] = None,
    task_input: Annotated[
        str | None, typer.Option("--task-input", help="New input of that task: JSON or @file.")
    ] = None,
    workflow_input: Annotated[
        str | None, typer.Option("--workflow-input", help="New run input: JSON or @file.")
    ] = None,
    server: Server = None,
) -> None:
    """Run a finished run again from a task (POST /api/workflow/{id}/rerun)."""
    body: dict[str, Any] = {"reRunFromWorkflowId": workflow_id}
    if task_input is not None:
        body["taskInput"] = _input(task_input, "--task-input")
    if workflow_input is not None:
        body["workflowInput"] = _input(workflow_input, "--workflow-input")
    with client(server) as c:
        if from_task is not None:
            wf = check(c.get(f"/api/workflow/{workflow_id}")).json()
            tasks = wf.get("tasks") or []
            matching = [t for t in tasks if from_task in (t["referenceTaskName"], t["taskId"])]
            if not matching:
                typer.echo(f"run {workflow_id} has no task {from_task!r}", err=True)
                raise typer.Exit(code=1)
            body["reRunFromTaskId"] = matching[-1]["taskId"]
        new_id = _send(c.post(f"/api/workflow/{workflow_id}/rerun", json=body), "rerun").text
    typer.echo(new_id or workflow_id)


def skip(
    workflow_id: RunId,
    task_ref: Annotated[str, typer.Argument(metavar="TASK_REF")],
    task_output: Annotated[
        str | None, typer.Option("--task-output", help="Output to record: JSON or @file.")
    ] = None,
    server: Server = None,
) -> None:
    """Skip a task of a running run (PUT /api/workflow/{id}/skiptask/{ref})."""
    body: dict[str, Any] = {}
    if task_output is not None:
        body["taskOutput"] = _input(task_output, "--task-output")
    with client(server) as c:
        _send(c.put(f"/api/workflow/{workflow_id}/skiptask/{task_ref}", json=body), "skip")
    typer.echo(f"skipped {task_ref} of {workflow_id}")
