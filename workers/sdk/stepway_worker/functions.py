"""The Azure Functions worker shape: a Service Bus trigger receives the queue message
and this helper runs the registered handler and posts the result with the same
contract as the polling worker (docs/architecture.md,
"The worker-task protocol")."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from opentelemetry.trace import TracerProvider

from stepway_worker.auth import TokenProvider, token_provider_from_env
from stepway_worker.client import ConflictError, RejectedError, TaskClient, TransientError
from stepway_worker.delivery import make_result, send_once
from stepway_worker.registry import Outcome, Registry, registry
from stepway_worker.runner import build_context
from stepway_worker.settings import WorkerSettings
from stepway_worker.tracing import TRACEPARENT, WorkerTracing

log = logging.getLogger("stepway_worker")


def parse_message(body: dict[str, Any] | bytes | str) -> dict[str, Any]:
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8")
    if isinstance(body, str):
        body = json.loads(body)
    if not isinstance(body, dict) or not body.get("taskId"):
        raise ValueError("a task message is a JSON object with taskId")
    return body


def handle_queue_message(
    body: dict[str, Any] | bytes | str,
    *,
    task_type: str | None = None,
    handlers: Registry | None = None,
    settings: WorkerSettings | None = None,
    tokens: TokenProvider | None = None,
    client: TaskClient | None = None,
    post_timeout: float = 60.0,
    tracer_provider: TracerProvider | None = None,
) -> dict[str, Any] | None:
    """Run the handler of a Service Bus task message
    ``{taskId, workflowId, taskRef, taskType, attempt, input | inputRef}`` and post the
    result (offloading a large output, retrying transient errors for up to
    ``post_timeout`` seconds). Returns the posted TaskResult body (a FAILED result
    naming the refusal when the Task API refused the handler's result with a 4xx other
    than 409), or None when the Task API refused it as stale (409) or refused the
    FAILED replacement too.

    Raises ``TransientError`` when the result could not be posted in time: let the
    Functions runtime abandon the message so that it is delivered again.

    The message's ``traceparent`` makes the execution a child of the engine's dispatch
    span (:mod:`stepway_worker.tracing`; ``tracer_provider`` default: the global one).
    """
    message = parse_message(body)
    settings = settings or WorkerSettings.from_env()
    task_type = task_type or message.get("taskType")
    if not task_type:
        raise ValueError("the message names no taskType; pass task_type=")
    source = handlers if handlers is not None else registry
    handler = source.get(task_type)
    if handler is None:
        raise LookupError(f"no handler registered for task type {task_type!r}")
    own_client = client is None
    client = client or TaskClient(
        settings.server_url,
        tokens=tokens or token_provider_from_env(settings.env or None),
        timeout=settings.http_timeout,
    )
    try:
        task: dict[str, Any] = {
            "taskId": message["taskId"],
            "taskType": task_type,
            "workflowInstanceId": message.get("workflowId"),
            "referenceTaskName": message.get("taskRef"),
            "attempt": message.get("attempt") or 1,
            "inputData": message.get("input"),
            "outputData": message.get("output") or {},
        }
        if message.get(TRACEPARENT):
            task[TRACEPARENT] = message[TRACEPARENT]
        if message.get("inputRef") and message.get("input") is None:
            # a large input stays in the payload store; the Task API resolves it
            full = client.get_task(str(message["taskId"]))
            task["inputData"] = full.get("inputData") or {}
            task["outputData"] = full.get("outputData") or {}
        ctx = build_context(task, task_type, client, settings.worker_id)
        type_settings = settings.for_type(
            task_type, payload_threshold=handler.payload_threshold, domain=handler.domain
        )
        tracing = WorkerTracing(tracer_provider)
        with tracing.execute(task, task_type) as span:
            outcome: Outcome = handler.execute(ctx)
            tracing.finished(span, outcome.status)
        pending = make_result(
            task,
            outcome,
            worker_id=settings.worker_id,
            payload_threshold=type_settings.payload_threshold,
            logs=ctx.take_pending_logs(),
        )
        pending.traceparent = tracing.carried(span, task)
        pending.attempt = ctx.attempt
        deadline = time.monotonic() + post_timeout
        delay = settings.retry_initial
        while True:
            try:
                send_once(client, pending, tracing)
                return pending.body
            except ConflictError as exc:
                log.warning("result of task %s dropped: stale attempt: %s", ctx.task_id, exc)
                return None
            except RejectedError as exc:
                log.error("FAILED result of task %s refused too: %s", ctx.task_id, exc)
                return None
            except TransientError:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, settings.retry_max)
    finally:
        if own_client:
            client.close()
