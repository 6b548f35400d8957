"""The interpreter's own activities: record rows, dispatch WORKER tasks, resolve child
runs, run built-in activity types, finish runs.

They are methods of :class:`RunActivities`, built with the services of the engine
process (:func:`engine.runtime.registry.activities` binds them); each reads one typed
input (:mod:`engine.runtime.activity_io`). Each activity does one step's I/O and records
the task rows the Decider changed since the last I/O in the same call, so a step costs
one activity round trip (docs/architecture.md, "The interpreter").

Task rows are written once per transition: the dispatch writes the SCHEDULED row of
the attempt it queues (the Decider's change for it is not written separately), and a
change of a WORKER row to the status the Task API wrote already (IN_PROGRESS at
hand-out, the result a worker posted) is not written again. The worker message (queue,
id, body) is :mod:`protocol.messages`; the row is written SCHEDULED with ``queueName``
before the message is sent.

Each activity is a span in its run's trace (:mod:`engine.runtime.tracing`); the
dispatch span's context goes into the task message, so the worker's span is its child.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import grpc
from durabletask import task as dt
from opentelemetry.trace import SpanKind

from engine.decider.state import ScheduleTask, TaskChange
from engine.language.definitions import (
    CALL_TASK_TYPES,
    RunStatus,
    SubWorkflowParams,
    TaskStatus,
    TaskType,
    WorkflowDef,
)
from engine.ports.payload_store import (
    PayloadKind,
    PayloadTooLarge,
    json_text,
    offload_encoded,
    offload_if_large,
)
from engine.ports.queue import QueueError, QueueNotFound
from engine.ports.queue_provisioning import ensure_queues_exist
from engine.ports.run_store import (
    DefinitionRecord,
    KeptStep,
    NewRun,
    RunUpdate,
    TaskRecord,
    TaskUpdate,
)
from engine.runtime.activity_io import (
    ACTIVITY_BUILTIN,
    ACTIVITY_CHECK,
    ACTIVITY_DISPATCH,
    ACTIVITY_FINISH,
    ACTIVITY_POLL,
    ACTIVITY_RECORD,
    ACTIVITY_RESOLVE_CHILD,
    BuiltinInput,
    CheckInput,
    ChildResolution,
    DispatchInput,
    DispatchResult,
    FinishInput,
    PolledTask,
    PollInput,
    RecordInput,
    ResolveChildInput,
    RunSummary,
    TaskCheck,
)
from engine.runtime.builtins import ActivityDeps, ActivityResult, run_activity, run_poll
from engine.runtime.encoded_json import parse
from engine.runtime.local_steps import LocalSteps, NotHere
from engine.runtime.log_limits import OncePerWindow
from engine.runtime.payload_refs import dereference, is_pointer
from engine.runtime.services import EngineServices
from engine.runtime.settlement import (
    FAILED_STATUSES,
    MessageSettlement,
    dead_letter_reason,
    release_slot,
)
from engine.runtime.snapshots import (
    SnapshotError,
    publish_snapshot,
    publish_snapshot_of,
    read_definition,
)
from engine.runtime.tracing import STATUS, attributes, span, traceparent_of, tracer
from protocol.events import TERMINATE_EVENT, TerminateEvent, child_end_event
from protocol.limits import unstorable_text_problem
from protocol.messages import TaskMessage, message_id
from protocol.payload_keys import (
    ACTIVITY_PREFIX_KEY,
    INPUT_REF,
    OUTPUT_REF,
    POINTER,
    POINTER_PATH,
    activity_prefix,
    offloaded,
    task_input_key,
    task_output_key,
    workflow_output_key,
)
from protocol.queues import queue_for
from protocol.runs import (
    FAILURE_WORKFLOW_OUTPUT,
    ORCHESTRATOR_NAME,
    RunInput,
    child_run_input,
    failure_run_id,
)

__all__ = ["RunActivities", "store_row"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the ends of a run that start its definition's failure workflow (Conductor's
#: failureWorkflow)
_FAILURE_WORKFLOW_STATUSES = (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.TERMINATED)


#: final statuses of a WORKER attempt whose message the engine settles as it records them
_ENGINE_SETTLES = FAILED_STATUSES | {TaskStatus.CANCELED}

#: the namespace of the ids of runs a START_WORKFLOW task starts
_STARTED_RUNS = uuid.uuid5(uuid.NAMESPACE_URL, "https://stepway/started-run")


def _iteration(ref: str, def_ref: str) -> int:
    """Innermost DO_WHILE iteration of an instance ref (``a__2__3`` -> 3; 0 outside loops)."""
    suffix = ref[len(def_ref) :]
    return int(suffix.rsplit("__", 1)[-1]) if suffix.startswith("__") else 0


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _in_work_item(work: Callable[[], T], workflow_id: str, goes_to: str) -> T | None:
    """An activity's work done in an orchestration's work item (``*_here``): what it
    returned, or None when it raised, logged as going to the activity, which does it
    again with its retries."""
    try:
        return work()
    except Exception as exc:
        log.info("run %s: %s activity: %s", workflow_id, goes_to, exc)
        return None


def store_row(workflow_id: str, change: TaskChange) -> TaskRecord:
    """A task row the Decider changed, as a run-store row."""
    output_ref = offloaded(change.output, OUTPUT_REF)
    # an input kept whole in the payload store (a skip's or rerun's taskInput above the
    # threshold) is the row's input reference, as a worker task's offloaded input
    input_ref = str(change.input[POINTER]) if _whole_pointer(change.input) else None
    return TaskRecord(
        task_id=change.task_id,
        workflow_id=change.workflow_id or workflow_id,
        reference_task_name=change.ref,
        task_type=change.kind or change.type,
        task_def_name=change.name,
        status=change.status,
        attempt=change.attempt,
        retry_count=change.attempt - 1,
        seq=change.seq,
        input_data=None if input_ref else change.input,
        input_ref=input_ref,
        output_data=None if output_ref else change.output,
        output_ref=output_ref,
        reason_for_incompletion=change.reason,
        scheduled_time=change.scheduled_time,
        start_time=change.start_time,
        end_time=change.end_time,
        worker_id=change.worker_id,
        iteration=change.iteration,
        retried_task_id=change.retried_task_id,
        retried=change.retried,
        callback_after_seconds=change.callback_after_seconds,
    )


def _names_its_child(
    task_input: Any,
    name: str,
    version: int,
    task_to_domain: dict[str, str] | None,
    child: SubWorkflowParams | None,
) -> dict[str, Any] | None:
    """A SUB_WORKFLOW row's input once its child exists: as Conductor's
    SubWorkflowTaskMapper shows it (``subWorkflowName``, ``subWorkflowVersion`` resolved,
    ``subWorkflowTaskToDomain``, ``workflowInput``: the child's input, and the
    ``priority``, ``idempotencyKey`` and ``idempotencyStrategy`` given), the task's own
    input kept beside them; None for an input kept by reference."""
    if not isinstance(task_input, dict) or offloaded(task_input, INPUT_REF):
        return None
    shown = {
        **task_input,
        "subWorkflowName": name,
        "subWorkflowVersion": version,
        "subWorkflowTaskToDomain": task_to_domain,
        "workflowInput": child_run_input(task_input),
    }
    if child is not None:
        given = {
            # a priority given as an expression is not resolved (the child runs at its
            # parent's): shown only as a number
            "priority": child.priority if isinstance(child.priority, int) else None,
            "idempotencyKey": child.idempotency_key,
            "idempotencyStrategy": child.idempotency_strategy,
        }
        shown.update((key, value) for key, value in given.items() if value is not None)
    return shown


def _whole_pointer(value: Any) -> bool:
    return is_pointer(value) and value[POINTER_PATH] == "$"


#: task types whose row transitions are written where they happen, before the Decider's
#: record of them arrives: a WORKER's hand-out and result (the Task API), a SUB_WORKFLOW's
#: IN_PROGRESS with its child's id (the resolve activity, with the child's run row)
_WRITTEN_AT_TRANSITION = frozenset({TaskType.WORKER, TaskType.SUB_WORKFLOW})


class RunActivities:
    """The interpreter's activities, bound to the services of one engine process."""

    def __init__(self, services: EngineServices, local_steps: LocalSteps | None = None) -> None:
        """``local_steps``: the gate of the built-in steps done in work items
        (:meth:`builtin_here`); by default one at a time."""
        self.services = services
        self.local_steps = local_steps or LocalSteps(slots=1)
        self.store = services.run_store
        self.settlement = MessageSettlement(services.run_store, services.queue)
        self.tracer = tracer(services.tracer_provider, "stepway.engine")
        #: task type -> the latest poll time read from the store (see _polled_since)
        self._last_polls: dict[str, int] = {}
        #: the process log's "no worker polled" lines (each task's log has its own)
        self._no_poll_lines = OncePerWindow(services.no_worker_warning_ms)

    # -- the activities ------------------------------------------------------------------

    def record(self, ctx: dt.ActivityContext, raw: Any) -> dict[str, Any]:
        """Record task rows and run warnings (a step with no other I/O)."""
        return self._record_traced(parse(RecordInput, raw))

    def record_here(self, data: RecordInput) -> bool:
        """The record activity's work done in the orchestration's work item of a process
        that hosts the activities too (``engine.runtime.interpreter.LocalRecord``), with
        the same idempotent writes and calls. False when it failed, so that the record
        activity does it again with its retries."""
        done = _in_work_item(
            lambda: self._record_traced(data), data.workflow_id, "its rows go to the record"
        )
        return done is not None

    def _record_traced(self, data: RecordInput) -> dict[str, Any]:
        with span(
            self.tracer,
            ACTIVITY_RECORD,
            parent=data.traceparent,
            attrs=attributes(workflow_id=data.workflow_id),
        ):
            now = _now_ms()
            with self.store.batch():
                self._write_changes(data.workflow_id, data.records, now)
                self._write_warnings(data.workflow_id, data.warnings, now)
            self._terminate_children(
                {
                    child.child_id: (
                        f"parent {data.workflow_id} ended its SUB_WORKFLOW task {child.ref}"
                    )
                    for child in data.cancel_children or []
                }
            )
        return {}

    def dispatch(self, ctx: dt.ActivityContext, raw: Any) -> dict[str, Any]:
        """Queue one attempt of a WORKER task."""
        return self._dispatch_traced(parse(DispatchInput, raw)).wire()

    def _dispatch_traced(self, data: DispatchInput) -> DispatchResult:
        task = data.task
        with span(
            self.tracer,
            ACTIVITY_DISPATCH,
            parent=data.traceparent,
            kind=SpanKind.PRODUCER,
            attrs=attributes(
                workflow_id=data.workflow_id,
                task_id=task.task_id,
                task_type=task.name,
                attempt=task.attempt,
            ),
        ) as current:
            result = self._dispatch(data, traceparent_of(current))
            current.set_attribute(STATUS, "FAILED" if result.error else "SCHEDULED")
            return result

    def dispatch_here(self, data: DispatchInput) -> bool:
        """The dispatch activity's work done in the orchestration's work item of a process
        that hosts the activities too (``engine.runtime.interpreter.LocalDispatch``), with
        the same idempotent writes and send. True when the attempt is queued; False when
        it failed or cannot be queued, so that the dispatch activity does it again with
        its retries and answers the error."""
        result = _in_work_item(
            lambda: self._dispatch_traced(data),
            data.workflow_id,
            f"task {data.task.task_id} goes to the dispatch",
        )
        return result is not None and result.error is None

    def resolve_child(self, ctx: dt.ActivityContext, raw: Any) -> dict[str, Any]:
        """Resolve a SUB_WORKFLOW's definition version and write the child's run row."""
        data = parse(ResolveChildInput, raw)
        task = data.task
        with span(
            self.tracer,
            ACTIVITY_RESOLVE_CHILD,
            parent=data.run.traceparent,
            attrs=attributes(
                workflow_id=data.workflow_id,
                task_id=task.task_id,
                task_type=task.type,
                attempt=task.attempt,
            ),
        ) as current:
            resolution = self._resolve_child(data)
            resolution.traceparent = traceparent_of(current)
            return resolution.wire()

    def finish(self, ctx: dt.ActivityContext, raw: Any) -> dict[str, Any]:
        """Record the run's end, cancel children, start the failure workflow."""
        return self._finish_traced(parse(FinishInput, raw))

    def finish_here(self, data: FinishInput) -> dict[str, Any] | None:
        """The finish activity's work done in the orchestration's work item of a process
        that hosts the activities too (``engine.runtime.interpreter.LocalFinish``), with
        the same idempotent writes and calls. None when it fails, so that the finish
        activity does it again with its retries."""
        return _in_work_item(
            lambda: self._finish_traced(data), data.workflow_id, "its end goes to the finish"
        )

    def _failure_workflow(self, run: RunInput, status: RunStatus) -> str | None:
        """The failure workflow an end of ``run`` with ``status`` starts, if any."""
        if status not in _FAILURE_WORKFLOW_STATUSES:
            return None
        try:
            definitions = self.services.definitions
            decider = definitions.decider_for(run.name, run.version, run.definition_ref)
        except LookupError:  # the definition itself is gone: nothing names a failure flow
            return None
        name = decider.definition.failure_workflow or None
        if name is not None and name.startswith("$"):
            # Conductor's terminateWorkflow: ``$workflow.input.<param>`` names the failure
            # workflow by the run's input parameter (none when the run has no such value)
            param = name.strip("${}").split(".")
            value = (
                run.input.get(param[2])
                if len(param) == 3 and param[:2] == ["workflow", "input"]
                else None
            )
            return value if isinstance(value, str) and value else None
        return name

    def _registered_failure(self, name: str | None) -> DefinitionRecord | None:
        """The latest registered definition of failure workflow ``name``, if any."""
        if not name:
            return None
        try:
            return read_definition(self.store, name, None)
        except SnapshotError:
            return None

    def _finish_traced(self, data: FinishInput) -> dict[str, Any]:
        with span(
            self.tracer,
            ACTIVITY_FINISH,
            parent=data.run.traceparent,
            attrs=attributes(workflow_id=data.workflow_id),
        ) as current:
            summary = self._finish(data, traceparent_of(current))
            current.set_attribute(STATUS, summary.status)
            return summary.wire()

    def builtin(self, ctx: dt.ActivityContext, raw: Any) -> dict[str, Any]:
        """Run one attempt of a built-in activity type (HTTP, CALL_TOOL, ...); or, for
        an HTTP call a work item of this process began and left to this activity
        (:meth:`builtin_here`), wait for that call's outcome instead of calling again."""
        data = parse(BuiltinInput, raw)
        task = data.task
        handed = self.local_steps.take((data.workflow_id, task.task_id, task.attempt))
        if handed is not None:
            envelope: dict[str, Any] = handed.result()
            return envelope
        return self._builtin_traced(data)

    def builtin_here(self, data: BuiltinInput, execution: int = 0) -> KeptStep | None:
        """The built-in activity's work done in the orchestration's work item of a process
        that hosts the activities too (``engine.runtime.interpreter.LocalBuiltin``): the
        same writes and call, and its result envelope kept in the run store
        (``put_step_result``, under the run's ``execution``) for the replays of that
        work item, which find no activity in the history.

        None, and the built-in activity does the step, when it failed (the call may have
        gone out: an outage of a store after it; the activity handles outages as ever),
        when the gate declines it (:class:`LocalSteps`: no slot free, the task slow
        before), when it cannot be finished within the gate's ``within_seconds`` (a
        script's evaluation is cut short and evaluated again by the activity; an HTTP
        call goes on and the activity takes its outcome), and for an HTTP method not
        safe to make again."""
        task = data.task
        gate = self.local_steps
        deps = dataclasses.replace(self._inline_deps(), within_seconds=gate.within_seconds)

        def call() -> dict[str, Any]:
            return self._builtin_traced(data, deps)

        def work() -> KeptStep:
            if task.type == TaskType.HTTP:
                key = (data.workflow_id, task.task_id, task.attempt)
                envelope = gate.hand_over(key, call)
            else:
                envelope = call()
            if envelope.get("status") == "DEFERRED":
                # kept, it would answer every replay of this attempt: the activity's
                # result is in the history instead
                raise NotHere("its rate limit is used up", remember=False)
            now = _now_ms()
            self.store.put_step_result(
                data.workflow_id, task.task_id, task.attempt, envelope, now, execution
            )
            return KeptStep(result=envelope, kept_at=now)

        return _in_work_item(
            lambda: gate.run((task.type, task.name, task.def_ref), work),
            data.workflow_id,
            f"task {task.task_id} goes to the built-in",
        )

    def _rate_limited(self, task: ScheduleTask) -> float | None:
        """Seconds until the task definition's rate limit (``rateLimitPerFrequency`` per
        ``rateLimitFrequencyInSeconds``, shared with worker tasks of the name, across
        processes) lets a call of ``task`` through, or None when it took a slot now (or
        the task has no limit). A call type only: a script is not rate-limited, as in
        Conductor."""
        td = task.task_def
        if td is None or task.type not in CALL_TASK_TYPES:
            return None
        per, seconds = td.rate_limit_per_frequency or 0, td.rate_limit_frequency_in_seconds or 0
        if per <= 0 or seconds <= 0:
            return None
        now = _now_ms()
        if self.store.try_acquire_rate(task.name, per, seconds, now):
            return None
        window_ms = seconds * 1000
        return (window_ms - now % window_ms) / 1000

    def builtin_result(self, workflow_id: str, task_id: str, attempt: int) -> KeptStep | None:
        """The result envelope :meth:`builtin_here` kept for this attempt and when, or
        None (``engine.runtime.interpreter.BuiltinResult``)."""
        return self.store.get_step_result(workflow_id, task_id, attempt)

    def _builtin_traced(
        self, data: BuiltinInput, deps: ActivityDeps | None = None
    ) -> dict[str, Any]:
        task = data.task
        with span(
            self.tracer,
            ACTIVITY_BUILTIN,
            parent=data.traceparent,
            kind=SpanKind.CLIENT,
            attrs=attributes(
                workflow_id=data.workflow_id,
                task_id=task.task_id,
                task_type=task.type,
                attempt=task.attempt,
            ),
        ) as current:
            with self.store.batch():
                self._write_changes(data.workflow_id, data.records, _now_ms())
            wait = self._rate_limited(task)
            if wait is not None:
                current.set_attribute(STATUS, "DEFERRED")
                return ActivityResult.deferred(wait).to_dict()
            if task.type == TaskType.START_WORKFLOW:
                output = self._start_workflow(data, traceparent_of(current))
                current.set_attribute(STATUS, str(output.get("status")))
                return output
            task_input = dict(dereference(task.input, self.services.payload_cache.read))
            task_input.setdefault(
                ACTIVITY_PREFIX_KEY, activity_prefix(data.workflow_id, task.task_id)
            )
            result = run_activity(deps or self._inline_deps(), task.type, task_input)
            where = PolledTask(
                workflow_id=data.workflow_id,
                task_id=task.task_id,
                attempt=task.attempt,
                ref=task.ref,
            )
            output = self._task_output(where, result)
            current.set_attribute(STATUS, str(output.get("status")))
            return output

    def poll(self, ctx: dt.ActivityContext, raw: Any) -> dict[str, Any]:
        """Poll a long-running built-in activity (asynchronous Logic Apps, Document
        Intelligence) once; the interpreter waits between polls on a durable timer."""
        data = parse(PollInput, raw)
        where = data.task
        with span(
            self.tracer,
            ACTIVITY_POLL,
            parent=data.traceparent,
            kind=SpanKind.CLIENT,
            attrs=attributes(
                workflow_id=where.workflow_id if where else None,
                task_id=where.task_id if where else None,
                task_type=data.type,
                attempt=where.attempt if where else None,
            ),
        ) as current:
            result = run_poll(self._inline_deps(), data.type, dict(data.input))
            output = result.to_dict() if where is None else self._task_output(where, result)
            current.set_attribute(STATUS, str(output.get("status")))
            return output

    def check_task(self, ctx: dt.ActivityContext, raw: Any) -> dict[str, Any]:
        """Where a WORKER attempt stands (a deadline of it is due): the run learns of a
        hand-out here, not from an event (docs/architecture.md, "The interpreter")."""
        data = parse(CheckInput, raw)
        with span(
            self.tracer,
            ACTIVITY_CHECK,
            parent=data.traceparent,
            attrs=attributes(
                workflow_id=data.workflow_id, task_id=data.task_id, attempt=data.attempt
            ),
        ):
            row, lease = self.store.get_task_with_lease(data.task_id)
            if row is None:
                return TaskCheck().wire()
            start, status = row.start_time, row.status
            taken = start
            if lease is not None and lease.attempt == row.attempt:
                start = max(start or 0, lease.acquired_at)  # extended: the response runs anew
                if lease.released and status in (TaskStatus.SCHEDULED, TaskStatus.IN_PROGRESS):
                    # given back (callbackAfterSeconds; SCHEDULED, as Conductor shows it):
                    # taken once, so no poll timeout; the response runs from the update
                    # that gave it back (Conductor's updateTime)
                    start = max(start, row.update_time or 0)
                    status = TaskStatus.IN_PROGRESS
            if start is not None and row.callback_after_seconds > 0:
                # conductor-oss's isResponseTimedOut allows responseTimeoutSeconds plus
                # callbackAfterSeconds: a task waiting out its callback does not time out
                start += row.callback_after_seconds * 1000
            output: dict[str, Any] = dict(row.output_data or {})
            if row.output_ref is not None:
                output = {OUTPUT_REF: row.output_ref}
            return TaskCheck(
                attempt=row.attempt,
                status=status.value,
                worker_id=row.worker_id,
                start_time=taken if taken is not None else start,
                response_from=start,
                output=output,
                reason=row.reason_for_incompletion,
            ).wire()

    # -- dispatch ------------------------------------------------------------------------

    def _dispatch(self, data: DispatchInput, traceparent: str | None = None) -> DispatchResult:
        svc = self.services
        now = _now_ms()
        task = data.task
        task_id, attempt = task.task_id, task.attempt
        task_type = task.name
        previous = task.retried_task_id
        queue, domain = queue_for(task_type, data.priority, data.task_to_domain)
        scheduled = now + int(task.delay_seconds * 1000)

        # values the Decider passed by reference (engine.runtime.payload_refs) are read here
        task_input = dereference(task.input, svc.payload_cache.read)
        try:
            inline, ref = self._offload(
                PayloadKind.TASK_INPUT,
                task_input_key(data.workflow_id, task_id, attempt),
                task_input,
            )
        except PayloadTooLarge as exc:
            # terminal: another attempt would not be smaller
            return DispatchResult(error=f"input of task {task.ref!r}: {exc}", terminal=True)
        message = TaskMessage(
            task_id=task_id,
            workflow_id=data.workflow_id,
            workflow_type=data.workflow_type,
            correlation_id=data.correlation_id,
            task_ref=task.ref,
            task_type=task_type,
            attempt=attempt,
            priority=data.priority,
            domain=domain,
            response_timeout_seconds=(
                task.task_def.response_timeout_seconds if task.task_def is not None else None
            ),
            input=inline if ref is None else None,
            input_ref=ref,
            traceparent=traceparent,
        )

        row = TaskRecord(
            task_id=task_id,
            workflow_id=data.workflow_id,
            reference_task_name=task.ref,
            task_type=TaskType.WORKER.value,
            task_def_name=task_type,
            status=TaskStatus.SCHEDULED,
            attempt=attempt,
            retry_count=attempt - 1,
            seq=task.seq,
            retried_task_id=task.retried_task_id,
            input_data=inline if ref is None else None,
            input_ref=ref,
            scheduled_time=scheduled,
            # the start or retry delay, as Conductor's mappers and DeciderService.retry
            callback_after_seconds=task.callback_after_seconds,
            domain=domain,
            queue_name=queue,
            iteration=_iteration(task.ref, task.def_ref or task.ref),
        )
        with self.store.batch():  # the rows of this step: one transaction
            # the row of this attempt is written once, below, with its queue
            others = [c for c in data.records if (c.task_id, c.attempt) != (task_id, attempt)]
            self._write_changes(data.workflow_id, others, now)
            if previous:
                # the attempt this one retries is over (its final row is written by now)
                self._close_attempt(task_type, previous, attempt - 1, now)
            self.store.upsert_task(row, now)
        if previous:
            # the previous attempt failed or timed out: its message (if handed out) is done
            self.settlement.settle_ended(previous, attempt - 1)
        try:
            self._send(queue, message, domain, task, task.delay_seconds)
        except QueueError as exc:
            return DispatchResult(error=f"cannot queue task {task.ref!r} on {queue!r}: {exc}")

        if not self._polled_since(task_type, now - svc.no_worker_warning_ms):
            warning = (
                f"no worker polled task type {task_type!r} in the last "
                f"{svc.no_worker_warning_ms // 1000} s; task queued on {queue!r}"
            )
            self.store.append_task_log(task_id, f"WARNING: {warning}", now)
            held = self._no_poll_lines.admit(task_type, now)
            if held is not None:
                more = f" ({held} more such tasks since the last such line)" if held else ""
                log.warning("%s: %s%s", data.workflow_id, warning, more)
            return DispatchResult(queue=queue, scheduled_time=scheduled, warning=warning)
        return DispatchResult(queue=queue, scheduled_time=scheduled)

    def _polled_since(self, task_type: str, since: int) -> bool:
        """Whether a worker polled ``task_type`` at ``since`` or later. The latest poll
        time read is remembered, so while workers poll the store is read about once per
        warning window, not once per dispatch."""
        if self._last_polls.get(task_type, -1) >= since:
            return True
        polls = self.store.get_poll_data(task_type)
        latest = max((p.last_poll_time for p in polls), default=-1)
        self._last_polls[task_type] = latest
        return latest >= since

    def _send(
        self,
        queue: str,
        message: TaskMessage,
        domain: str | None,
        task: ScheduleTask,
        delay_seconds: float,
    ) -> None:
        """Send the attempt's message; a queue that does not exist yet (a type without a
        registered task definition, a domain only the start request names) is created
        first, as Conductor has a queue once something is queued to it."""
        svc = self.services
        when = datetime.now(UTC) + timedelta(seconds=delay_seconds) if delay_seconds > 0 else None
        mid = message_id(message.task_id, message.attempt)
        try:
            svc.queue.send(queue, message.body(), message_id=mid, scheduled_enqueue_time=when)
        except QueueNotFound:
            if svc.provisioner is None:
                raise QueueNotFound(
                    f"{queue} (this engine creates no queues: register a task definition "
                    f"for {task.name!r}, or start the run through the API, to create it)"
                ) from None
            domains = [domain] if domain else []
            ensure_queues_exist(svc.provisioner, task.name, domains, task.task_def)
            svc.queue.send(queue, message.body(), message_id=mid, scheduled_enqueue_time=when)

    # -- runs started by a run ------------------------------------------------------------

    def _start_workflow(self, data: BuiltinInput, traceparent: str | None) -> dict[str, Any]:
        """START_WORKFLOW: start the run its ``startWorkflow`` input asks for (Conductor's
        StartWorkflow): the starter's correlation id and task domains unless given. The
        run's id comes from the task attempt, so a repeated activity starts it once. The
        run nests one deeper than its starter (at most ``max_workflow_depth``) and joins
        the starter's trace under ``traceparent``."""
        svc, now, task = self.services, _now_ms(), data.task
        task_input = dereference(task.input, svc.payload_cache.read)
        request = task_input.get("startWorkflow") if isinstance(task_input, dict) else None
        if not isinstance(request, dict):
            return {
                "status": "FAILED",
                "output": {},
                "reason": "Missing 'startWorkflow' in input data.",
            }
        name = request.get("name")
        inline = request.get("workflowDef")
        if not (isinstance(name, str) and name) and not isinstance(inline, dict):
            return {
                "status": "FAILED",
                "output": {},
                "reason": "startWorkflow validation failed. 'name' -> Workflow name cannot be "
                "null or empty. ",
            }
        try:
            if isinstance(inline, dict) and inline:
                definition = WorkflowDef.model_validate(inline)
                definition_json = inline
            else:
                version = request.get("version")
                record = read_definition(self.store, str(name), int(version) if version else None)
                definition, definition_json = (
                    WorkflowDef.model_validate(record.definition),
                    record.definition,
                )
            definition_ref = publish_snapshot_of(
                self.store, svc.payloads, definition_json, definition
            )
        except (SnapshotError, ValueError, TypeError) as exc:
            return {"status": "FAILED", "output": {}, "reason": f"Error starting workflow: {exc}"}
        starter = data.run
        depth = (starter.depth if starter else 0) + 1
        limit = svc.definitions.limits.max_workflow_depth
        if depth > limit:
            # before anything is created: a chain of runs that starts itself stops here
            return {
                "status": "FAILED_WITH_TERMINAL_ERROR",
                "output": {},
                "reason": f"starting workflow {definition.name!r} would nest runs {depth} "
                f"deep, above the limit of {limit} (STEPWAY_MAX_WORKFLOW_DEPTH)",
            }
        workflow_id = str(uuid.uuid5(_STARTED_RUNS, f"{task.task_id}/{task.attempt}"))
        run = NewRun(
            workflow_id=workflow_id,
            name=definition.name,
            version=definition.version,
            input=definition.run_input(request.get("input") or {}),
            variables=definition.run_variables(),
            correlation_id=request.get("correlationId")
            or (starter.correlation_id if starter else None),
            priority=int(request.get("priority") or 0),
            task_to_domain=request.get("taskToDomain")
            or (starter.task_to_domain if starter else {}),
            create_time=now,
            definition_ref=definition_ref,
        )
        created = self.store.create_run(run)
        client = svc.client()
        if created.created or client.get_orchestration_state(workflow_id) is None:
            client.schedule_new_orchestration(
                ORCHESTRATOR_NAME,
                input=RunInput(
                    name=run.name,
                    version=run.version,
                    input=run.input,
                    correlation_id=run.correlation_id,
                    priority=run.priority,
                    task_to_domain=run.task_to_domain,
                    depth=depth,
                    definition_ref=definition_ref,
                    traceparent=traceparent,
                ).wire(),
                instance_id=workflow_id,
            )
        return {"status": "COMPLETED", "output": {"workflowId": workflow_id}}

    # -- child runs ----------------------------------------------------------------------

    def _resolve_child(self, data: ResolveChildInput) -> ChildResolution:
        svc = self.services
        now = _now_ms()
        with self.store.batch():
            self._write_changes(data.workflow_id, data.records, now)
        task = data.task
        child = task.sub_workflow
        name = child.name if child is not None else ""
        depth = data.run.depth + 1
        limit = svc.definitions.limits.max_workflow_depth
        if depth > limit:
            # before anything is created: a chain of runs that starts itself stops here
            return ChildResolution(
                error=f"starting workflow {name!r} would nest runs {depth} deep, above the "
                f"limit of {limit} (STEPWAY_MAX_WORKFLOW_DEPTH)",
                terminal=True,
            )
        inline = child.workflow_definition if child is not None else None
        try:
            if isinstance(inline, dict) and inline:
                # the child's definition given in the parent (subWorkflowParam.
                # workflowDefinition): run as given, not registered
                parsed = WorkflowDef.model_validate(inline)
                name, version = parsed.name, parsed.version
                definition_ref = publish_snapshot_of(self.store, svc.payloads, inline, parsed)
            else:
                # reads the definition once: proves it exists, fixes what the child runs
                record = read_definition(
                    self.store, name, (child.version if child else None) or None
                )
                parsed = WorkflowDef.model_validate(record.definition)
                version = record.version
                definition_ref = publish_snapshot(self.store, svc.payloads, record, parsed)
        except (SnapshotError, ValueError) as exc:
            return ChildResolution(error=str(exc))
        parent = data.run
        task_to_domain = (child.task_to_domain if child else None) or None
        priority = child.child_priority(parent.priority) if child else parent.priority
        with self.store.batch():
            self.store.create_run(
                NewRun(
                    workflow_id=data.child_id,
                    name=name,
                    version=version,
                    definition_ref=definition_ref,
                    # as the child's engine starts it (WorkflowDef.run_input)
                    input=task.input
                    if offloaded(task.input, INPUT_REF) or not isinstance(task.input, dict)
                    else parsed.run_input(
                        child_run_input(
                            task.input, dynamic=isinstance(inline, dict) and bool(inline)
                        )
                    ),
                    variables=parsed.run_variables(),
                    correlation_id=parent.correlation_id,
                    priority=priority,
                    task_to_domain=task_to_domain or parent.task_to_domain,
                    parent_workflow_id=data.workflow_id,
                    parent_task_id=task.task_id,
                    create_time=now,
                )
            )
            # the parent's task names its child the moment the child exists (Conductor's
            # SubWorkflow.start: IN_PROGRESS with subWorkflowId), as the Task API marks a
            # WORKER task IN_PROGRESS at its hand-out; the Decider's record of the same
            # transition (on_child_started) is written with the parent's next activity
            started = TaskUpdate(
                status=TaskStatus.IN_PROGRESS,
                output_data={"subWorkflowId": data.child_id},
                start_time=now,
            )
            shown = _names_its_child(task.input, name, version, task_to_domain, child)
            if shown is not None:
                started.input_data = shown
            self.store.update_task(task.task_id, task.attempt, started, now)
        return ChildResolution(
            name=name,
            version=version,
            task_to_domain=task_to_domain,
            definition_ref=definition_ref,
            priority=priority,
        )

    # -- the run's end -------------------------------------------------------------------

    def _finish(self, data: FinishInput, traceparent: str | None = None) -> RunSummary:
        svc = self.services
        now = _now_ms()
        workflow_id, run, result = data.workflow_id, data.run, data.result
        status = result.status
        reason = result.reason
        # values the run passed by reference (engine.runtime.payload_refs) are read here
        output = dereference(result.output, svc.payload_cache.read)
        variables = dereference(data.variables, svc.payload_cache.read)
        output_ref = None
        try:
            inline, output_ref = self._offload(
                PayloadKind.WORKFLOW_OUTPUT, workflow_output_key(workflow_id), output
            )
        except PayloadTooLarge as exc:
            status, inline, reason = RunStatus.FAILED, {}, str(exc)
        failure_name = self._failure_workflow(run, status)
        failure_record = self._registered_failure(failure_name)
        if failure_record is not None and output_ref is None:
            # Conductor's terminateWorkflow names the failure run in the failed run's output
            inline = {**(inline or {}), FAILURE_WORKFLOW_OUTPUT: failure_run_id(workflow_id)}
        with self.store.batch():  # the run's end and its last rows: one transaction
            self._write_changes(workflow_id, data.records, now)
            self._write_warnings(workflow_id, data.warnings, now)
            failed_refs = list(result.failed_reference_task_names)
            if status == RunStatus.COMPLETED:
                # Conductor's completeWorkflow: the tasks that failed on the way (a retried
                # attempt, an optional task)
                failed_refs = self.store.failed_task_refs(workflow_id)
            end = RunUpdate(
                status=status,
                output=inline if output_ref is None else None,
                output_ref=output_ref,
                variables=variables,
                reason_for_incompletion=reason,
                failed_reference_task_names=failed_refs,
                end_time=now,
            )
            # the row is there but for a run started without one (straight on the durable
            # backend): created then, and ended; a row that has ended already stays as is
            if not self.store.update_run(workflow_id, end, now) and self._created_run_row(
                workflow_id, run, now
            ):
                self.store.update_run(workflow_id, end, now)
        # the backstop: children whose task was canceled in the run's last step
        self._terminate_children(
            {child_id: f"parent {workflow_id} ended" for child_id in data.cancel_children}
        )

        failure_workflow_id = None
        if failure_name:
            failure_workflow_id = self._start_failure_workflow(
                svc.client(), failure_name, failure_record, data, status, reason, now, traceparent
            )
        summary = RunSummary(
            status=status.value,
            output=inline if output_ref is None else {OUTPUT_REF: output_ref},
            reason=reason,
            failure_workflow_id=failure_workflow_id,
        )
        if run.report_end and run.parent_workflow_id and run.parent_task_id:
            self._report_end(run.parent_workflow_id, run.parent_task_id, summary)
        return summary

    def _report_end(self, parent_id: str, parent_task_id: str, summary: RunSummary) -> None:
        """Raise a child run's end on the parent that waits for it by event (a child
        retried in place: ``RunInput.report_end``). A parent that is gone has nothing to
        tell; any other error retries the activity, so that the parent is not left
        waiting."""
        try:
            self.services.client().raise_orchestration_event(
                parent_id, child_end_event(parent_task_id), data=summary.wire()
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
            log.info("parent %s of a resumed child run is gone", parent_id)

    def _created_run_row(self, workflow_id: str, run: RunInput, now: int) -> bool:
        """Create the run's row unless it exists; whether this call created it."""
        return self.store.create_run(
            NewRun(
                workflow_id=workflow_id,
                name=run.name,
                version=run.version,
                input=run.input,
                correlation_id=run.correlation_id,
                priority=run.priority,
                task_to_domain=run.task_to_domain,
                parent_workflow_id=run.parent_workflow_id,
                parent_task_id=run.parent_task_id,
                create_time=now,
            )
        ).created

    def _start_failure_workflow(
        self,
        client: Any,
        name: str,
        record: DefinitionRecord | None,
        data: FinishInput,
        status: RunStatus,
        reason: str | None,
        now: int,
        traceparent: str | None = None,
    ) -> str | None:
        workflow_id, run = data.workflow_id, data.run
        if record is None:
            self.store.update_run(
                workflow_id,
                RunUpdate(
                    reason_for_incompletion=f"{reason or ''} (failure workflow {name!r} "
                    "is not registered)".strip()
                ),
                now,
            )
            return None
        failure_id = failure_run_id(workflow_id)
        failed_task_id = data.result.failed_task_id
        failure_input = {
            # Conductor's terminateWorkflow: the run's input (unless it is kept in the
            # payload store), then what the failure is, under Conductor's names too
            **(run.input if offloaded(run.input, INPUT_REF) is None else {}),
            "workflowId": workflow_id,
            "reason": reason,
            "failedTaskId": failed_task_id,
            "failureTaskId": failed_task_id,
            "failureStatus": status.value,
            "workflowInput": run.input,
            "failedWorkflow": {
                "workflowId": workflow_id,
                "workflowName": run.name,
                "workflowVersion": run.version,
                "status": status.value,
                "reasonForIncompletion": reason,
                "correlationId": run.correlation_id,
            },
        }
        definition = WorkflowDef.model_validate(record.definition)
        failure_input = definition.run_input(failure_input)
        created = self.store.create_run(
            NewRun(
                workflow_id=failure_id,
                name=name,
                version=record.version,
                input=failure_input,
                variables=definition.run_variables(),
                correlation_id=run.correlation_id,
                create_time=now,
            )
        )
        # scheduled when this call created the row, or when an earlier attempt of this
        # (retried) activity created it but stopped before scheduling
        if created.created or client.get_orchestration_state(failure_id) is None:
            client.schedule_new_orchestration(
                ORCHESTRATOR_NAME,
                input=RunInput(
                    name=name,
                    version=record.version,
                    input=failure_input,
                    correlation_id=run.correlation_id,
                    definition_ref=publish_snapshot(
                        self.store, self.services.payloads, record, definition
                    ),
                    # the failure workflow is in the trace of the run that failed
                    traceparent=traceparent,
                ).wire(),
                instance_id=failure_id,
            )
        return failure_id

    def _terminate_children(self, reasons: dict[str, str]) -> None:
        """Terminate child runs (child id -> reason) as the terminate API does: the
        terminate event, which the child's interpreter turns into a TERMINATED end (its own
        finish terminates its children in turn). A child that has ended already ignores
        it. A child whose orchestration does not exist (its attempt ended after the
        resolve activity wrote its run row, before its orchestration was started; or one
        that is gone) has no interpreter to end its row: the row is ended TERMINATED here
        with the same reason, unless it has ended already."""
        if not reasons:
            return
        client = self.services.client()
        for child_id, reason in reasons.items():
            try:
                client.raise_orchestration_event(
                    child_id, TERMINATE_EVENT, data=TerminateEvent(reason=reason).payload()
                )
            except Exception as exc:  # no such orchestration (or the backend erred)
                log.info("could not send child %s the terminate event: %s", child_id, exc)
            # asked whatever the event's fate: a backend may accept an event for an
            # instance that does not exist; an error here retries the activity
            if client.get_orchestration_state(child_id, fetch_payloads=False) is None:
                now = _now_ms()
                self.store.update_run(
                    child_id,
                    RunUpdate(
                        status=RunStatus.TERMINATED, reason_for_incompletion=reason, end_time=now
                    ),
                    now,
                )

    # -- task rows -----------------------------------------------------------------------

    def _write_changes(self, workflow_id: str, changes: list[TaskChange], now: int) -> None:
        variables = [c.variables for c in changes if c.variables is not None]
        if variables:
            # a SET_VARIABLE ran: the run row shows the variables while the run runs
            self.store.update_run(workflow_id, RunUpdate(variables=variables[-1]), now)
        removed: list[str] = []
        for change in changes:
            if change.removed:
                # a DO_WHILE's keepLastN dropped its iteration (its own records came first)
                removed.append(change.ref)
                continue
            row = self._with_instructions(store_row(workflow_id, change))
            existing = self.store.task_state(row.task_id)
            if existing is not None and existing[0] == row.attempt:
                stored = existing[1]
                if (stored == row.status and row.task_type in _WRITTEN_AT_TRANSITION) or (
                    row.task_type == TaskType.WORKER and row.status == TaskStatus.IN_PROGRESS
                ):
                    # written when it happened (the Task API; the child's creation); a
                    # WORKER's IN_PROGRESS is the Task API's alone (a task given back is
                    # SCHEDULED until a worker takes it again)
                    pass
                else:
                    # keep what the dispatch and the Task API wrote (queue, lease, polls),
                    # and the output written at a transition when the change brings none
                    # (a canceled SUB_WORKFLOW still names its child: Conductor cancels a
                    # task by its status)
                    output: dict[str, Any] = (
                        {"output_data": row.output_data, "output_ref": row.output_ref}
                        if row.output_data or row.output_ref is not None
                        else {}  # unset fields are not written (TaskUpdate)
                    )
                    update = TaskUpdate(
                        status=row.status,
                        reason_for_incompletion=row.reason_for_incompletion,
                        end_time=row.end_time,
                        **output,
                    )
                    if row.task_type == TaskType.DO_WHILE:
                        update.iteration = row.iteration  # a loop counts its iterations
                    applied = self.store.update_task(row.task_id, row.attempt, update, now)
                    if applied and row.status.is_terminal and stored == TaskStatus.IN_PROGRESS:
                        # the engine ended an attempt a worker holds (timeout, cancel)
                        self._release_lease(row.task_id, row.attempt)
            else:
                self.store.upsert_task(row, now)
            if change.retried and existing is not None:
                self.store.mark_retried(row.task_id, now)
            if row.task_type == TaskType.WORKER and row.status in _ENGINE_SETTLES:
                # a COMPLETED attempt's message is the Task API's; the engine settles
                # those it ends, as the sweep would (settlement.py, dead_letter_reason)
                self.settlement.settle_ended(
                    row.task_id,
                    row.attempt,
                    dead_letter_reason=dead_letter_reason(
                        row.status, change.retried, row.reason_for_incompletion
                    ),
                )
        if removed:
            self.store.delete_tasks(workflow_id, instances=removed)

    def _write_warnings(self, workflow_id: str, warnings: list[str], now: int) -> None:
        """Run warnings (ALERT_ONLY timeouts): logged, and appended to the log keyed by the
        workflow id (``run_store.list_task_logs(workflow_id)``; the run row has no field)."""
        for warning in warnings:
            log.warning("%s: %s", workflow_id, warning)
            self.store.append_task_log(workflow_id, f"WARNING: {warning}", now)

    def _with_instructions(self, row: TaskRecord) -> TaskRecord:
        """A HUMAN task's row carries the text of the instructions it names
        (``inputParameters.instructions``), read once per process, so whoever completes
        the task sees what to do; the orchestration history keeps only the name."""
        if row.task_type != TaskType.HUMAN or not isinstance(row.input_data, dict):
            return row
        name = row.input_data.get("instructions")
        if not isinstance(name, str) or "instructionsText" in row.input_data:
            return row
        text = self.services.definitions.instruction(name)
        if text is None:
            return row
        return row.model_copy(update={"input_data": {**row.input_data, "instructionsText": text}})

    def _release_lease(self, task_id: str, attempt: int) -> None:
        """Release the lease (and the concurrency slot) of an attempt the engine ended
        (:func:`engine.runtime.settlement.release_slot`)."""
        release_slot(self.store, task_id, attempt)

    def _close_attempt(self, task_type: str, task_id: str, attempt: int, now: int) -> None:
        """End an attempt that is being replaced by the next one (it timed out while a
        worker held it, or was never handed out) and free what it held."""
        row = self.store.get_task(task_id)
        if row is None or row.attempt != attempt or row.status.is_terminal:
            return
        held = row.status == TaskStatus.IN_PROGRESS
        applied = self.store.update_task(
            task_id,
            attempt,
            TaskUpdate(
                status=TaskStatus.TIMED_OUT,
                reason_for_incompletion=f"attempt {attempt} ended without a result",
                end_time=now,
            ),
            now,
        )
        if applied and held:
            self._release_lease(task_id, attempt)

    # -- payloads ------------------------------------------------------------------------

    def _offload(
        self, kind: PayloadKind, key: str, value: Any, text: str | None = None
    ) -> tuple[Any, str | None]:
        """``value`` inline or offloaded (``offload_if_large``); ``text``: its JSON text
        when the caller made it already (``json_text``)."""
        svc = self.services
        if svc.payloads is None:
            return value, None
        if text is not None:
            data = text.encode("utf-8")
            return offload_encoded(svc.payloads, kind, key, value, data, limits=svc.payload_limits)
        return offload_if_large(svc.payloads, kind, key, value, limits=svc.payload_limits)

    def _inline_deps(self) -> ActivityDeps:
        """The activities' settings with their own offload switched off: the engine
        offloads a built-in task's whole output instead (see :meth:`_task_output`), so that
        ``${ref.output...}`` resolves the same way whatever the size."""
        limit = self.services.payload_limits.max_size
        return dataclasses.replace(
            self.services.activity_deps, payload_threshold_bytes=limit, max_payload_bytes=limit
        )

    def _task_output(self, where: PolledTask, result: ActivityResult) -> dict[str, Any]:
        """A built-in task's result with its output offloaded when above the threshold
        (``{"outputRef": ref}``; the Decider reads it for expressions) or failed, naming
        the payload and its size, above the maximum, or failed naming where when it holds
        text no store can keep (NUL, a lone surrogate: an HTTP response or a script's
        result can; PostgreSQL refuses it, so SQLite and PostgreSQL answer alike)."""
        envelope = result.to_dict()
        if not result.output or result.is_pending:
            return envelope
        # encoded once: for the check and for the offload's size
        text = json_text(result.output)
        what = f"the output of task {where.ref!r}"
        unstorable = unstorable_text_problem(result.output, what, text)
        if unstorable is not None:  # the same call would give it again: not retried
            return {
                **envelope,
                "status": "FAILED_WITH_TERMINAL_ERROR",
                "output": {},
                "reason": f"{unstorable[0]}; the run store cannot keep it",
            }
        key = task_output_key(where.workflow_id, where.task_id, where.attempt)
        try:
            _, ref = self._offload(PayloadKind.TASK_OUTPUT, key, result.output, text)
        except PayloadTooLarge as exc:
            return {
                **envelope,
                "status": "FAILED_WITH_TERMINAL_ERROR",
                "output": {},
                "reason": f"output of task {where.ref!r}: {exc}",
            }
        return envelope if ref is None else {**envelope, "output": {OUTPUT_REF: ref}}
