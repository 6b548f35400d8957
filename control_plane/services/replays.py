"""Running a finished run again: restart, retry and rerun (Conductor's
WorkflowExecutorOps), and skipping a task of a running run.

A run is one orchestration instance; running it again starts that instance anew. What
the new execution keeps of the old one travels in its input (:class:`RunInput`): the
rows it keeps (``replay``), adopted when the run reaches those task instances again, and
a new ``generation`` that is part of every new task id, so no id (or queue message id)
of the earlier execution is used twice.

* restart: every task row goes; the run starts from the beginning with its input
  (``useLatestDefinitions``: with the latest registered version).
* retry: every row stays; tasks that succeeded keep their results, and the run makes a
  new attempt of each task it did not get through (FAILED, FAILED_WITH_TERMINAL_ERROR,
  TIMED_OUT, CANCELED), from the failed task on. Its workflow timeout counts from the
  retry (``lastRetriedTime``).
* rerun: from a task (``reRunFromTaskId``): the rows scheduled before it stay, it and
  every later row go; without one, like a restart with the new input.

Each answers once the run store shows the new execution's first rows, as Conductor
answers after deciding.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from control_plane.api.errors import bad_request, conflict, failure_of, not_found
from control_plane.deps import Deps, Settings
from control_plane.services.wire import offload_posted, read_offloaded
from engine.language.definitions import TaskStatus, WorkflowDef
from engine.ports.payload_store import PayloadKind
from engine.ports.run_store import (
    DefinitionRecord,
    RunRecord,
    RunStatus,
    RunUpdate,
    TaskRecord,
)
from engine.runtime.payload_refs import pointer
from engine.runtime.snapshots import SnapshotError, publish_snapshot, read_definition
from engine.runtime.tracing import attributes, span, traceparent_of, tracer
from protocol.events import SKIP_EVENT, SkipEvent
from protocol.payload_keys import (
    INPUT_REF,
    OUTPUT_REF,
    rerun_input_key,
    task_input_key,
    task_output_key,
)
from protocol.runs import ReplayTask, RunInput
from protocol.task_types import SCHEDULED_KINDS

log = logging.getLogger(__name__)

#: statuses of a task a retry runs again (Conductor's WorkflowExecutorOps.retry)
RETRIABLE = frozenset(
    {
        TaskStatus.FAILED,
        TaskStatus.FAILED_WITH_TERMINAL_ERROR,
        TaskStatus.TIMED_OUT,
        TaskStatus.CANCELED,
    }
)


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class RerunWorkflowRequest(_Wire):
    """Conductor's RerunWorkflowRequest."""

    re_run_from_workflow_id: str | None = None
    workflow_input: dict[str, Any] | None = None
    re_run_from_task_id: str | None = None
    task_input: dict[str, Any] | None = None
    correlation_id: str | None = None


class SkipTaskRequest(_Wire):
    """Conductor's SkipTaskRequest."""

    task_input: dict[str, Any] = Field(default_factory=dict)
    task_output: dict[str, Any] = Field(default_factory=dict)


Settle = Callable[[str, Callable[[RunRecord, list[TaskRecord]], bool]], None]


