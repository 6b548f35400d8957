"""The Task API's logic: hand tasks out to workers and accept their results.

No FastAPI here; every method is synchronous (the ports are) and the HTTP layer runs
it in a thread. The protocol is ARCHITECTURE.md "Running a worker task"; the message
contract is the docstring of ``engine.run_activities``.

Poll: receive from ``<type>-high`` then ``<type>`` (or only ``<domain>-<type>``), drop
stale messages (row missing, terminal or at another attempt), take a concurrency slot
and a rate token (at a limit the message is requeued with a delay), take the lease and
move the row to IN_PROGRESS in one transaction (``start_task``), raise
``<taskId>.started`` on the run, defer the message, and return Conductor Task JSON.

Update: accepted only from the holder of the current attempt's lease (or, for a
SCHEDULED task, from any worker of the type that never polled it: the Azure Functions
worker shape). A result without ``workerId`` (optional in Conductor's TaskResult) is
taken as the lease holder's; such a worker is then told apart from a later holder of the
same task only by the ``attempt`` extension or by its lease having expired. The row
write is the point of acceptance; it is monotonic, so of two identical posts only one
raises the result event.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from control_plane.auth import Principal
from control_plane.deps import Deps, Settings
from control_plane.problems import ApiError, bad_request, conflict, forbidden, not_found
from engine.definitions import TaskDef
from engine.ports.payload_store import (
    PayloadError,
    PayloadKind,
    PayloadStore,
    PayloadTooLarge,
    check_size,
    offload_if_large,
    payload_key,
    resolve,
    validate_reference,
)
from engine.ports.queue import (
    MessageLockLost,
    MessageNotFound,
    QueueError,
    QueueMessage,
    QueueNotFound,
)
from engine.ports.queue_provisioning import HIGH_PRIORITY_SUFFIX, queue_names
from engine.ports.run_store import Lease, RunRecord, TaskLog, TaskRecord, TaskStatus, TaskUpdate

log = logging.getLogger(__name__)

STARTED_SUFFIX = ".started"  # engine.interpreter.STARTED_SUFFIX
WORKER = "WORKER"
UPLOAD_PREFIX = "payloads/uploads"

ResultStatus = Literal["COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "IN_PROGRESS"]
TERMINAL_RESULTS = ("COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR")


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class TaskExecLogIn(_Wire):
    log: str
    task_id: str | None = None
    created_time: int | None = None


class TaskResultIn(_Wire):
    """Conductor's TaskResult (the fields Stepway reads)."""

    workflow_instance_id: str | None = None
    task_id: str = Field(min_length=1)
    status: ResultStatus
    output_data: dict[str, Any] | None = None
    reason_for_incompletion: str | None = None
    callback_after_seconds: int = Field(default=0, ge=0)
    extend_lease: bool = False
    logs: list[TaskExecLogIn | str] = Field(default_factory=list)
    external_output_payload_storage_path: str | None = None
    worker_id: str | None = None
    #: Stepway extension: the attempt the result is for (from the message body); a
    #: result for another attempt than the task's current one is refused.
    attempt: int | None = Field(default=None, ge=1)


@dataclass(frozen=True)
class UpdateOutcome:
    task_id: str
    task_type: str
    domain: str | None
    #: False for a repeated identical post (nothing written, no event)
    applied: bool
    #: the worker the result was accepted from (its ``workerId``, else the lease holder)
    worker_id: str | None = None


def task_type_name(row: TaskRecord) -> str:
    """The worker task type of a row (rows of WORKER tasks store ``WORKER`` as their
    type; the name comes from the queue: ``<type>``, ``<type>-high`` or
    ``<domain>-<type>``). Other rows: their type (HUMAN, WAIT, ...)."""
    if row.task_type != WORKER or not row.queue_name:
        return row.task_type
    queue = row.queue_name
    if row.domain and queue.startswith(row.domain + "-"):
        return queue[len(row.domain) + 1 :]
    if queue.endswith(HIGH_PRIORITY_SUFFIX):
        return queue[: -len(HIGH_PRIORITY_SUFFIX)]
    return queue


