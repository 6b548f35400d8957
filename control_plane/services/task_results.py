"""Task results: a worker (or an operator, for HUMAN tasks) posts the outcome of a task.

Accepted only from the holder of the current attempt's lease (or, for a SCHEDULED task,
from any worker of the type that never polled it: the Azure Functions worker shape). With
authentication on, the holder is the authenticated principal that polled the attempt and
``workerId`` is informative; without, it is the polling ``workerId`` (see ``_holder``).
A result without ``workerId`` (optional in Conductor's TaskResult) is taken as the lease
holder's; such a worker is then told apart from a later holder of the same task only by
the ``attempt`` extension or by its lease having expired. The row write is the point of
acceptance; it is monotonic, so of two identical posts only one raises the result event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from control_plane.api.errors import ApiError, bad_request, conflict, forbidden, not_found
from control_plane.auth import Principal
from control_plane.services.run_definitions import RunDefinitions
from control_plane.services.task_support import WORKER, TaskSupport
from control_plane.services.wire import offload_posted, task_type_name
from control_plane.services.wire_types import Int64, NonNegative32, Text
from engine.language.definitions import CALL_TASK_TYPES, TaskType
from engine.ports.payload_store import (
    PayloadError,
    PayloadKind,
    PayloadTooLarge,
    check_size,
    validate_reference,
)
from engine.ports.queue import QueueUnavailable
from engine.ports.run_store import Lease, TaskRecord, TaskStatus, TaskUpdate
from engine.runtime.settlement import MessageSettlement
from protocol.events import TaskResultEvent, result_event
from protocol.limits import MAX_INT32
from protocol.payload_keys import OUTPUT_REF, UPLOAD_PREFIX, task_output_key

log = logging.getLogger(__name__)

ResultStatus = Literal["COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "IN_PROGRESS"]
TERMINAL_RESULTS = ("COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR")


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class TaskExecLogIn(_Wire):
    log: Text
    task_id: Text | None = None
    created_time: Int64 | None = None


class TaskResultIn(_Wire):
    """Conductor's TaskResult (the fields Stepway reads)."""

    workflow_instance_id: Text | None = None
    task_id: Text = Field(min_length=1)
    status: ResultStatus
    output_data: dict[str, Any] | None = None
    reason_for_incompletion: Text | None = None
    callback_after_seconds: NonNegative32 = 0
    extend_lease: bool = False
    logs: list[TaskExecLogIn | Text] = Field(default_factory=list)
    external_output_payload_storage_path: Text | None = None
    worker_id: Text | None = None
    #: Stepway extension: the attempt the result is for (from the message body); a
    #: result for another attempt than the task's current one is refused.
    attempt: Annotated[int, Field(ge=1, le=MAX_INT32)] | None = None


@dataclass(frozen=True)
class UpdateOutcome:
    task_id: str
    task_type: str
    domain: str | None
    #: False for a repeated identical post (nothing written, no event)
    applied: bool
    #: the worker the result was accepted from (its ``workerId``, else the lease holder)
    worker_id: str | None = None


@dataclass(frozen=True)
class ResultSignal:
    """The event an accepted result still has to raise on its run, and what follows
    (:meth:`TaskResults.accept`)."""

    workflow_id: str
    task_id: str
    event_name: str
    payload: dict[str, Any]
    lease: Lease
    #: the attempt COMPLETED: its message is done once the run is told
    completed: bool