class RunReplays:
    def __init__(self, settings: Settings, deps: Deps, settle: Settle) -> None:
        self.settings = settings
        self.deps = deps
        self.settle = settle
        self.tracer = tracer(deps.tracer_provider, "stepway.control_plane")

    # --- the operations ---------------------------------------------------------------

    def restart(self, workflow_id: str, use_latest_definitions: bool = False) -> None:
        """Conductor's WorkflowExecutorOps.restart: with ``use_latest_definitions`` the
        run executes the latest registered version, and is of that version from now on
        (its ``workflowVersion`` is its definition's); ``restartable`` is read from the
        definition it would execute."""
        run = self._finished(workflow_id, "restart")
        latest = self._registered(run, None) if use_latest_definitions else None
        definition = (
            WorkflowDef.model_validate(latest.definition)
            if latest is not None
            else self._definition(run)
        )
        if run.status == RunStatus.COMPLETED and not definition.restartable:
            raise conflict(
                f"workflow {workflow_id} is COMPLETED and its definition is not restartable"
            )
        definition_ref = (
            publish_snapshot(self.deps.run_store, self.deps.payloads, latest, definition)
            if latest is not None
            else self._definition_ref(run)
        )
        # the engine starts the run again with the definition's variables
        update = RunUpdate(version=definition.version, variables=definition.run_variables())
        self._run_again(run, definition_ref, reset=True, update=update)

    def retry(self, workflow_id: str) -> None:
        run = self._finished(workflow_id, "retry")
        rows = self.deps.run_store.list_tasks(workflow_id)
        if not rows:
            raise conflict(f"workflow {workflow_id} has not started yet")
        latest = _latest_per_ref(rows)
        if run.status != RunStatus.TIMED_OUT and not any(row.status in RETRIABLE for row in latest):
            raise conflict(
                "There are no retryable tasks! Use restart if you want to attempt entire "
                "workflow execution again."
            )
        self._run_again(
            run,
            self._definition_ref(run),
            keep=latest,
            seq_base=max(row.seq for row in rows),
            retried=True,
        )

    def rerun(self, workflow_id: str, request: RerunWorkflowRequest) -> str:
        run = self._finished(workflow_id, "rerun")
        definition_ref = self._definition_ref(run)
        update = RunUpdate()
        if request.correlation_id is not None:
            update.correlation_id = request.correlation_id
        if request.workflow_input is not None:
            update.input, update.input_ref = offload_posted(
                self.deps.payloads,
                PayloadKind.WORKFLOW_INPUT,
                rerun_input_key(workflow_id, uuid.uuid4().hex),
                request.workflow_input,
                "$.workflowInput",
            )
        if request.re_run_from_task_id is None:
            self._run_again(run, definition_ref, reset=True, update=update)
            return workflow_id
        rows = self.deps.run_store.list_tasks(workflow_id)
        found = [row for row in rows if row.task_id == request.re_run_from_task_id]
        if not found:
            raise bad_request(f"Task {request.re_run_from_task_id} not found", "$.reRunFromTaskId")
        start = found[0]
        kept = [row for row in rows if row.seq < start.seq]
        self.deps.run_store.delete_tasks(
            workflow_id, [row.task_id for row in rows if row.seq >= start.seq]
        )
        inputs: dict[str, dict[str, Any]] = {}
        if request.task_input is not None:
            inputs[start.reference_task_name] = self._posted_input(
                workflow_id, "rerun", request.task_input
            )
        self._run_again(
            run,
            definition_ref,
            keep=_latest_per_ref(kept),
            seq_base=max((row.seq for row in kept), default=0),
            task_inputs=inputs,
            update=update,
        )
        return workflow_id

    def skip(self, workflow_id: str, ref: str, request: SkipTaskRequest) -> None:
        run = self.deps.run_store.get_run(workflow_id)
        if run is None:
            raise not_found(f"Workflow with id: {workflow_id} not found.")
        if run.status != RunStatus.RUNNING:
            raise conflict(
                f"The workflow {workflow_id} is not running so the task referenced by "
                f"{ref} cannot be skipped"
            )
        refs = {location.task.task_reference_name for location in self._definition(run).walk()}
        if ref not in refs:
            raise not_found(
                f"The task referenced by {ref} does not exist in the WorkflowDefinition {run.name}"
            )
        if any(
            row.reference_task_name == ref
            for row in self.deps.run_store.list_tasks(run.workflow_id)
        ):
            raise conflict(
                f"The task referenced {ref} has already been processed, cannot be skipped"
            )
        event = SkipEvent(
            task_reference_name=ref,
            task_input=self._posted_input(workflow_id, "skip", request.task_input),
            task_output=self._skip_output(workflow_id, request.task_output),
        )
        self.deps.signals.raise_event(workflow_id, SKIP_EVENT, event.payload())
        self.settle(
            workflow_id,
            lambda now, tasks: (
                now.status.is_terminal or any(t.reference_task_name == ref for t in tasks)
            ),
        )

    # --- helpers ----------------------------------------------------------------------

    def _posted_input(
        self, workflow_id: str, what: str, task_input: dict[str, Any]
    ) -> dict[str, Any]:
        """A task input posted for a rerun or a skip (``what``), or above the threshold
        a pointer into the payload store (engine/runtime/payload_refs.py), read where the
        task's I/O is done: inline, it would ride in the run's messages and fail the run
        past their limit."""
        key = task_input_key(workflow_id, f"{what}-{uuid.uuid4().hex}", 1)
        inline, ref = offload_posted(
            self.deps.payloads, PayloadKind.TASK_INPUT, key, task_input, "$.taskInput"
        )
        return pointer(ref, "$") if ref is not None else dict(inline)

    def _skip_output(self, workflow_id: str, output: dict[str, Any]) -> dict[str, Any]:
        """A skipped task's output, or above the threshold its reference in the payload
        store (``{"outputRef": ref}``, as a worker's large output)."""
        key = task_output_key(workflow_id, f"skip-{uuid.uuid4().hex}", 1)
        inline, ref = offload_posted(
            self.deps.payloads, PayloadKind.TASK_OUTPUT, key, output, "$.taskOutput"
        )
        return {OUTPUT_REF: ref} if ref is not None else dict(inline)

    def _finished(self, workflow_id: str, what: str) -> RunRecord:
        run = self.deps.run_store.get_run(workflow_id)
        if run is None:
            raise not_found(f"Workflow with id: {workflow_id} not found.")
        if not run.status.is_terminal:
            raise conflict(
                f"Workflow: {workflow_id} is not in terminal state ({run.status.value}), "
                f"unable to {what}."
            )
        return run

    def _definition_ref(self, run: RunRecord) -> str | None:
        """The snapshot the run executes again: the one it ran (also for a definition
        given inline), else one of its registered version."""
        if run.definition_ref:
            return run.definition_ref
        record = self._registered(run, run.version)
        return publish_snapshot(self.deps.run_store, self.deps.payloads, record)

    def _registered(self, run: RunRecord, version: int | None) -> DefinitionRecord:
        """A registered version of the run's definition (None: the latest); 404 if none."""
        try:
            return read_definition(self.deps.run_store, run.name, version)
        except SnapshotError as exc:
            raise not_found(str(exc)) from None

    def _definition(self, run: RunRecord) -> WorkflowDef:
        """The definition the run executes."""
        snapshot = read_offloaded(self.deps.payloads, run.definition_ref, None)
        if isinstance(snapshot, dict) and isinstance(snapshot.get("definition"), dict):
            return WorkflowDef.model_validate(snapshot["definition"])
        return WorkflowDef.model_validate(self._registered(run, run.version).definition)

    def _replay(self, row: TaskRecord) -> ReplayTask:
        return ReplayTask(
            ref=row.reference_task_name,
            task_id=row.task_id,
            seq=row.seq,
            status=row.status.value,
            attempt=row.attempt,
            input=row.input_data if isinstance(row.input_data, dict) else {},
            output=(
                {OUTPUT_REF: row.output_ref}
                if row.output_ref
                else (row.output_data if isinstance(row.output_data, dict) else {})
            ),
            reason=row.reason_for_incompletion,
            worker_id=row.worker_id,
            scheduled_time=row.scheduled_time,
            start_time=row.start_time,
            end_time=row.end_time,
        )

    def _run_again(
        self,
        run: RunRecord,
        definition_ref: str | None,
        *,
        reset: bool = False,
        keep: list[TaskRecord] | None = None,
        seq_base: int = 0,
        task_inputs: dict[str, dict[str, Any]] | None = None,
        retried: bool = False,
        update: RunUpdate | None = None,
    ) -> None:
        """Start the run's orchestration again, keeping ``keep`` (latest row per task
        instance), after rows of tasks decided again (every row on ``reset``, containers
        that did not succeed otherwise) are deleted."""
        store, now = self.deps.run_store, self.deps.clock()
        keep = keep or []
        if reset:
            store.delete_tasks(run.workflow_id)
        else:
            # a JOIN, loop or other container that did not succeed is decided again
            # under its task id (it stays in the plan): its row is written anew
            store.delete_tasks(
                run.workflow_id,
                [
                    row.task_id
                    for row in keep
                    if row.task_type not in SCHEDULED_KINDS and not row.status.is_successful
                ],
            )
        if not store.reopen_run(run.workflow_id, now):
            raise conflict(f"workflow {run.workflow_id} could not be reopened")
        generation = uuid.uuid4().hex
        changes = (update or RunUpdate()).model_copy(
            update={"generation": generation, "definition_ref": definition_ref}
        )
        if reset:
            changes.create_time = now
        if retried:
            changes.last_retried_time = now
        store.update_run(run.workflow_id, changes, now)
        again = store.get_run(run.workflow_id)
        assert again is not None
        input_value = read_offloaded(self.deps.payloads, again.input_ref, again.input) or {}
        try:
            # the run's new execution is a trace of its own, as a start is
            with span(
                self.tracer,
                "stepway.workflow.restart",
                root=True,
                kind=SpanKind.SERVER,
                attrs=attributes(workflow_id=run.workflow_id),
            ) as current:
                run_input = RunInput(
                    name=again.name,
                    version=again.version,
                    input={INPUT_REF: again.input_ref} if again.input_ref else input_value,
                    correlation_id=again.correlation_id,
                    priority=again.priority,
                    task_to_domain=again.task_to_domain,
                    parent_workflow_id=again.parent_workflow_id,
                    parent_task_id=again.parent_task_id,
                    definition_ref=definition_ref,
                    generation=generation,
                    replay=[self._replay(row) for row in keep],
                    seq_base=seq_base,
                    task_inputs=task_inputs or {},
                    traceparent=traceparent_of(current),
                )
                self.deps.signals.start_run(run.workflow_id, run_input.wire())
        except Exception as exc:
            log.exception("could not run %s again", run.workflow_id)
            failure = failure_of("could not run the workflow again", exc)
            store.update_run(
                run.workflow_id,
                RunUpdate(status=run.status, reason_for_incompletion=failure.message),
                self.deps.clock(),
            )
            raise failure from exc
        self.settle(
            run.workflow_id,
            lambda now_run, tasks: (
                now_run.status.is_terminal or any(t.seq > seq_base for t in tasks)
            ),
        )


def _latest_per_ref(rows: list[TaskRecord]) -> list[TaskRecord]:
    """The latest row (highest seq) of each task instance, in seq order."""
    latest: dict[str, TaskRecord] = {}
    for row in sorted(rows, key=lambda r: r.seq):
        latest[row.reference_task_name] = row
    return sorted(latest.values(), key=lambda r: r.seq)