def task_json(
    row: TaskRecord,
    *,
    task_type: str,
    input_data: Any,
    workflow_type: str | None,
    correlation_id: str | None,
    priority: int,
    response_timeout_seconds: int | None = None,
    output_data: Any = None,
) -> dict[str, Any]:
    """Conductor Task JSON (times in epoch ms)."""
    output = output_data if output_data is not None else row.output_data
    return {
        "taskId": row.task_id,
        "taskType": task_type,
        "taskDefName": task_type,
        "status": row.status.value,
        "inputData": input_data if input_data is not None else {},
        "outputData": output if output is not None else {},
        "referenceTaskName": row.reference_task_name,
        "retryCount": row.retry_count,
        "attempt": row.attempt,
        "seq": row.seq,
        "pollCount": row.poll_count,
        "workflowInstanceId": row.workflow_id,
        "workflowType": workflow_type,
        "correlationId": correlation_id,
        "scheduledTime": row.scheduled_time or 0,
        "startTime": row.start_time or 0,
        "endTime": row.end_time or 0,
        "updateTime": row.update_time or 0,
        "responseTimeoutSeconds": response_timeout_seconds or 0,
        "callbackAfterSeconds": row.callback_after_seconds,
        "workerId": row.worker_id,
        "domain": row.domain,
        "workflowPriority": priority,
        "reasonForIncompletion": row.reason_for_incompletion,
        "externalInputPayloadStoragePath": row.input_ref,
        "externalOutputPayloadStoragePath": row.output_ref,
        "queueName": row.queue_name,
        "iteration": row.iteration,
    }