class TaskResults(TaskSupport):
    def update(self, result: TaskResultIn, caller: Principal) -> UpdateOutcome:
        """Accept a result and tell its run (:meth:`accept`, :meth:`raise_signal` and
        :meth:`after_signal` in turn)."""
        outcome, signal = self.accept(result, caller)
        if signal is not None:
            self.after_signal(signal, self.raise_signal(signal))
        return outcome

    def raise_signal(self, signal: ResultSignal) -> bool:
        """Raise the result's event on its run: a call to the durable backend, the one
        part of a result that waits on another process (an event loop runs it in a
        thread). Whether the backend took it."""
        return self._signal(signal.workflow_id, signal.event_name, signal.payload)

    def after_signal(self, signal: ResultSignal, signalled: bool) -> None:
        """Settle the message of a COMPLETED attempt; a 503 when the run was not told."""
        if signal.completed:
            # nothing is left to decide: the message is done (a failed attempt's message
            # is the engine's to complete for a retry or dead-letter)
            self._settle(signal.lease)
        if not signalled:
            raise ApiError(
                503,
                f"the result of task {signal.task_id} was recorded but the run could not be "
                "signalled",
                retryable=False,
            )

    def accept(
        self, result: TaskResultIn, caller: Principal
    ) -> tuple[UpdateOutcome, ResultSignal | None]:
        """Check and record a result (the run store and payload store only); the event it
        has to raise on its run, None when there is none to raise (a repeat, IN_PROGRESS,
        a task of the engine's completed from outside, which has told its run)."""
        store = self.deps.run_store
        row, lease = store.get_task_with_lease(result.task_id)
        if row is None:
            raise not_found(f"task {result.task_id} not found")
        if result.workflow_instance_id and result.workflow_instance_id != row.workflow_id:
            raise bad_request(
                f"task {row.task_id} belongs to workflow {row.workflow_id}, not "
                f"{result.workflow_instance_id}",
                "$.workflowInstanceId",
            )
        task_type = task_type_name(row)
        if row.task_type != WORKER:
            return self._complete_non_worker(row, result, caller), None
        if not caller.serves(task_type):
            raise forbidden(f"{caller.name} is not a worker of task type {task_type!r}")
        # workerId is optional in Conductor's TaskResult (the official SDKs leave it out
        # of a TaskResult the worker function builds itself): such a result is the
        # current attempt's, from the worker that polled it.
        worker_id = result.worker_id or (row.worker_id if lease is not None else None)
        worker_id = worker_id or caller.name
        holder = self._holder(row, result, lease, caller)
        now = self.deps.clock()
        outcome = UpdateOutcome(row.task_id, task_type, row.domain, True, worker_id)
        repeated = UpdateOutcome(row.task_id, task_type, row.domain, False, worker_id)

        if result.attempt is not None and result.attempt != row.attempt:
            raise conflict(f"task {row.task_id} is at attempt {row.attempt}, not {result.attempt}")
        if row.status.is_terminal:
            if self._same_result(row, result, worker_id):
                return repeated, None
            raise conflict(f"task {row.task_id} is already {row.status.value}")

        holds = (
            lease is not None
            and lease.worker_id == holder
            and not lease.released
            and lease.expires_at > now
        )
        if not holds:
            if (
                result.status == "IN_PROGRESS"
                # IN_PROGRESS: a row given back before give_back_task existed
                and row.status in (TaskStatus.SCHEDULED, TaskStatus.IN_PROGRESS)
                and lease is not None
                and lease.released
                and lease.worker_id == holder
                and row.callback_after_seconds == result.callback_after_seconds
            ):
                return repeated, None  # the same callback posted again
            if self._held_earlier_attempt(row, holder):
                raise conflict(
                    f"{worker_id} held an earlier attempt of task {row.task_id}; it is now at "
                    f"attempt {row.attempt}"
                )
            if row.status == TaskStatus.SCHEDULED and (
                lease is None or lease.released or lease.expires_at <= now
            ):
                lease = self._start_unpolled(row, task_type, worker_id, holder, now)
            else:
                why = (
                    "its lease expired"
                    if lease and lease.worker_id == holder
                    else ("another worker holds it" if lease else "it was not handed out to it")
                )
                raise conflict(
                    f"{worker_id} may not update task {row.task_id} attempt {row.attempt}: {why}"
                )
        assert lease is not None
        # stored with the update they came with, in its transaction: a refused or
        # failed update keeps none of them, so the worker's retry adds them once
        logs = [entry if isinstance(entry, str) else entry.log for entry in result.logs]

        if result.status == "IN_PROGRESS":
            self._in_progress(row, result, lease, task_type, caller, holder, now, logs)
            return outcome, None

        output, output_ref = self._store_output(row, result, task_type, caller)
        # the point of acceptance; the lease (and the concurrency slot it holds) goes with it
        applied = store.finish_task(
            row.task_id,
            row.attempt,
            TaskUpdate(
                status=TaskStatus(result.status),
                output_data=output,
                output_ref=output_ref,
                reason_for_incompletion=result.reason_for_incompletion,
                worker_id=worker_id,
                end_time=now,
            ),
            now,
            holder=holder,
            logs=logs,
        )
        if not applied:
            current = store.get_task(row.task_id)
            if current is not None and self._same_result(current, result, worker_id):
                return repeated, None
            raise conflict(f"task {row.task_id} attempt {row.attempt} changed meanwhile")
        event = TaskResultEvent(
            attempt=row.attempt,
            status=result.status,
            output=output if output_ref is None else {OUTPUT_REF: output_ref},
            reason=result.reason_for_incompletion,
            worker_id=worker_id,
            output_ref=output_ref,
        )
        signal = ResultSignal(
            workflow_id=row.workflow_id,
            task_id=row.task_id,
            event_name=result_event(row.task_id),
            payload=event.payload(),
            lease=lease,
            completed=result.status == "COMPLETED",
        )
        return outcome, signal

    def _settle(self, lease: Lease) -> None:
        """Complete the deferred message of an attempt whose result is recorded and
        signalled. A queue unavailable now leaves it deferred (invisible, never handed
        out again) rather than failing a result that stands: answering 503 here would
        make the worker's retry a repeat, which signals nothing. The sweep of deferred
        messages settles it once the queue is back (engine/runtime/deferred_sweep.py)."""
        try:
            MessageSettlement(
                self.deps.run_store, self.deps.queue, self.deps.clock, mark_later=True
            ).settle(lease)
        except QueueUnavailable as exc:
            log.warning(
                "the result of task %s stands; its deferred message %s of %s was not completed: %s",
                lease.task_id,
                lease.sequence_number,
                lease.queue_name,
                exc,
            )

    def _held_earlier_attempt(self, row: TaskRecord, holder: str) -> bool:
        for attempt in range(row.attempt - 1, 0, -1):
            earlier = self.deps.run_store.get_lease(row.task_id, attempt)
            if earlier is not None and earlier.worker_id == holder:
                return True
        return False

    def _holder(
        self, row: TaskRecord, result: TaskResultIn, lease: Lease | None, caller: Principal
    ) -> str:
        """Who posts the result, as a lease holder. With authentication on: the
        authenticated principal, whatever ``workerId`` says (leases are bound to it).
        Without: the ``workerId``; a result naming another worker than the current
        lease holder is the current attempt's (Conductor does not check it) unless
        that worker held an earlier attempt of the task (a stale result: 409)."""
        if caller.subject is not None:
            return caller.subject
        if lease is None:
            return result.worker_id or caller.name
        named = result.worker_id
        if named is None or named == lease.worker_id:
            return lease.worker_id
        if self._held_earlier_attempt(row, named):
            raise conflict(
                f"{named} held an earlier attempt of task {row.task_id}; it is now at "
                f"attempt {row.attempt}"
            )
        return lease.worker_id

    @staticmethod
    def _same_result(row: TaskRecord, result: TaskResultIn, worker_id: str) -> bool:
        if row.status.value != result.status or row.worker_id != worker_id:
            return False
        if row.output_ref is not None:
            return True
        return bool((row.output_data or {}) == (result.output_data or {}))

    def _start_unpolled(
        self, row: TaskRecord, task_type: str, worker_id: str, holder: str, now: int
    ) -> Lease:
        """A worker that got the task another way (a Service Bus trigger) posts first."""
        td = self.taskdefs.get(task_type)
        rto = td.response_timeout_seconds if td is not None else 3600
        started = self.deps.run_store.start_task(
            row.task_id,
            row.attempt,
            worker_id,
            lease_expires_at=now + rto * 1000,
            now=now,
            holder=holder,
        )
        lease = self.deps.run_store.get_lease(row.task_id, row.attempt)
        if started is None or lease is None:
            raise conflict(f"task {row.task_id} attempt {row.attempt} was handed out meanwhile")
        return lease

    def _in_progress(
        self,
        row: TaskRecord,
        result: TaskResultIn,
        lease: Lease,
        task_type: str,
        caller: Principal,
        holder: str,
        now: int,
        logs: list[str],
    ) -> None:
        store = self.deps.run_store
        # the status is the store operation's: give_back_task sets SCHEDULED, and an
        # update without a callback keeps IN_PROGRESS
        update = TaskUpdate(callback_after_seconds=result.callback_after_seconds)
        path = result.external_output_payload_storage_path
        keeps_stored = row.output_ref is not None and not result.output_data and not path
        if (result.output_data is not None or path) and not keeps_stored:
            # kept as a final result's output is: a large one in the payload store, one
            # the worker stored there by its path (Conductor's updateTask keeps the path;
            # an update with no output and no path keeps the output stored there, as
            # Conductor's keeps the task's path when it is given none)
            update.output_data, update.output_ref = self._store_output(
                row, result, task_type, caller
            )
        changed = f"task {row.task_id} attempt {row.attempt} changed meanwhile"
        if result.callback_after_seconds > 0:
            # SCHEDULED again, as Conductor's updateTask sets it; the lease (and its
            # concurrency slot) goes; the message comes back later
            if not store.give_back_task(
                row.task_id, row.attempt, update, now, holder=holder, logs=logs
            ):
                raise conflict(changed)
            self._requeue(row, lease, task_type, result.callback_after_seconds)
            return
        update.status = TaskStatus.IN_PROGRESS
        if not store.update_task(row.task_id, row.attempt, update, now, logs=logs):
            raise conflict(changed)
        if result.extend_lease:
            td = self.taskdefs.get(task_type)
            rto = td.response_timeout_seconds if td is not None else 3600
            store.extend_lease(
                row.task_id, row.attempt, holder, expires_at=now + rto * 1000, now=now
            )
            # the lease's new acquired time moves the response deadline: the engine reads
            # it when the deadline it knew comes due

    def _store_output(
        self, row: TaskRecord, result: TaskResultIn, task_type: str, caller: Principal
    ) -> tuple[Any, str | None]:
        path = result.external_output_payload_storage_path
        if path:
            try:
                validate_reference(path)
            except ValueError:
                raise bad_request(
                    f"invalid payload path {path!r}", "$.externalOutputPayloadStoragePath"
                ) from None
            if not caller.all_types and not path.startswith(f"{UPLOAD_PREFIX}/{task_type}/"):
                raise forbidden(
                    f"{caller.name} may only reference payloads under {UPLOAD_PREFIX}/{task_type}/"
                )
            store = self._payloads()
            try:
                size = len(store.get(path))
                check_size(f"output of task {row.task_id}", size, store.limits)
            except PayloadTooLarge as exc:
                raise ApiError(413, str(exc)) from None
            except PayloadError:
                raise bad_request(
                    f"no payload at {path!r}", "$.externalOutputPayloadStoragePath"
                ) from None
            return None, path
        return offload_posted(
            self.deps.payloads,
            PayloadKind.TASK_OUTPUT,
            task_output_key(row.workflow_id, row.task_id, row.attempt),
            result.output_data or {},
            "$.outputData",
        )

    def _complete_non_worker(
        self, row: TaskRecord, result: TaskResultIn, caller: Principal
    ) -> UpdateOutcome:
        """HUMAN/WAIT and other engine tasks completed from outside: operator only.
        The interpreter records the row when it applies the event."""
        if not caller.has_role("operator"):
            raise forbidden(f"{caller.name} lacks the 'operator' role to complete {row.task_type}")
        if row.status.is_terminal:
            raise conflict(f"task {row.task_id} is already {row.status.value}")
        if result.status == "IN_PROGRESS":
            raise bad_request(f"a {row.task_type} task can only be completed or failed", "$.status")
        refused = self._ended_by_the_engine(row)
        if refused is not None:
            raise conflict(f"task {row.task_id} is a {row.task_type} task {refused}")
        worker_id = result.worker_id or caller.name
        # a large output goes to the payload store, as a worker's: inline, it would ride
        # in the run's history and messages (and fail the run past their limit)
        output, output_ref = self._store_output(row, result, task_type_name(row), caller)
        event = TaskResultEvent(
            attempt=row.attempt,
            status=result.status,
            output=output if output_ref is None else {OUTPUT_REF: output_ref},
            reason=result.reason_for_incompletion,
            worker_id=worker_id,
            output_ref=output_ref,
        )
        if not self._signal(row.workflow_id, result_event(row.task_id), event.payload()):
            raise ApiError(503, "the run could not be signalled", retryable=True)
        return UpdateOutcome(row.task_id, row.task_type, row.domain, True)

    def _ended_by_the_engine(self, row: TaskRecord) -> str | None:
        """Why the run does not take an update of this task (the end of that sentence),
        or None when it does: a HUMAN or WAIT task, a call with ``asyncComplete`` (its
        workflow task's field; a call the definition does not name, one a dynamic fork
        made, is given the benefit). Accepting any other would answer 200 for a result
        the run never reads."""
        kind = row.task_type
        if kind in (TaskType.HUMAN, TaskType.WAIT):
            return None
        if kind in CALL_TASK_TYPES:
            run = self.deps.run_store.get_run(row.workflow_id)
            definition = RunDefinitions(self.deps).of(run) if run is not None else None
            workflow_task = (
                definition.workflow_task(row.reference_task_name) if definition else None
            )
            if workflow_task is None or workflow_task.get("asyncComplete"):
                return None
            return (
                "without asyncComplete: it ends when its call answers (set asyncComplete "
                "on the workflow task to complete it by a task update)"
            )
        if kind == TaskType.SUB_WORKFLOW:
            return "that ends with its child run: complete or terminate the child run"
        return "the engine ends: it does not take task updates"

    def update_by_ref(
        self,
        workflow_id: str,
        ref: str,
        status: ResultStatus,
        output: dict[str, Any],
        worker_id: str | None,
        caller: Principal,
        *,
        pending_only: bool = False,
    ) -> str:
        """Post the result to the task of reference ``ref``: its latest pending attempt,
        else its latest row (a repeat, or a 409). ``pending_only``: 404 when none is
        pending (the synchronous form's answer). The task's id."""
        rows = [
            r for r in self.deps.run_store.list_tasks(workflow_id) if r.reference_task_name == ref
        ]
        if self.deps.run_store.get_run(workflow_id) is None:
            raise not_found(f"Workflow with id: {workflow_id} not found.")
        pending = [r for r in rows if not r.status.is_terminal]
        if pending_only and not pending:
            raise not_found(f"Found no running task {ref} of workflow {workflow_id} to update")
        if not rows:
            raise not_found(f"workflow {workflow_id} has no task {ref!r}")
        row = pending[-1] if pending else rows[-1]
        self.update(
            TaskResultIn(
                workflow_instance_id=workflow_id,
                task_id=row.task_id,
                status=status,
                output_data=output,
                worker_id=worker_id,
            ),
            caller,
        )
        return row.task_id
