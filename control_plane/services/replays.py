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

import contextlib
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from control_plane.api.errors import bad_request, conflict, failure_of, not_found
from control_plane.deps import Deps, Settings
from control_plane.services.run_definitions import forked_tasks
from control_plane.services.wire import offload_posted, read_offloaded
from engine.language.definitions import TaskStatus, TaskType, WorkflowDef, WorkflowTask
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
from protocol.events import SKIP_EVENT, SkipEvent, child_end_event
from protocol.payload_keys import (
    INPUT_REF,
    OUTPUT_REF,
    rerun_input_key,
    task_input_key,
    task_output_key,
)
from protocol.runs import ReplayTask, RunInput, child_run_id
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
        parents = self._resume_parents(run)
        self._run_again(run, definition_ref, reset=True, update=update, report_end=bool(parents))

    def retry(self, workflow_id: str, resume_subworkflow_tasks: bool = False) -> None:
        """Conductor's WorkflowExecutorOps.retry. With ``resume_subworkflow_tasks`` the
        retry goes down to the deepest child run that failed (through the first task of
        each run that did not get through, a SUB_WORKFLOW: Conductor's
        ``findLastFailedSubWorkflowIfAny``) and retries that one. Either way the retried
        run's parents that ended because of it are retried with it, their SUB_WORKFLOW
        tasks resumed in place (Conductor's ``updateAndPushParents``): the same task,
        IN_PROGRESS again, waiting for the same child run, as are the parents' other
        SUB_WORKFLOW tasks whose child runs did not get through (each child retried)."""
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
        target = (run, rows)
        if resume_subworkflow_tasks:
            target = self._deepest_failed(run, rows)
        parents = self._resume_parents(target[0])
        self._retry_run(*target, report_end=bool(parents))

    def _resume_parents(
        self, run: RunRecord, updates: dict[str, RunUpdate] | None = None
    ) -> list[tuple[RunRecord, list[TaskRecord], str]]:
        """Retry the parents a retry, rerun or restart of ``run`` takes back to RUNNING
        (:meth:`_waiting_parents`), the outermost first, so that each parent waits for
        its child's end before the child can reach it; ``run`` is the caller's to run
        again, reporting its end (``report_end``) when this returned any parent.
        ``updates``: what changes in a parent (by id) as it runs again."""
        parents = self._waiting_parents(run)
        for level in reversed(range(len(parents))):
            parent, parent_rows, task_id = parents[level]
            child = parents[level - 1][0] if level else run
            self._retry_run(
                parent,
                parent_rows,
                resume=self._resumable(parent, parent_rows, child, task_id),
                report_end=level < len(parents) - 1,
                retried_below=child.workflow_id,
                update=(updates or {}).get(parent.workflow_id),
            )
        return parents

    def _retry_run(
        self,
        run: RunRecord,
        rows: list[TaskRecord],
        resume: dict[str, RunRecord] | None = None,
        report_end: bool = False,
        retried_below: str | None = None,
        update: RunUpdate | None = None,
    ) -> None:
        """Retry one run: every task it did not get through gets a new attempt, but the
        SUB_WORKFLOW tasks in ``resume`` (task id -> child run), which wait for their
        child runs again, each retried here after the run but ``retried_below`` (the
        next run of the chain, which the caller retries); ``report_end``: its parent
        waits for its end by event."""
        resume = resume or {}
        self._run_again(
            run,
            self._definition_ref(run),
            keep=_latest_per_ref(rows),
            seq_base=max(row.seq for row in rows),
            retried=True,
            resume=set(resume),
            report_end=report_end,
            update=update,
        )
        for child in resume.values():
            if child.workflow_id != retried_below and child.status.is_terminal:
                self._retry_run(
                    child, self.deps.run_store.list_tasks(child.workflow_id), report_end=True
                )

    @contextlib.contextmanager
    def _parent_told_if_not_started(self, run: RunRecord, report_end: bool) -> Iterator[None]:
        """Around running ``run`` again: a run whose parent already waits for it again
        (``report_end``) that cannot be started is reported ended as it was
        (:meth:`_not_resumed`), so that the parent does not wait for an end that will not
        come."""
        try:
            yield
        except Exception:
            if report_end:
                self._not_resumed(run)
            raise

    def _not_resumed(self, child: RunRecord) -> None:
        """A child run whose parent already waits for it again could not be retried: its
        end as it stands is raised on the parent, so that the parent decides again (its
        task fails as before) instead of waiting for an end that will not come."""
        if not (child.parent_workflow_id and child.parent_task_id):
            return
        summary: dict[str, Any] = {
            "status": child.status.value,
            "output": {},
            "reason": f"the retry of child run {child.workflow_id} failed",
        }
        try:
            self.deps.signals.raise_event(
                child.parent_workflow_id, child_end_event(child.parent_task_id), summary
            )
        except Exception:
            log.exception(
                "could not tell parent %s its child was not retried", child.parent_workflow_id
            )

    def _deepest_failed(
        self, run: RunRecord, rows: list[TaskRecord]
    ) -> tuple[RunRecord, list[TaskRecord]]:
        """The run a retry with ``resumeSubworkflowTasks`` retries (Conductor's
        ``findLastFailedSubWorkflowIfAny``): the first task of ``run`` that did not get
        through, if a SUB_WORKFLOW (or a DO_WHILE: the loop's first such SUB_WORKFLOW),
        leads into its child run when that has a task that did not get through, and so
        on down; else ``run`` itself."""
        store = self.deps.run_store
        for _ in range(_MAX_CHAIN):
            latest = _latest_per_ref(rows)
            failed = [row for row in latest if row.status in RETRIABLE]
            if failed and failed[0].task_type == TaskType.DO_WHILE:
                failed = [row for row in failed if row.task_type == TaskType.SUB_WORKFLOW]
            if not failed or failed[0].task_type != TaskType.SUB_WORKFLOW:
                return run, rows
            child = self._child_of_ended(failed[0])
            if child is None or not child.status.is_terminal:
                return run, rows
            child_rows = store.list_tasks(child.workflow_id)
            if not any(row.status in RETRIABLE for row in _latest_per_ref(child_rows)):
                return run, rows
            run, rows = child, child_rows
        return run, rows

    def _waiting_parents(self, run: RunRecord) -> list[tuple[RunRecord, list[TaskRecord], str]]:
        """The parents that a retry of ``run`` takes back to RUNNING (Conductor's
        ``updateAndPushParents``), nearest first, each with its rows and the id of its
        SUB_WORKFLOW task the child below it belongs to: up the chain while the parent
        has ended, that task is its latest attempt of the instance and did not get
        through, and the definition names it as a SUB_WORKFLOW (an optional task's
        failure did not end its parent; a retried attempt has a child of its own)."""
        store = self.deps.run_store
        found: list[tuple[RunRecord, list[TaskRecord], str]] = []
        child = run
        while child.parent_workflow_id and child.parent_task_id and len(found) < _MAX_CHAIN:
            self._parent_took_the_end(child)
            parent = store.get_run(child.parent_workflow_id)
            if parent is None or parent.status not in _RESUMABLE_RUN:
                break
            rows = store.list_tasks(parent.workflow_id)
            latest = {row.task_id: row for row in _latest_per_ref(rows)}
            task = latest.get(child.parent_task_id)
            if (
                task is None
                or task.status not in RETRIABLE
                or child_run_id(task.task_id, task.attempt) != child.workflow_id
                or not _is_instance_of(
                    task.reference_task_name, self._sub_workflow_refs(parent, rows)
                )
            ):
                break
            found.append((parent, rows, task.task_id))
            child = parent
        return found

    def _parent_took_the_end(self, child: RunRecord) -> None:
        """Wait (``settle_seconds`` at most) until the parent of an ended child has taken
        the child's end in: a retry, rerun or restart right after the child ended would
        otherwise find the parent still RUNNING and leave it, and the end then fail it
        with the child running again (conductor-oss sets the parent RUNNING whatever it
        reads; here the parent must have ended to be run again)."""
        parent_id, task_id = child.parent_workflow_id, child.parent_task_id
        if parent_id is None or task_id is None or not child.status.is_terminal:
            return
        self.settle(
            parent_id,
            lambda parent, tasks: (
                parent.status.is_terminal
                or not any(
                    t.task_id == task_id
                    and not t.status.is_terminal
                    and child_run_id(t.task_id, t.attempt) == child.workflow_id
                    for t in tasks
                )
            ),
        )

    def _resumable(
        self, parent: RunRecord, rows: list[TaskRecord], child: RunRecord, task_id: str
    ) -> dict[str, RunRecord]:
        """The SUB_WORKFLOW tasks of ``parent`` a retry resumes in place, by task id, with
        their child runs: ``task_id`` (whose child ``child`` is retried), and every
        other one that did not get through whose child run ended with a task that did
        not get through (Conductor retries those children too)."""
        store = self.deps.run_store
        refs = self._sub_workflow_refs(parent, rows)
        found = {task_id: child}
        for row in _latest_per_ref(rows):
            if (
                row.task_id == task_id
                or row.task_type != TaskType.SUB_WORKFLOW
                or row.status not in RETRIABLE
                or not _is_instance_of(row.reference_task_name, refs)
            ):
                continue
            sibling = self._child_of_ended(row)
            if (
                sibling is not None
                and sibling.status.is_terminal
                and sibling.parent_task_id == row.task_id
                and any(
                    t.status in RETRIABLE
                    for t in _latest_per_ref(store.list_tasks(sibling.workflow_id))
                )
            ):
                found[row.task_id] = sibling
        return found

    def _sub_workflow_refs(self, run: RunRecord, rows: list[TaskRecord]) -> set[str]:
        """The references of the run's SUB_WORKFLOW tasks: its definition's, and those
        its dynamic forks made (a DYNAMIC task that resolved to SUB_WORKFLOW is not among
        them: a retry gives it a new child)."""
        tasks = [location.task for location in self._definition(run).walk()]
        dynamic_forks = {
            task.task_reference_name for task in tasks if task.type == TaskType.FORK_JOIN_DYNAMIC
        }
        if dynamic_forks:
            tasks.extend(forked_tasks(rows, dynamic_forks.__contains__))
        return {task.task_reference_name for task in tasks if task.type == TaskType.SUB_WORKFLOW}

    def rerun(self, workflow_id: str, request: RerunWorkflowRequest) -> str:
        return self._rerun(workflow_id, request, {})

    def _rerun(
        self, workflow_id: str, request: RerunWorkflowRequest, updates: dict[str, RunUpdate]
    ) -> str:
        """Rerun ``workflow_id``; ``updates``: what changes in a parent (by id) that the
        rerun takes back to RUNNING."""
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
            parents = self._resume_parents(run, updates)
            self._run_again(
                run, definition_ref, reset=True, update=update, report_end=bool(parents)
            )
            return workflow_id
        rows = self.deps.run_store.list_tasks(workflow_id)
        found = [row for row in rows if row.task_id == request.re_run_from_task_id]
        if not found:
            return self._rerun_in_child(run, request, update)
        parents = self._resume_parents(run, updates)
        start = found[0]
        parallel = _parallel_to(self._definition(run), start.reference_task_name)
        # the task and what runs after it run again; a parallel branch's tasks that got
        # through stand (conductor-oss's rerun resets only a fork's unsuccessful siblings)
        kept = [
            row
            for row in rows
            if row.seq < start.seq
            or (row.status.is_successful and parallel(row.reference_task_name))
        ]
        kept_ids = {row.task_id for row in kept}
        # the task itself too: its row is written anew under its id, at its next attempt
        # (conductor-oss's rerunWF resets it in place), with no lease or log of before
        self.deps.run_store.delete_tasks(
            workflow_id, [row.task_id for row in rows if row.task_id not in kept_ids]
        )
        inputs: dict[str, dict[str, Any]] = {}
        if request.task_input is not None:
            inputs[start.reference_task_name] = self._posted_input(
                workflow_id, "rerun", request.task_input
            )
        self._run_again(
            run,
            definition_ref,
            keep=_latest_per_ref([*kept, start]),
            seq_base=max(row.seq for row in [*kept, start]),
            task_inputs=inputs,
            update=update,
            report_end=bool(parents),
            rerun_from=start,
        )
        return workflow_id

    def _rerun_in_child(
        self, run: RunRecord, request: RerunWorkflowRequest, update: RunUpdate
    ) -> str:
        """A rerun of ``run`` from a task of one of its child runs (at any depth):
        conductor-oss's ``rerunWF`` looks into each SUB_WORKFLOW's child. The child run
        holding the task is rerun from it (with ``taskInput``), which takes ``run`` and
        the runs between back to RUNNING, their SUB_WORKFLOW tasks resumed in place; the
        request's ``workflowInput`` and ``correlationId`` are ``run``'s."""
        task_id = request.re_run_from_task_id
        assert task_id is not None
        holder = self._child_holding(run, task_id)
        if holder is None:
            raise bad_request(f"Task {task_id} not found", "$.reRunFromTaskId")
        self._finished(holder.workflow_id, "rerun")
        if run.workflow_id not in {
            parent.workflow_id for parent, _, _ in self._waiting_parents(holder)
        }:
            raise conflict(
                f"Task {task_id} is in child run {holder.workflow_id}, whose rerun would "
                f"not take workflow {run.workflow_id} back to RUNNING: the task for that "
                "child got through or was retried since"
            )
        self._rerun(
            holder.workflow_id,
            RerunWorkflowRequest(re_run_from_task_id=task_id, task_input=request.task_input),
            {run.workflow_id: update},
        )
        return run.workflow_id

    def _child_holding(self, run: RunRecord, task_id: str) -> RunRecord | None:
        """The child run of ``run`` (at any depth) that holds task ``task_id``, if any."""
        store = self.deps.run_store
        row = store.get_task(task_id)
        holder = store.get_run(row.workflow_id) if row is not None else None
        current = holder
        for _ in range(_MAX_CHAIN):
            if current is None or current.parent_workflow_id is None:
                return None
            if current.parent_workflow_id == run.workflow_id:
                return holder
            current = store.get_run(current.parent_workflow_id)
        return None

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

    def _child_of_ended(self, row: TaskRecord) -> RunRecord | None:
        """The child run of an ended SUB_WORKFLOW task ``row``, once it has ended too. A
        parent whose end canceled the task sent the child the terminate event, which the
        child's interpreter takes a moment later (conductor-oss terminates it in the same
        call): its end is awaited (``settle_seconds`` at most), or a retry or rerun that
        read it still RUNNING would leave it out and it would end TERMINATED after."""
        child = self.deps.run_store.get_run(child_run_id(row.task_id, row.attempt))
        if child is not None and row.status.is_terminal and not child.status.is_terminal:
            return self._ended(child)
        return child

    def _ended(self, run: RunRecord) -> RunRecord:
        """``run`` (not ended) once it has ended, or as it is after ``settle_seconds``."""
        self.settle(run.workflow_id, lambda current, _tasks: current.status.is_terminal)
        return self.deps.run_store.get_run(run.workflow_id) or run

    def _finished(self, workflow_id: str, what: str) -> RunRecord:
        store = self.deps.run_store
        run = store.get_run(workflow_id)
        if run is None:
            raise not_found(f"Workflow with id: {workflow_id} not found.")
        if not run.status.is_terminal and run.parent_workflow_id:
            # a child whose parent has ended is being terminated (:meth:`_child_of_ended`)
            parent = store.get_run(run.parent_workflow_id)
            if parent is not None and parent.status.is_terminal:
                run = self._ended(run)
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

    def _replay(self, row: TaskRecord, resume: bool = False, rerun: bool = False) -> ReplayTask:
        return ReplayTask(
            resume=resume,
            rerun=rerun,
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
        resume: set[str] | None = None,
        report_end: bool = False,
        rerun_from: TaskRecord | None = None,
    ) -> None:
        """Start the run's orchestration again, keeping ``keep`` (latest row per task
        instance), after rows of tasks decided again (every row on ``reset``, containers
        that did not succeed otherwise) are deleted; the SUB_WORKFLOW tasks in ``resume``
        (task ids) wait for their child runs again, which ``report_end`` their ends (a
        run whose parent waits again that cannot be started is reported ended as it was,
        so that the parent does not wait for an end that will not come); ``rerun_from``
        (one of ``keep``, its row deleted): the task a rerun starts from, scheduled again
        under its id."""
        resume = resume or set()
        with self._parent_told_if_not_started(run, report_end):
            store, now = self.deps.run_store, self.deps.clock()
            keep = keep or []
            redecided: set[str] = set()
            if reset:
                store.delete_tasks(run.workflow_id)
            else:
                # a JOIN, loop or other container that did not succeed is decided again
                # under its task id (it stays in the plan): its row is written anew
                redecided = {
                    row.task_id
                    for row in keep
                    if row.task_type not in SCHEDULED_KINDS and not row.status.is_successful
                }
                store.delete_tasks(run.workflow_id, sorted(redecided))
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
            if retried:
                self._replaced(keep, resume, now)
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
                        replay=[
                            self._replay(
                                row,
                                row.task_id in resume,
                                rerun=rerun_from is not None and row is rerun_from,
                            )
                            for row in keep
                        ],
                        seq_base=seq_base,
                        task_inputs=task_inputs or {},
                        report_end=report_end,
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
                now_run.status.is_terminal
                or any(t.seq > seq_base for t in tasks)
                # the task a rerun starts from, written anew
                or (rerun_from is not None and any(t.task_id == rerun_from.task_id for t in tasks))
                # a run whose failed tasks were all resumed in place makes no new row
                or (bool(resume) and (not redecided or any(t.task_id in redecided for t in tasks)))
            ),
        )

    def _replaced(self, keep: list[TaskRecord], resume: set[str], now: int) -> None:
        """A retry's rows: the attempts it replaces are ``retried`` from now (Conductor's
        taskToBeRescheduled); a SUB_WORKFLOW task resumed in place goes IN_PROGRESS
        again, waiting for the same child run."""
        store = self.deps.run_store
        with store.batch():
            for row in keep:
                if row.task_id in resume:
                    child = {"subWorkflowId": child_run_id(row.task_id, row.attempt)}
                    store.reopen_task(row.task_id, row.attempt, child, now)
                elif row.task_type in SCHEDULED_KINDS and row.status in RETRIABLE:
                    store.mark_retried(row.task_id, now)


