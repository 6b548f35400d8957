"""What the console pages read and do, through the control plane's own services.

The pages never touch an adapter to change anything: actions call the same
``WorkflowService`` / ``TaskService`` methods as the API, after the same role checks.
Reads use the services' JSON where it exists and the run store's records where a page
needs what the JSON hides (whether a value is offloaded, leases of earlier attempts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from control_plane.api.errors import ApiError, bad_request, not_found
from control_plane.auth import Principal, require_role
from control_plane.deps import Deps
from control_plane.services.metadata import MetadataService
from control_plane.services.replays import RerunWorkflowRequest, SkipTaskRequest
from control_plane.services.task_results import TaskResultIn, TaskResults
from control_plane.services.workflows import WorkflowService
from engine.language.definitions import TaskStatus, WorkflowDef
from engine.ports.payload_store import PayloadError, resolve
from engine.ports.run_store import RunRecord, TaskRecord

#: run actions of the console -> (label, what it does), in the order shown
RUN_ACTIONS: dict[str, tuple[str, str]] = {
    "pause": ("Pause", "stop scheduling new tasks until resumed"),
    "resume": ("Resume", "continue a paused run"),
    "terminate": ("Terminate", "end the run now as TERMINATED"),
    "retry": ("Retry", "run a failed, timed out or terminated run again"),
    "restart": ("Restart", "run a finished run again from the start with the same input"),
    "rerun": ("Rerun from a task", "run again from the chosen task"),
    "skip": ("Skip a task", "mark a task SKIPPED and go on"),
}


@dataclass
class Console:
    """The control plane's services, as the console pages use them."""

    workflows: WorkflowService
    results: TaskResults
    metadata: MetadataService
    deps: Deps

    @classmethod
    def of(cls, request: Request) -> Console:
        state = request.app.state
        return cls(state.workflow_service, state.task_results, state.metadata_service, state.deps)

    # --- reads ------------------------------------------------------------------------

    def run(self, workflow_id: str) -> RunRecord:
        # status() reconciles a run whose orchestration ended outside the interpreter
        self.workflows.status(workflow_id)
        run = self.deps.run_store.get_run(workflow_id)
        if run is None:
            raise not_found(f"workflow {workflow_id} not found")
        return run

    def definition(self, run: RunRecord) -> WorkflowDef | None:
        """The definition the run executes: its snapshot (taken when it started, so a
        definition overwritten since, or one given inline, is drawn as the run has it),
        else its registration, as the run's JSON has it (``workflowDefinition``)."""
        found = self.workflows.tasks.definitions.of(run)
        if found is None:
            return None
        try:
            return WorkflowDef.model_validate(found.definition)
        except ValueError:
            return None

    def tasks_of(self, workflow_id: str) -> list[TaskRecord]:
        return self.deps.run_store.list_tasks(workflow_id)

    def task(self, workflow_id: str, task_id: str) -> TaskRecord:
        row = self.deps.run_store.get_task(task_id)
        if row is None or row.workflow_id != workflow_id:
            raise not_found(f"run {workflow_id} has no task {task_id}")
        return row

    def load(self, inline: Any, ref: str | None) -> Any:
        """A value that may be offloaded: read from the payload store on demand."""
        if ref is None:
            return inline
        if self.deps.payloads is None:
            raise ApiError(501, "no payload store is configured")
        try:
            return resolve(self.deps.payloads, None, ref)
        except PayloadError as exc:
            raise ApiError(502, f"cannot read {ref}: {exc}") from None

    def instruction(self, name: str) -> str | None:
        record = self.deps.run_store.get_instruction(name)
        return record.text if record is not None else None

    # --- actions ----------------------------------------------------------------------

    def supports(self, action: str) -> bool:
        """Whether the workflow service offers ``action`` (as the API's routes call it)."""
        return action in RUN_ACTIONS and self._action(action) is not None

    def _action(self, action: str) -> Callable[..., Any] | None:
        found = getattr(self.workflows, action, None)
        return found if callable(found) else None

    def act(self, caller: Principal, workflow_id: str, action: str, fields: dict[str, str]) -> str:
        """Perform a run action as the API does (operator role); returns what was done."""
        require_role(caller, "operator")
        call = self._action(action) if action in RUN_ACTIONS else None
        if call is None:
            raise not_found(f"no run action {action!r} on this server")
        if action == "terminate":
            reason = (
                fields.get("reason", "").strip() or f"terminated in the console by {caller.name}"
            )
            call(workflow_id, reason)
        elif action == "rerun":
            task_id = fields.get("taskId", "").strip()
            if not task_id:
                raise bad_request("choose the task to rerun from", "taskId")
            call(
                workflow_id,
                RerunWorkflowRequest(
                    re_run_from_workflow_id=workflow_id, re_run_from_task_id=task_id
                ),
            )
        elif action == "skip":
            ref = fields.get("taskRef", "").strip()
            if not ref:
                raise bad_request("choose the task to skip", "taskRef")
            call(workflow_id, ref, SkipTaskRequest())
        else:
            call(workflow_id)
        return f"{RUN_ACTIONS[action][0]}: done"

    def complete_human(
        self,
        caller: Principal,
        workflow_id: str,
        ref: str,
        outcome: str,
        output_text: str,
        reason: str,
    ) -> TaskRecord:
        """Complete or fail the waiting task ``ref`` (HUMAN, WAIT) with ``output_text``."""
        require_role(caller, "operator")
        if outcome not in ("COMPLETED", "FAILED"):
            raise bad_request("the outcome must be COMPLETED or FAILED", "outcome")
        try:
            output = json.loads(output_text or "{}")
        except ValueError as exc:
            raise bad_request(f"output: not valid JSON: {exc}", "output") from None
        if not isinstance(output, dict):
            raise bad_request("output: must be a JSON object ({...})", "output")
        rows = [r for r in self.tasks_of(workflow_id) if r.reference_task_name == ref]
        waiting = [r for r in rows if not r.status.is_terminal]
        if not waiting:
            raise ApiError(409, f"task {ref} of run {workflow_id} is not waiting")
        row = waiting[-1]
        self.results.update(
            TaskResultIn(
                workflow_instance_id=workflow_id,
                task_id=row.task_id,
                status="COMPLETED" if outcome == "COMPLETED" else "FAILED",
                output_data=output,
                reason_for_incompletion=reason.strip() or None,
            ),
            caller,
        )
        return row


WAITING = (TaskStatus.SCHEDULED, TaskStatus.IN_PROGRESS)