class TaskService:
    def __init__(self, settings: Settings, deps: Deps) -> None:
        self.settings = settings
        self.deps = deps
        self._taskdefs: dict[str, tuple[float, TaskDef | None]] = {}
        self._lock = threading.Lock()

    # --- helpers ----------------------------------------------------------------------

    def taskdef(self, task_type: str) -> TaskDef | None:
        now = time.monotonic()
        with self._lock:
            cached = self._taskdefs.get(task_type)
        if cached is not None and now - cached[0] < self.settings.taskdef_cache_seconds:
            return cached[1]
        record = self.deps.run_store.get_task_def(task_type)
        td = TaskDef.model_validate(record.definition) if record is not None else None
        with self._lock:
            self._taskdefs[task_type] = (now, td)
        return td

    def forget_taskdef(self, task_type: str) -> None:
        with self._lock:
            self._taskdefs.pop(task_type, None)

    def _registered(self, task_type: str) -> TaskDef:
        td = self.taskdef(task_type)
        if td is None:
            raise ApiError(
                404,
                f"task type {task_type!r} has no registered task definition",
                validation_errors=[("taskType", f"unknown task type {task_type!r}")],
            )
        return td

    def _payloads(self) -> PayloadStore:
        if self.deps.payloads is None:
            raise ApiError(501, "no payload store is configured")
        return self.deps.payloads

    def _input_of(self, row: TaskRecord) -> Any:
        if row.input_ref is None:
            return row.input_data
        try:
            return resolve(self._payloads(), None, row.input_ref)
        except PayloadError as exc:
            raise ApiError(502, f"cannot read the input of task {row.task_id}: {exc}") from exc

    def _signal(self, workflow_id: str, name: str, data: Any) -> bool:
        try:
            self.deps.signals.raise_event(workflow_id, name, data)
            return True
        except Exception:
            log.exception("could not raise %s on run %s", name, workflow_id)
            return False

    # --- poll -------------------------------------------------------------------------

    def poll(
        self,
        task_type: str,
        worker_id: str,
        domain: str | None,
        count: int,
        timeout_ms: int,
    ) -> list[dict[str, Any]]:
        td = self._registered(task_type)
        self.deps.run_store.record_poll(task_type, domain, worker_id, self.deps.clock())
        queues = (
            [f"{domain}-{task_type}"] if domain else [task_type + HIGH_PRIORITY_SUFFIX, task_type]
        )
        deadline = time.monotonic() + timeout_ms / 1000
        limit = td.concurrent_exec_limit or 0
        handed: list[dict[str, Any]] = []
        first = True
        while True:
            remaining = deadline - time.monotonic()
            want = count - len(handed)
            if limit > 0:
                want = min(want, limit - self.deps.run_store.concurrency_in_use(task_type))
            if want <= 0:
                # every slot is taken: wait for one to free instead of receiving messages
                # only to requeue them
                if handed or remaining <= 0:
                    break
                time.sleep(min(0.1, remaining))
                first = False
                continue
            for i, queue in enumerate(queues):
                last = i == len(queues) - 1
                wait = 0.0 if (first or not last) else max(0.0, min(remaining, 0.5))
                try:
                    messages = self.deps.queue.receive(
                        queue, max_messages=want, max_wait_seconds=wait, lock_seconds=60.0
                    )
                except QueueNotFound:
                    if domain:
                        raise bad_request(
                            f"no queue {queue!r}: domain {domain!r} is not declared for "
                            f"task type {task_type!r}",
                            "domain",
                        ) from None
                    raise ApiError(
                        503,
                        f"queue {queue!r} does not exist; re-register the task definition",
                        retryable=True,
                    ) from None
                for message in messages:
                    task = self._hand_out(td, task_type, worker_id, queue, message)
                    if task is not None:
                        handed.append(task)
                want = count - len(handed)
                if want <= 0:
                    break
            first = False
            if handed or time.monotonic() >= deadline:
                break
        return handed

    def _hand_out(
        self, td: TaskDef, task_type: str, worker_id: str, queue: str, message: QueueMessage
    ) -> dict[str, Any] | None:
        store, q = self.deps.run_store, self.deps.queue
        try:
            body = message.json()
            task_id = str(body["taskId"])
            attempt = int(body["attempt"])
        except (ValueError, KeyError, TypeError):
            log.warning("dead-lettering malformed message %s on %s", message.message_id, queue)
            q.dead_letter(queue, message, "MalformedMessage", "not a task message")
            return None
        row = store.get_task(task_id)
        if row is None or row.attempt != attempt or row.status.is_terminal:
            q.complete(queue, message)  # stale: the task no longer waits for this attempt
            return None
        now = self.deps.clock()
        if not store.try_acquire_concurrency(task_type, td.concurrent_exec_limit or 0):
            q.requeue(queue, message, self.settings.limit_requeue_delay_seconds)
            return None
        per, freq = td.rate_limit_per_frequency or 0, td.rate_limit_frequency_in_seconds or 0
        if per > 0 and freq > 0 and not store.try_acquire_rate(task_type, per, freq, now):
            store.release_concurrency(task_type)
            q.requeue(queue, message, self.settings.limit_requeue_delay_seconds)
            return None
        started = store.start_task(
            task_id,
            attempt,
            worker_id,
            lease_expires_at=now + td.response_timeout_seconds * 1000,
            now=now,
            sequence_number=message.sequence_number,
            queue_name=queue,
        )
        if started is None:  # stale after all, or a duplicate of a task handed out already
            store.release_concurrency(task_type)
            q.complete(queue, message)
            return None
        self._signal(
            started.workflow_id,
            task_id + STARTED_SUFFIX,
            {"attempt": attempt, "workerId": worker_id, "startTime": now},
        )
        try:
            q.defer(queue, message)
        except MessageLockLost:
            log.warning("lost the lock of %s before deferring it", message.message_id)
        return task_json(
            started,
            task_type=task_type,
            input_data=self._input_of(started),
            workflow_type=body.get("workflowType"),
            correlation_id=body.get("correlationId"),
            priority=int(body.get("priority") or 0),
            response_timeout_seconds=td.response_timeout_seconds,
        )

    # --- update -----------------------------------------------------------------------

    def update(self, result: TaskResultIn, caller: Principal) -> UpdateOutcome:
        store = self.deps.run_store
        row = store.get_task(result.task_id)
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
            return self._complete_non_worker(row, result, caller)
        if not caller.serves(task_type):
            raise forbidden(f"{caller.name} is not a worker of task type {task_type!r}")
        lease = store.get_lease(row.task_id, row.attempt)
        # workerId is optional in Conductor's TaskResult (the official SDKs leave it out
        # of a TaskResult the worker function builds itself): such a result is the
        # lease holder's, whoever polled this attempt with whatever workerid.
        worker_id = result.worker_id or (lease.worker_id if lease is not None else caller.name)
        now = self.deps.clock()
        outcome = UpdateOutcome(row.task_id, task_type, row.domain, True, worker_id)
        repeated = UpdateOutcome(row.task_id, task_type, row.domain, False, worker_id)

        if result.attempt is not None and result.attempt != row.attempt:
            raise conflict(f"task {row.task_id} is at attempt {row.attempt}, not {result.attempt}")
        if row.status.is_terminal:
            if self._same_result(row, result, worker_id):
                return repeated
            raise conflict(f"task {row.task_id} is already {row.status.value}")

        holds = (
            lease is not None
            and lease.worker_id == worker_id
            and not lease.released
            and lease.expires_at > now
        )
        if not holds:
            if (
                result.status == "IN_PROGRESS"
                and row.status == TaskStatus.IN_PROGRESS
                and lease is not None
                and lease.released
                and lease.worker_id == worker_id
                and row.callback_after_seconds == result.callback_after_seconds
            ):
                return repeated  # the same callback posted again
            if self._held_earlier_attempt(row, worker_id):
                raise conflict(
                    f"{worker_id} held an earlier attempt of task {row.task_id}; it is now at "
                    f"attempt {row.attempt}"
                )
            if row.status == TaskStatus.SCHEDULED and (
                lease is None or lease.released or lease.expires_at <= now
            ):
                lease = self._start_unpolled(row, task_type, worker_id, now)
            else:
                why = (
                    "its lease expired"
                    if lease and lease.worker_id == worker_id
                    else ("another worker holds it" if lease else "it was not handed out to it")
                )
                raise conflict(
                    f"{worker_id} may not update task {row.task_id} attempt {row.attempt}: {why}"
                )
        assert lease is not None
        for entry in result.logs:
            text = entry if isinstance(entry, str) else entry.log
            store.append_task_log(row.task_id, text, now)

        if result.status == "IN_PROGRESS":
            self._in_progress(row, result, lease, task_type, worker_id, now)
            return outcome

        output, output_ref = self._store_output(row, result, task_type, caller)
        applied = store.update_task(
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
        )
        if not applied:
            current = store.get_task(row.task_id)
            if current is not None and self._same_result(current, result, worker_id):
                return repeated
            raise conflict(f"task {row.task_id} attempt {row.attempt} changed meanwhile")
        if lease.sequence_number is not None:
            store.release_concurrency(task_type)
        if result.status == "COMPLETED":
            self._settle(lease)
        store.release_lease(row.task_id, row.attempt, worker_id)
        event_output: Any = output if output_ref is None else {"outputRef": output_ref}
        data: dict[str, Any] = {
            "attempt": row.attempt,
            "status": result.status,
            "output": event_output,
            "reason": result.reason_for_incompletion,
            "workerId": worker_id,
        }
        if output_ref is not None:
            data["outputRef"] = output_ref
        if not self._signal(row.workflow_id, row.task_id, data):
            raise ApiError(
                503,
                f"the result of task {row.task_id} was recorded but the run could not be signalled",
                retryable=False,
            )
        return outcome

    def _held_earlier_attempt(self, row: TaskRecord, worker_id: str) -> bool:
        for attempt in range(row.attempt - 1, 0, -1):
            earlier = self.deps.run_store.get_lease(row.task_id, attempt)
            if earlier is not None and earlier.worker_id == worker_id:
                return True
        return False

    @staticmethod
    def _same_result(row: TaskRecord, result: TaskResultIn, worker_id: str) -> bool:
        if row.status.value != result.status or row.worker_id != worker_id:
            return False
        if row.output_ref is not None:
            return True
        return bool((row.output_data or {}) == (result.output_data or {}))

    def _start_unpolled(self, row: TaskRecord, task_type: str, worker_id: str, now: int) -> Lease:
        """A worker that got the task another way (a Service Bus trigger) posts first."""
        td = self.taskdef(task_type)
        rto = td.response_timeout_seconds if td is not None else 3600
        started = self.deps.run_store.start_task(
            row.task_id, row.attempt, worker_id, lease_expires_at=now + rto * 1000, now=now
        )
        lease = self.deps.run_store.get_lease(row.task_id, row.attempt)
        if started is None or lease is None:
            raise conflict(f"task {row.task_id} attempt {row.attempt} was handed out meanwhile")
        self._signal(
            row.workflow_id,
            row.task_id + STARTED_SUFFIX,
            {"attempt": row.attempt, "workerId": worker_id, "startTime": now},
        )
        return lease

    def _in_progress(
        self,
        row: TaskRecord,
        result: TaskResultIn,
        lease: Lease,
        task_type: str,
        worker_id: str,
        now: int,
    ) -> None:
        store = self.deps.run_store
        update = TaskUpdate(
            status=TaskStatus.IN_PROGRESS,
            callback_after_seconds=result.callback_after_seconds,
        )
        if result.output_data is not None:
            update.output_data = result.output_data
        if not store.update_task(row.task_id, row.attempt, update, now):
            raise conflict(f"task {row.task_id} attempt {row.attempt} changed meanwhile")
        if result.callback_after_seconds > 0:
            if lease.sequence_number is not None:
                store.release_concurrency(task_type)
            store.release_lease(row.task_id, row.attempt, worker_id)
            self._requeue(row, lease, task_type, result.callback_after_seconds)
            return
        if result.extend_lease:
            td = self.taskdef(task_type)
            rto = td.response_timeout_seconds if td is not None else 3600
            store.release_lease(row.task_id, row.attempt, worker_id)
            store.acquire_lease(
                row.task_id,
                row.attempt,
                worker_id,
                expires_at=now + rto * 1000,
                now=now,
                sequence_number=lease.sequence_number,
                queue_name=lease.queue_name,
            )
            # a new startTime re-arms the run's response timeout
            self._signal(
                row.workflow_id,
                row.task_id + STARTED_SUFFIX,
                {"attempt": row.attempt, "workerId": worker_id, "startTime": now},
            )

    def _requeue(self, row: TaskRecord, lease: Lease, task_type: str, delay: int) -> None:
        q = self.deps.queue
        if lease.sequence_number is not None and lease.queue_name:
            try:
                for message in q.receive_deferred(lease.queue_name, [lease.sequence_number]):
                    q.requeue(lease.queue_name, message, float(delay))
                return
            except (MessageNotFound, QueueError):
                log.info("deferred message of %s is gone; sending a new one", row.task_id)
        queue = row.queue_name or task_type
        run = self.deps.run_store.get_run(row.workflow_id)
        body: dict[str, Any] = {
            "taskId": row.task_id,
            "workflowId": row.workflow_id,
            "workflowType": run.name if run else None,
            "correlationId": run.correlation_id if run else None,
            "taskRef": row.reference_task_name,
            "taskType": task_type,
            "attempt": row.attempt,
            "priority": run.priority if run else 0,
            "domain": row.domain,
        }
        if row.input_ref is not None:
            body["inputRef"] = row.input_ref
        else:
            body["input"] = row.input_data
        from datetime import UTC, datetime

        q.send(
            queue,
            body,
            message_id=f"{row.task_id}:{row.attempt}#cb{uuid.uuid4().hex[:12]}",
            scheduled_enqueue_time=datetime.now(UTC) + timedelta(seconds=delay),
        )

    def _settle(self, lease: Lease) -> None:
        """Complete the deferred message of a completed attempt."""
        if lease.sequence_number is None or not lease.queue_name:
            return
        q = self.deps.queue
        try:
            for message in q.receive_deferred(lease.queue_name, [lease.sequence_number]):
                q.complete(lease.queue_name, message)
        except (MessageNotFound, QueueError) as exc:
            log.info("deferred message of %s already settled: %s", lease.task_id, exc)

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
        output = result.output_data or {}
        if self.deps.payloads is None:
            return output, None
        try:
            return offload_if_large(
                self.deps.payloads,
                PayloadKind.TASK_OUTPUT,
                payload_key(row.workflow_id, f"{row.task_id}-{row.attempt}-output"),
                output,
            )
        except PayloadTooLarge as exc:
            raise ApiError(413, str(exc), validation_errors=[("$.outputData", str(exc))]) from None

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
        worker_id = result.worker_id or caller.name
        data = {
            "attempt": row.attempt,
            "status": result.status,
            "output": result.output_data or {},
            "reason": result.reason_for_incompletion,
            "workerId": worker_id,
        }
        if not self._signal(row.workflow_id, row.task_id, data):
            raise ApiError(503, "the run could not be signalled", retryable=True)
        return UpdateOutcome(row.task_id, row.task_type, row.domain, True)

    def update_by_ref(
        self,
        workflow_id: str,
        ref: str,
        status: ResultStatus,
        output: dict[str, Any],
        worker_id: str | None,
        caller: Principal,
    ) -> str:
        rows = [
            r for r in self.deps.run_store.list_tasks(workflow_id) if r.reference_task_name == ref
        ]
        if self.deps.run_store.get_run(workflow_id) is None:
            raise not_found(f"workflow {workflow_id} not found")
        if not rows:
            raise not_found(f"workflow {workflow_id} has no task {ref!r}")
        pending = [r for r in rows if not r.status.is_terminal]
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

    # --- reads ------------------------------------------------------------------------

    def get_task(self, task_id: str, caller: Principal) -> dict[str, Any] | None:
        row = self.deps.run_store.get_task(task_id)
        if row is None:
            return None
        task_type = task_type_name(row)
        if not caller.can_read() and not caller.serves(task_type):
            raise forbidden(f"{caller.name} may not read tasks of type {task_type!r}")
        run = self.deps.run_store.get_run(row.workflow_id)
        return self.row_json(row, run)

    def row_json(self, row: TaskRecord, run: RunRecord | None) -> dict[str, Any]:
        task_type = task_type_name(row)
        td = self.taskdef(task_type) if row.task_type == WORKER else None
        input_data: Any = row.input_data
        if row.input_ref is not None and self.deps.payloads is not None:
            try:
                input_data = resolve(self.deps.payloads, None, row.input_ref)
            except PayloadError:
                input_data = None
        return task_json(
            row,
            task_type=task_type,
            input_data=input_data,
            workflow_type=run.name if run else None,
            correlation_id=run.correlation_id if run else None,
            priority=run.priority if run else 0,
            response_timeout_seconds=td.response_timeout_seconds if td else None,
        )

    def check_worker(self, task_id: str, caller: Principal) -> TaskRecord:
        row = self.deps.run_store.get_task(task_id)
        if row is None:
            raise not_found(f"task {task_id} not found")
        task_type = task_type_name(row)
        if not caller.serves(task_type) and not caller.has_role("operator"):
            raise forbidden(f"{caller.name} is not a worker of task type {task_type!r}")
        return row

    def add_log(self, task_id: str, text: str, caller: Principal) -> None:
        self.check_worker(task_id, caller)
        self.deps.run_store.append_task_log(task_id, text, self.deps.clock())

    def logs(self, task_id: str) -> list[TaskLog]:
        return self.deps.run_store.list_task_logs(task_id)

    def queue_sizes(self, task_types: list[str]) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for task_type in task_types:
            total = 0
            for queue in queue_names(task_type, self.settings.task_domains.get(task_type, [])):
                try:
                    depth = self.deps.queue.depth(queue)
                except QueueError:
                    continue
                total += depth.active + depth.scheduled
            sizes[task_type] = total
        return sizes

    def storage_location(
        self,
        path: str | None,
        operation: str,
        payload_type: str,
        task_type: str | None,
        caller: Principal,
    ) -> dict[str, str]:
        op = operation.upper()
        if op not in ("READ", "WRITE"):
            raise bad_request(f"operation must be READ or WRITE, not {operation!r}", "operation")
        kinds = ("WORKFLOW_INPUT", "WORKFLOW_OUTPUT", "TASK_INPUT", "TASK_OUTPUT")
        if payload_type.upper() not in kinds:
            raise bad_request(
                f"payloadType must be one of {', '.join(kinds)}, not {payload_type!r}",
                "payloadType",
            )
        store = self._payloads()
        if task_type is None and caller.task_types is not None and len(caller.task_types) == 1:
            task_type = next(iter(caller.task_types))
        if task_type is not None and not caller.serves(task_type):
            raise forbidden(f"{caller.name} is not a worker of task type {task_type!r}")
        if op == "WRITE":
            if task_type is None and not caller.all_types:
                raise bad_request("taskType is required for this worker", "taskType")
            folder = task_type or "any"
            ref = f"{UPLOAD_PREFIX}/{folder}/{payload_type.lower()}-{uuid.uuid4().hex}.json"
        else:
            if not path:
                raise bad_request("path is required to read a payload", "path")
            try:
                ref = validate_reference(path)
            except ValueError:
                raise bad_request(f"invalid payload path {path!r}", "path") from None
            allowed = (
                caller.can_read()
                or caller.all_types
                or (task_type is not None and ref.startswith(f"{UPLOAD_PREFIX}/{task_type}/"))
            )
            if not allowed:
                raise forbidden(f"{caller.name} may not read {ref!r}")
        url = store.signed_url(
            ref, "write" if op == "WRITE" else "read", self.settings.signed_url_seconds
        )
        return {"uri": url, "path": ref}


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
