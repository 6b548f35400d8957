"""Conductor wire JSON of Stepway's records: Task and Workflow bodies, run summaries."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from control_plane.api.errors import ApiError
from engine.language.definitions import TaskDef, TaskType
from engine.ports.payload_store import (
    PayloadError,
    PayloadKind,
    PayloadStore,
    PayloadTooLarge,
    offload_if_large,
    resolve,
)
from engine.ports.run_store import RunRecord, TaskRecord
from protocol.runs import child_run_id

WORKER = "WORKER"


#: kinds whose ``taskDefName`` Conductor sets to the kind (its mappers), not the name
_KIND_NAMED = frozenset({"FORK", "JOIN", "SWITCH", "DECISION", "EXCLUSIVE_JOIN"})


def task_def_name(row: TaskRecord) -> str:
    """Conductor's ``taskDefName``: a worker task's type; FORK, JOIN, SWITCH, DECISION
    and EXCLUSIVE_JOIN their kind; the other system tasks their name."""
    if row.task_type == WORKER or row.task_type not in _KIND_NAMED:
        return row.task_def_name or row.task_type
    return row.task_type


def _sub_workflow_id(row: TaskRecord, input_data: Any, output: Any) -> str | None:
    """Conductor's Task.subWorkflowId: a SUB_WORKFLOW attempt's own child run once it
    exists (its output names one, or is offloaded), whatever the child's output put
    under the same key (a child whose last task was a SUB_WORKFLOW outputs its own
    child's id, which Conductor keeps in the output and not in this field)."""
    if row.task_type == TaskType.SUB_WORKFLOW and (
        row.output_ref is not None or (isinstance(output, dict) and "subWorkflowId" in output)
    ):
        return child_run_id(row.task_id, row.attempt)
    for data in (output, input_data):
        if isinstance(data, dict) and isinstance(data.get("subWorkflowId"), str):
            return str(data["subWorkflowId"])
    return None


def _queue_wait_time(row: TaskRecord) -> int:
    """Conductor's Task.getQueueWaitTime."""
    if row.start_time and row.scheduled_time:
        if row.update_time and row.callback_after_seconds > 0:
            waited = int(time.time() * 1000) - (row.update_time + row.callback_after_seconds * 1000)
            return max(waited, 0)
        return row.start_time - row.scheduled_time
    return 0


def task_type_name(row: TaskRecord) -> str:
    """The task type a row is served as: for a WORKER task its worker task type (stored
    on the row), for the others their kind (HUMAN, WAIT, ...)."""
    if row.task_type == WORKER and row.task_def_name:
        return row.task_def_name
    return row.task_type


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
    workflow_task: dict[str, Any] | None = None,
    task_def: TaskDef | None = None,
    traceparent: str | None = None,
) -> dict[str, Any]:
    """Conductor Task JSON (times in epoch ms), field for field as Conductor's Task. A
    hand-out adds ``traceparent``, the W3C trace context of the dispatch that queued the
    attempt: Stepway's SDKs make it the parent of the worker's span; Conductor's clients
    ignore fields they do not know."""
    output = output_data if output_data is not None else row.output_data
    start_delay = workflow_task.get("startDelay") if workflow_task else 0
    task = {
        "taskId": row.task_id,
        "taskType": task_type,
        "taskDefName": task_def_name(row),
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
        "loopOverTask": row.iteration > 0,
        "retriedTaskId": row.retried_task_id,
        "retried": row.retried,
        "executed": row.status.is_terminal,
        "callbackFromWorker": True,
        "startDelayInSeconds": start_delay if isinstance(start_delay, int) else 0,
        "firstStartTime": row.start_time or 0,
        "queueWaitTime": _queue_wait_time(row),
        "rateLimitPerFrequency": (task_def.rate_limit_per_frequency or 0) if task_def else 0,
        "rateLimitFrequencyInSeconds": (
            (task_def.rate_limit_frequency_in_seconds or 0) if task_def else 0
        ),
        "subWorkflowId": _sub_workflow_id(row, input_data, output),
        "subworkflowChanged": False,
        "workflowTask": workflow_task,
        "isolationGroupId": None,
        "executionNameSpace": None,
    }
    if traceparent:
        task["traceparent"] = traceparent
    return task