#: a run a retry of its child takes back to RUNNING (a COMPLETED one went on without it)
_RESUMABLE_RUN = frozenset({RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.TERMINATED})
#: a bound on the runs a retry walks down or up (runs nest at most
#: ``STEPWAY_MAX_WORKFLOW_DEPTH`` deep, 16 by default)
_MAX_CHAIN = 1000
#: a loop iteration's suffix of a task instance's ref (``x__2``, nested ``x__2__1``)
_ITERATION = re.compile(r"(__\d+)+$")


def _is_instance_of(ref: str, refs: set[str]) -> bool:
    """Whether task instance ``ref`` is one of the definition's ``refs`` (a loop's
    iteration ``x__2`` of ``x`` too)."""
    return ref in refs or _ITERATION.sub("", ref) in refs


def _parallel_to(definition: WorkflowDef, ref: str) -> Callable[[str], bool]:
    """Whether a task instance is in another branch of a FORK_JOIN than task instance
    ``ref`` (so neither runs after the other); a task a dynamic fork or DYNAMIC task made
    is in no branch of the definition."""
    trails: dict[str, tuple[tuple[str, int], ...]] = {}

    def walk(tasks: list[WorkflowTask], trail: tuple[tuple[str, int], ...]) -> None:
        for task in tasks:
            trails[task.task_reference_name] = trail
            for i, branch in enumerate(task.fork_tasks):
                walk(branch, (*trail, (task.task_reference_name, i)))
            for nested in (*task.decision_cases.values(), task.default_case, task.loop_over):
                walk(nested, trail)

    walk(definition.tasks, ())

    def trail_of(instance: str) -> tuple[tuple[str, int], ...] | None:
        found = trails.get(instance)
        return found if found is not None else trails.get(_ITERATION.sub("", instance))

    mine = trail_of(ref)

    def parallel(instance: str) -> bool:
        theirs = trail_of(instance)
        if mine is None or theirs is None:
            return False
        for (fork, branch), (other_fork, other_branch) in zip(mine, theirs, strict=False):
            if fork != other_fork:
                return False
            if branch != other_branch:
                return True
        return False

    return parallel


def _latest_per_ref(rows: list[TaskRecord]) -> list[TaskRecord]:
    """The latest row (highest seq) of each task instance, in seq order."""
    latest: dict[str, TaskRecord] = {}
    for row in sorted(rows, key=lambda r: r.seq):
        latest[row.reference_task_name] = row
    return sorted(latest.values(), key=lambda r: r.seq)
