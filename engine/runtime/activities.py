"""The interpreter's own activities: record rows, dispatch WORKER tasks, finish runs.

Each activity does one step's I/O and records the task rows the Decider changed since the
last I/O in the same call, so a step costs one activity round trip (docs/architecture.md,
"The interpreter").

The worker message (queue, id, body) is :mod:`protocol.messages`; the task row is written
SCHEDULED with ``queueName`` before the message is sent.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from durabletask import task as dt

from engine.language.definitions import RunStatus, TaskStatus, TaskType
from engine.ports.payload_store import PayloadKind, PayloadTooLarge, offload_if_large
from engine.ports.queue import MessageNotFound, QueueError
from engine.ports.run_store import NewRun, RunUpdate, TaskRecord, TaskUpdate
from engine.runtime import services as services_module
from engine.runtime.builtins import ActivityDeps, run_activity, run_poll
from engine.runtime.payload_refs import dereference
from engine.runtime.snapshots import publish_snapshot
from protocol.events import TERMINATE_EVENT, TerminateEvent
from protocol.messages import TaskMessage, message_id
from protocol.payload_keys import (
    ACTIVITY_PREFIX_KEY,
    OUTPUT_REF,
    activity_prefix,
    offloaded,
    task_input_key,
    task_output_key,
    workflow_output_key,
)
from protocol.queues import queue_for
from protocol.runs import ORCHESTRATOR_NAME, RunInput

log = logging.getLogger(__name__)

#: final statuses of a WORKER attempt whose message goes to the dead-letter queue
#: (COMPLETED_WITH_ERRORS: an optional task whose attempts are exhausted)
FAILED_STATUSES = {
    TaskStatus.FAILED,
    TaskStatus.FAILED_WITH_TERMINAL_ERROR,
    TaskStatus.TIMED_OUT,
    TaskStatus.COMPLETED_WITH_ERRORS,
}


def _iteration(ref: str, def_ref: str) -> int:
    """Innermost DO_WHILE iteration of an instance ref (``a__2__3`` -> 3; 0 outside loops)."""
    suffix = ref[len(def_ref) :]
    return int(suffix.rsplit("__", 1)[-1]) if suffix.startswith("__") else 0


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _output_ref(record: dict[str, Any]) -> str | None:
    return offloaded(record.get("output"), OUTPUT_REF)


def to_store_record(workflow_id: str, record: dict[str, Any]) -> TaskRecord:
    """A Decider task record (its wire form) as a run-store row."""
    attempt = int(record.get("attempt") or 1)
    return TaskRecord(
        task_id=record["taskId"],
        workflow_id=record.get("workflowId") or workflow_id,
        reference_task_name=record["ref"],
        task_type=record["type"],
        status=TaskStatus(record["status"]),
        attempt=attempt,
        retry_count=attempt - 1,
        seq=int(record.get("scheduledTime") or record.get("endTime") or 0),
        input_data=record.get("input") or {},
        output_data=None if _output_ref(record) else (record.get("output") or {}),
        output_ref=_output_ref(record),
        reason_for_incompletion=record.get("reason"),
        scheduled_time=record.get("scheduledTime"),
        start_time=record.get("startTime"),
        end_time=record.get("endTime"),
        worker_id=record.get("workerId"),
        iteration=int(record.get("iteration") or 0),
    )


def _offload(
    svc: services_module.EngineServices, kind: PayloadKind, key: str, value: Any
) -> tuple[Any, str | None]:
    if svc.payloads is None:
        return value, None
    return offload_if_large(svc.payloads, kind, key, value, limits=svc.payload_limits)


def _settle_attempt(
    svc: services_module.EngineServices,
    task_id: str,
    attempt: int,
    *,
    dead_letter_reason: str | None,
) -> None:
    """Complete (or dead-letter) the deferred message of a task attempt that is over."""
    lease = svc.run_store.get_lease(task_id, attempt)
    if lease is None or lease.sequence_number is None or not lease.queue_name:
        return
    try:
        messages = svc.queue.receive_deferred(lease.queue_name, [lease.sequence_number])
    except (MessageNotFound, QueueError):
        return  # already settled (completed by the Task API, or requeued)
    for message in messages:
        if dead_letter_reason is not None:
            svc.queue.dead_letter(
                lease.queue_name, message, "RetriesExhausted", dead_letter_reason[:1000]
            )
        else:
            svc.queue.complete(lease.queue_name, message)


def with_instructions(svc: services_module.EngineServices, row: TaskRecord) -> TaskRecord:
    """A HUMAN task's row carries the text of the instructions it names
    (``inputParameters.instructions``), read once per process, so whoever completes the
    task sees what to do; the orchestration history keeps only the name."""
    if row.task_type != TaskType.HUMAN or not isinstance(row.input_data, dict):
        return row
    name = row.input_data.get("instructions")
    if not isinstance(name, str) or "instructionsText" in row.input_data:
        return row
    text = svc.definitions.instruction(name)
    if text is None:
        return row
    return row.model_copy(update={"input_data": {**row.input_data, "instructionsText": text}})


def release_slot(
    svc: services_module.EngineServices, task_type: str, task_id: str, attempt: int
) -> None:
    """Free the concurrency slot of an attempt a worker polled (its lease carries the
    message's sequence number) when the engine, not the worker, ends it. Call only after
    a status write of this attempt applied: that write happens once, so the slot the Task
    API took at hand-out is given back once, by whoever ended the attempt."""
    lease = svc.run_store.get_lease(task_id, attempt)
    if lease is None or lease.sequence_number is None or lease.released:
        return
    svc.run_store.release_lease(task_id, attempt)
    if task_type:
        svc.run_store.release_concurrency(task_type)


def close_attempt(
    svc: services_module.EngineServices, task_type: str, task_id: str, attempt: int, now: int
) -> None:
    """End an attempt that is being replaced by the next one (it timed out while a worker
    held it, or was never handed out) and free what it held."""
    row = svc.run_store.get_task(task_id)
    if row is None or row.attempt != attempt or row.status.is_terminal:
        return
    held = row.status == TaskStatus.IN_PROGRESS
    applied = svc.run_store.update_task(
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
        release_slot(svc, task_type, task_id, attempt)


def write_records(
    svc: services_module.EngineServices, workflow_id: str, records: list[dict[str, Any]], now: int
) -> None:
    for raw in records:
        row = with_instructions(svc, to_store_record(workflow_id, raw))
        existing = svc.run_store.get_task(row.task_id)
        if existing is not None and existing.attempt == row.attempt:
            # keep what the dispatch and the Task API wrote (queue, lease, poll count)
            applied = svc.run_store.update_task(
                row.task_id,
                row.attempt,
                TaskUpdate(
                    status=row.status,
                    output_data=row.output_data or None,
                    output_ref=row.output_ref,
                    reason_for_incompletion=row.reason_for_incompletion,
                    end_time=row.end_time,
                ),
                now,
            )
            if applied and row.status.is_terminal and existing.status == TaskStatus.IN_PROGRESS:
                # the engine ended an attempt a worker holds (timeout, cancel): free its slot
                release_slot(svc, str(raw.get("name") or ""), row.task_id, row.attempt)
            row = row.model_copy(update={"queue_name": existing.queue_name})
        else:
            svc.run_store.upsert_task(row, now)
        if row.task_type == TaskType.WORKER and row.status.is_terminal:
            if row.status in FAILED_STATUSES:
                _settle_attempt(
                    svc,
                    row.task_id,
                    row.attempt,
                    dead_letter_reason=row.reason_for_incompletion or row.status.value,
                )
            elif row.status == TaskStatus.CANCELED:
                _settle_attempt(svc, row.task_id, row.attempt, dead_letter_reason=None)


def write_warnings(
    svc: services_module.EngineServices, workflow_id: str, warnings: list[str], now: int
) -> None:
    """Run warnings (ALERT_ONLY timeouts): logged, and appended to the log keyed by the
    workflow id (``run_store.list_task_logs(workflow_id)``; the run row has no field)."""
    for warning in warnings:
        log.warning("%s: %s", workflow_id, warning)
        svc.run_store.append_task_log(workflow_id, f"WARNING: {warning}", now)


def record(ctx: dt.ActivityContext, data: dict[str, Any]) -> dict[str, Any]:
    svc = services_module.current()
    now = _now_ms()
    write_records(svc, data["workflowId"], data.get("records") or [], now)
    write_warnings(svc, data["workflowId"], data.get("warnings") or [], now)
    return {}


def dispatch(ctx: dt.ActivityContext, data: dict[str, Any]) -> dict[str, Any]:
    """Queue one attempt of a WORKER task."""
    svc = services_module.current()
    now = _now_ms()
    workflow_id: str = data["workflowId"]
    task = data["task"]
    task_id: str = task["taskId"]
    attempt = int(task["attempt"])
    task_type: str = task["name"]
    if attempt > 1:
        # before the records replace its row: the previous attempt is over
        close_attempt(svc, task_type, task_id, attempt - 1, now)
    write_records(svc, workflow_id, data.get("records") or [], now)
    queue, domain = queue_for(
        task_type, int(data.get("priority") or 0), data.get("taskToDomain") or {}
    )
    delay_s = float(task.get("delaySeconds") or 0)
    scheduled = now + int(delay_s * 1000)

    # values the Decider passed by reference (engine.runtime.payload_refs) are read here
    task_input = dereference(task.get("input") or {}, svc.definitions.load_payload)
    try:
        inline, ref = _offload(
            svc,
            PayloadKind.TASK_INPUT,
            task_input_key(workflow_id, task_id, attempt),
            task_input,
        )
    except PayloadTooLarge as exc:
        # terminal: another attempt would not be smaller
        return {"error": f"input of task {task['ref']!r}: {exc}", "terminal": True}
    message = TaskMessage(
        task_id=task_id,
        workflow_id=workflow_id,
        workflow_type=data.get("workflowType"),
        correlation_id=data.get("correlationId"),
        task_ref=task["ref"],
        task_type=task_type,
        attempt=attempt,
        priority=int(data.get("priority") or 0),
        domain=domain,
        input=inline if ref is None else None,
        input_ref=ref,
    )

    if attempt > 1:
        # the previous attempt failed or timed out: its message (if handed out) is done
        _settle_attempt(svc, task_id, attempt - 1, dead_letter_reason=None)

    row = TaskRecord(
        task_id=task_id,
        workflow_id=workflow_id,
        reference_task_name=task["ref"],
        task_type=TaskType.WORKER.value,
        status=TaskStatus.SCHEDULED,
        attempt=attempt,
        retry_count=attempt - 1,
        # scheduling order, as the Decider's rows (orchestration time + delay)
        seq=int(data.get("nowMs") or now) + int(delay_s * 1000),
        input_data=inline if ref is None else None,
        input_ref=ref,
        scheduled_time=scheduled,
        domain=domain,
        queue_name=queue,
        iteration=_iteration(task["ref"], task.get("defRef") or task["ref"]),
    )
    svc.run_store.upsert_task(row, now)
    try:
        svc.queue.send(
            queue,
            message.body(),
            message_id=message_id(task_id, attempt),
            scheduled_enqueue_time=(datetime.now(UTC) + timedelta(seconds=delay_s))
            if delay_s > 0
            else None,
        )
    except QueueError as exc:
        return {"error": f"cannot queue task {task['ref']!r} on {queue!r}: {exc}"}

    polls = svc.run_store.get_poll_data(task_type)
    if not any(p.last_poll_time >= now - svc.no_worker_warning_ms for p in polls):
        warning = (
            f"no worker polled task type {task_type!r} in the last "
            f"{svc.no_worker_warning_ms // 1000} s; task queued on {queue!r}"
        )
        svc.run_store.append_task_log(task_id, f"WARNING: {warning}", now)
        log.warning("%s: %s", workflow_id, warning)
        return {"queue": queue, "scheduledTime": scheduled, "warning": warning}
    return {"queue": queue, "scheduledTime": scheduled}


def resolve_child(ctx: dt.ActivityContext, data: dict[str, Any]) -> dict[str, Any]:
    """Resolve a SUB_WORKFLOW's definition version and write the child's run row."""
    svc = services_module.current()
    now = _now_ms()
    write_records(svc, data["workflowId"], data.get("records") or [], now)
    task = data["task"]
    child = task.get("subWorkflow") or {}
    name = str(child.get("name") or "")
    try:
        version = child.get("version") or svc.definitions.latest_version(name)
        # reads the definition once: proves it exists and fixes what the child runs
        definition_ref = publish_snapshot(svc.run_store, svc.payloads, name, int(version))
    except LookupError as exc:
        return {"error": str(exc)}
    child_id = data.get("childId")
    if child_id:
        parent = data.get("run") or {}
        svc.run_store.create_run(
            NewRun(
                workflow_id=str(child_id),
                name=name,
                version=int(version),
                input=task.get("input") or {},
                correlation_id=parent.get("correlationId"),
                priority=int(parent.get("priority") or 0),
                task_to_domain=child.get("taskToDomain") or parent.get("taskToDomain") or {},
                parent_workflow_id=data["workflowId"],
                parent_task_id=task.get("taskId"),
                create_time=now,
            )
        )
    return {
        "name": name,
        "version": int(version),
        "taskToDomain": child.get("taskToDomain"),
        "definitionRef": definition_ref,
    }


def ensure_run_row(
    svc: services_module.EngineServices, workflow_id: str, run: dict[str, Any], now: int
) -> None:
    if svc.run_store.get_run(workflow_id) is not None:
        return
    svc.run_store.create_run(
        NewRun(
            workflow_id=workflow_id,
            name=run["name"],
            version=int(run["version"]),
            input=run.get("input") or {},
            correlation_id=run.get("correlationId"),
            priority=int(run.get("priority") or 0),
            task_to_domain=run.get("taskToDomain") or {},
            parent_workflow_id=run.get("parentWorkflowId"),
            parent_task_id=run.get("parentTaskId"),
            create_time=now,
        )
    )


def finish(ctx: dt.ActivityContext, data: dict[str, Any]) -> dict[str, Any]:
    """Record the run's end, cancel children, start the failure workflow."""
    svc = services_module.current()
    now = _now_ms()
    workflow_id: str = data["workflowId"]
    run = data["run"]
    result = data["result"]
    ensure_run_row(svc, workflow_id, run, now)
    write_records(svc, workflow_id, data.get("records") or [], now)
    write_warnings(svc, workflow_id, data.get("warnings") or [], now)
    status = RunStatus(result["status"])
    output = result.get("output") or {}
    reason = result.get("reason")
    output_ref = None
    try:
        inline, output_ref = _offload(
            svc, PayloadKind.WORKFLOW_OUTPUT, workflow_output_key(workflow_id), output
        )
    except PayloadTooLarge as exc:
        status, inline, reason = RunStatus.FAILED, {}, str(exc)
    svc.run_store.update_run(
        workflow_id,
        RunUpdate(
            status=status,
            output=inline if output_ref is None else None,
            output_ref=output_ref,
            variables=data.get("variables"),
            reason_for_incompletion=reason,
            failed_reference_task_names=result.get("failedReferenceTaskNames") or [],
            end_time=now,
        ),
        now,
    )
    client = svc.client()
    for child_id in data.get("cancelChildren") or []:
        try:
            client.raise_orchestration_event(
                child_id,
                TERMINATE_EVENT,
                data=TerminateEvent(reason=f"parent {workflow_id} ended").payload(),
            )
        except Exception as exc:  # the child may be gone already
            log.info("could not cancel child %s: %s", child_id, exc)

    failure_workflow_id = None
    if status in (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.TERMINATED):
        try:
            decider = svc.definitions.decider_for(
                run["name"], int(run["version"]), run.get("definitionRef")
            )
            failure_name = decider.definition.failure_workflow
        except LookupError:  # the definition itself is gone: nothing names a failure flow
            failure_name = None
        if failure_name:
            failure_workflow_id = start_failure_workflow(
                svc,
                client,
                failure_name,
                workflow_id,
                run,
                result,
                status,
                reason,
                now,
            )
    summary: dict[str, Any] = {
        "status": status.value,
        "output": inline if output_ref is None else {"outputRef": output_ref},
        "reason": reason,
    }
    if failure_workflow_id:
        summary["failureWorkflowId"] = failure_workflow_id
    return summary


def start_failure_workflow(
    svc: services_module.EngineServices,
    client: Any,
    name: str,
    workflow_id: str,
    run: dict[str, Any],
    result: dict[str, Any],
    status: RunStatus,
    reason: str | None,
    now: int,
) -> str | None:
    try:
        version = svc.definitions.latest_version(name)
    except LookupError:
        svc.run_store.update_run(
            workflow_id,
            RunUpdate(
                reason_for_incompletion=f"{reason or ''} (failure workflow {name!r} "
                "is not registered)".strip()
            ),
            now,
        )
        return None
    failure_id = f"{workflow_id}-failure"
    failure_input = {
        "workflowId": workflow_id,
        "reason": reason,
        "failedTaskId": result.get("failedTaskId"),
        "failureStatus": status.value,
        "workflowInput": run.get("input") or {},
    }
    created = svc.run_store.create_run(
        NewRun(
            workflow_id=failure_id,
            name=name,
            version=version,
            input=failure_input,
            correlation_id=run.get("correlationId"),
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
                version=version,
                input=failure_input,
                correlation_id=run.get("correlationId"),
                definition_ref=publish_snapshot(svc.run_store, svc.payloads, name, version),
            ).wire(),
            instance_id=failure_id,
        )
    return failure_id


def _inline_deps(svc: services_module.EngineServices) -> ActivityDeps:
    """The activities' settings with their own offload switched off: the engine offloads
    a built-in task's whole output instead (see :func:`_task_output`), so that
    ``${ref.output...}`` resolves the same way whatever the size."""
    deps = svc.activity_deps if isinstance(svc.activity_deps, ActivityDeps) else ActivityDeps()
    limit = svc.payload_limits.max_size
    return dataclasses.replace(deps, payload_threshold_bytes=limit, max_payload_bytes=limit)


def _task_output(
    svc: services_module.EngineServices, data: dict[str, Any], result: dict[str, Any]
) -> dict[str, Any]:
    """A built-in task's result with its output offloaded when above the threshold
    (``{"outputRef": ref}``; the Decider reads it for expressions) or failed, naming the
    payload and its size, above the maximum."""
    output = result.get("output")
    if not output or result.get("status") == "PENDING":
        return result
    key = task_output_key(data["workflowId"], data["taskId"], int(data["attempt"]))
    try:
        _, ref = _offload(svc, PayloadKind.TASK_OUTPUT, key, output)
    except PayloadTooLarge as exc:
        return {
            **result,
            "status": "FAILED_WITH_TERMINAL_ERROR",
            "output": {},
            "reason": f"output of task {data.get('ref')!r}: {exc}",
        }
    return result if ref is None else {**result, "output": {OUTPUT_REF: ref}}


def builtin(ctx: dt.ActivityContext, data: dict[str, Any]) -> dict[str, Any]:
    """Run one attempt of a built-in activity type (HTTP, CALL_TOOL, ...)."""
    svc = services_module.current()
    write_records(svc, data["workflowId"], data.get("records") or [], _now_ms())
    task = data["task"]
    task_input = dict(dereference(task.get("input") or {}, svc.definitions.load_payload))
    task_input.setdefault(ACTIVITY_PREFIX_KEY, activity_prefix(data["workflowId"], task["taskId"]))
    result = run_activity(_inline_deps(svc), str(task["type"]), task_input).to_dict()
    where = {
        "workflowId": data["workflowId"],
        "taskId": task["taskId"],
        "attempt": task["attempt"],
        "ref": task["ref"],
    }
    return _task_output(svc, where, result)


def poll(ctx: dt.ActivityContext, data: dict[str, Any]) -> dict[str, Any]:
    """Poll a long-running built-in activity (asynchronous Logic Apps, Document
    Intelligence) once; the interpreter waits between polls on a durable timer."""
    svc = services_module.current()
    result = run_poll(_inline_deps(svc), str(data["type"]), dict(data.get("input") or {}))
    where = data.get("task") or {}
    if not where:
        return result.to_dict()
    return _task_output(svc, where, result.to_dict())