def render_task(
    row: TaskRecord,
    run: RunRecord | None,
    payloads: PayloadStore | None,
    td: TaskDef | None,
    workflow_task: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A task row as Conductor Task JSON, with its input read back when offloaded (None
    when it cannot be read) and the response timeout and rate limits of ``td``, the task
    definition it runs with (None for a system task: 0)."""
    input_data: Any = row.input_data
    if row.input_ref is not None and payloads is not None:
        try:
            input_data = resolve(payloads, None, row.input_ref)
        except PayloadError:
            input_data = None
    return task_json(
        row,
        task_type=task_type_name(row),
        input_data=input_data,
        workflow_type=run.name if run else None,
        correlation_id=run.correlation_id if run else None,
        priority=run.priority if run else 0,
        response_timeout_seconds=td.response_timeout_seconds if td else None,
        workflow_task=workflow_task,
        task_def=td,
    )


def workflow_json(
    run: RunRecord,
    payloads: PayloadStore | None,
    tasks: list[dict[str, Any]] | None,
    *,
    definition: dict[str, Any] | None = None,
    failed_task_names: list[str] | None = None,
) -> dict[str, Any]:
    """A run as Conductor Workflow JSON, with its input and output read back when
    offloaded, ``tasks`` when given, and the definition it executes
    (``workflowDefinition``). ``externalInput/OutputPayloadStoragePath`` name only a
    payload that could not be read back (then ``{}``): Conductor's clients take a path as
    "the payload is there, not here" (its Java client's ``getWorkflow`` throws on one)."""
    input_value = read_offloaded(payloads, run.input_ref, run.input)
    output = read_offloaded(payloads, run.output_ref, run.output)
    body: dict[str, Any] = {
        "workflowId": run.workflow_id,
        "workflowName": run.name,
        "workflowType": run.name,
        "workflowVersion": run.version,
        "version": run.version,
        "status": run.status.value,
        "input": input_value or {},
        "output": output or {},
        "variables": run.variables or {},
        "correlationId": run.correlation_id,
        "priority": run.priority,
        "taskToDomain": run.task_to_domain,
        "reasonForIncompletion": run.reason_for_incompletion,
        "failedReferenceTaskNames": run.failed_reference_task_names,
        "failedTaskNames": failed_task_names or [],
        "lastRetriedTime": run.last_retried_time or 0,
        "workflowDefinition": definition,
        "idempotencyKey": run.idempotency_key,
        "rateLimitKey": None,
        "rateLimited": False,
        "history": [],
        "createdBy": None,
        "updatedBy": None,
        "ownerApp": None,
        "event": None,
        "reRunFromWorkflowId": None,
        "parentWorkflowId": run.parent_workflow_id,
        "parentWorkflowTaskId": run.parent_task_id,
        "createTime": run.create_time,
        "startTime": run.create_time,
        "updateTime": run.update_time,
        "endTime": run.end_time or 0,
        "externalInputPayloadStoragePath": run.input_ref if input_value is None else None,
        "externalOutputPayloadStoragePath": run.output_ref if output is None else None,
    }
    # Conductor's Workflow always has its task list (empty when not asked for)
    body["tasks"] = tasks if tasks is not None else []
    return body


def read_offloaded(payloads: PayloadStore | None, ref: str | None, inline: Any) -> Any:
    """The value of a record field: read from the payload store when it is offloaded
    (None when it cannot be read), else the inline value."""
    if ref and payloads is not None:
        try:
            return resolve(payloads, None, ref)
        except PayloadError:
            return None
    return inline


def offload_posted(
    payloads: PayloadStore | None, kind: PayloadKind, key: str, value: Any, field: str
) -> tuple[Any, str | None]:
    """A value an API call puts into a run, kept whole: ``(value, None)``, or above the
    threshold of ``kind`` ``(None, reference)`` with the value stored under ``key`` (inline,
    a large value would ride in the run's messages and fail the run past their limit).
    413 naming ``field`` above the payload store's maximum; nothing is written then."""
    if payloads is None:
        return value, None
    try:
        return offload_if_large(payloads, kind, key, value)
    except PayloadTooLarge as exc:
        raise ApiError(413, str(exc), validation_errors=[(field, str(exc))]) from None


def run_summary(run: RunRecord) -> dict[str, Any]:
    """A run as Conductor's WorkflowSummary: times as UTC text (``endTime`` only once the
    run ended), input and output as JSON text (None when offloaded: their storage paths
    say where), the failed reference names joined by commas."""
    return {
        "workflowId": run.workflow_id,
        "workflowType": run.name,
        "version": run.version,
        "correlationId": run.correlation_id,
        "status": run.status.value,
        "priority": run.priority,
        "startTime": summary_time(run.create_time),
        "updateTime": summary_time(run.update_time),
        "endTime": summary_time(run.end_time) if run.end_time else None,
        "executionTime": (run.end_time - run.create_time) if run.end_time else 0,
        "input": None if run.input_ref else json.dumps(run.input or {}),
        "output": None if run.output_ref else json.dumps(run.output or {}),
        "reasonForIncompletion": run.reason_for_incompletion,
        "event": None,
        "failedReferenceTaskNames": ",".join(run.failed_reference_task_names),
        "externalInputPayloadStoragePath": run.input_ref,
        "externalOutputPayloadStoragePath": run.output_ref,
    }


def summary_time(epoch_ms: int) -> str:
    """Epoch ms as WorkflowSummary's text (``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'``, UTC)."""
    moment = datetime.fromtimestamp(epoch_ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
