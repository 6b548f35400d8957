"""Posting results: offload a large output, retry on transient errors, queue in
memory while the Task API is down, and never drop a refused result silently: a result
the Task API refuses for good (a 4xx other than 409) is replaced by a FAILED result
whose reason says what was refused, so that the run moves on at once instead of
waiting for the task's response timeout. Each try is a span in the run's trace
(:mod:`stepway_worker.tracing`)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from stepway_worker.client import ConflictError, RejectedError, TaskClient, TransientError
from stepway_worker.registry import MAX_REASON, Outcome
from stepway_worker.tracing import WorkerTracing

log = logging.getLogger("stepway_worker")


@dataclass
class PendingResult:
    """A result on its way to the Task API."""

    task_id: str
    task_type: str
    body: dict[str, Any]
    #: the output JSON when it is above the threshold and not uploaded yet
    large_output: bytes | None = None
    tries: int = 0
    created: float = field(default_factory=time.monotonic)
    #: size of the output as JSON, in bytes (named in the reason when it is refused)
    output_bytes: int = 0
    #: why the original result was replaced by a FAILED one (None: not replaced)
    refused: str | None = None
    #: the trace context to post under (the execution span's); None: untraced
    traceparent: str | None = None
    attempt: int | None = None


def make_result(
    task: dict[str, Any],
    outcome: Outcome,
    *,
    worker_id: str,
    payload_threshold: int,
    logs: list[str] | None = None,
) -> PendingResult:
    """The TaskResult body of an outcome (output offloaded later when large)."""
    body: dict[str, Any] = {
        "workflowInstanceId": task.get("workflowInstanceId") or task.get("workflowId"),
        "taskId": task["taskId"],
        "status": outcome.status,
        "outputData": outcome.output,
        "workerId": worker_id,
    }
    if outcome.reason:
        body["reasonForIncompletion"] = outcome.reason
    if outcome.status == "IN_PROGRESS":
        body["callbackAfterSeconds"] = outcome.callback_after_seconds
        if outcome.extend_lease:
            body["extendLease"] = True
    lines = list(outcome.logs) + list(logs or [])
    if lines:
        body["logs"] = [{"log": line, "taskId": task["taskId"]} for line in lines]
    large: bytes | None = None
    encoded = json.dumps(outcome.output, separators=(",", ":")).encode()
    # an IN_PROGRESS output is the state a callback resumes from: the Task API keeps it
    # on the task as posted (it does not read an offloaded one), so it is never uploaded
    if len(encoded) > payload_threshold and outcome.status != "IN_PROGRESS":
        large = encoded
    return PendingResult(
        task["taskId"], str(task.get("taskType") or ""), body, large, output_bytes=len(encoded)
    )


def replace_refused(pending: PendingResult, exc: RejectedError) -> None:
    """Turn a result the Task API refused for good into a FAILED result that names
    the problem. A size refusal (413) cannot succeed on any retry, so it fails the task
    with FAILED_WITH_TERMINAL_ERROR; any other refusal fails the attempt (FAILED) and
    the task definition's retries apply."""
    original = str(pending.body.get("status"))
    if exc.status == 413:
        status = "FAILED_WITH_TERMINAL_ERROR"
        reason = (
            f"the {original} result's outputData is {pending.output_bytes} bytes as JSON, "
            f"too large for the Task API: {exc}"
        )
    else:
        status = "FAILED"
        reason = f"the Task API refused the {original} result (outputData of "
        reason += f"{pending.output_bytes} bytes): {exc}"
    previous = pending.body.get("reasonForIncompletion")
    if previous:
        reason += f"; the handler's reason was: {previous}"
    pending.refused = reason
    pending.large_output = None
    pending.body = {
        key: pending.body[key]
        for key in ("workflowInstanceId", "taskId", "workerId")
        if key in pending.body
    }
    pending.body.update(
        {"status": status, "outputData": {}, "reasonForIncompletion": reason[:MAX_REASON]}
    )


def upload(
    client: TaskClient, task_type: str, task_id: str, data: bytes, name: str, content_type: str
) -> tuple[str, str]:
    """Upload through the external storage location; returns ``(path, uri)``."""
    uri, path = client.storage_location(f"{task_id}/{name}", task_type=task_type or None)
    client.put(uri, data, content_type)
    return path, uri


def send_once(
    client: TaskClient,
    pending: PendingResult,
    tracing: WorkerTracing | None = None,
    *,
    take_next: bool = False,
) -> dict[str, Any] | None:
    """One try: upload a large output if still needed, then post. A refusal for good
    (:class:`RejectedError`) replaces the result by a FAILED one (see
    :func:`replace_refused`) that is posted right away; a transient error on that post
    leaves the replacement in ``pending`` for the next try. Raises the client's errors,
    :class:`RejectedError` only when the replacement is refused too. With ``tracing``
    the try is a span, and the posts carry its ``traceparent``. With ``take_next`` the
    result goes to ``update-v2`` and the next task it hands out is returned (the
    caller's to execute); otherwise (and when there is none) None."""
    if tracing is None:
        return _try_once(client, pending, {}, take_next)
    with tracing.post(
        pending.traceparent, pending.body, pending.task_type, pending.attempt
    ) as headers:
        return _try_once(client, pending, headers, take_next)


def _try_once(
    client: TaskClient, pending: PendingResult, headers: dict[str, str], take_next: bool
) -> dict[str, Any] | None:
    try:
        return _post(client, pending, headers, take_next)
    except RejectedError as exc:
        if pending.refused is not None:
            raise
        log.error(
            "result of task %s refused, posting it as FAILED instead: %s", pending.task_id, exc
        )
        replace_refused(pending, exc)
        return _post(client, pending, headers, take_next)


def _post(
    client: TaskClient, pending: PendingResult, headers: dict[str, str], take_next: bool
) -> dict[str, Any] | None:
    if pending.large_output is not None:
        path, _ = upload(
            client,
            pending.task_type,
            pending.task_id,
            pending.large_output,
            "output.json",
            "application/json",
        )
        pending.body["outputData"] = {}
        pending.body["externalOutputPayloadStoragePath"] = path
        pending.large_output = None
    if take_next:
        return client.update_v2(pending.body, headers=headers)
    client.update(pending.body, headers=headers)
    return None


class Outbox:
    """Results that could not be posted yet, retried in order with exponential
    backoff by one background thread. Connection errors, 5xx, 408 and 429 are
    retried; a 409 (stale attempt) is logged and dropped; any other 4xx replaces the
    result by a FAILED one naming the refusal (:func:`send_once`), which is dropped only
    when it is refused too."""

    def __init__(
        self,
        client: TaskClient,
        *,
        initial: float = 0.1,
        maximum: float = 10.0,
        tracing: WorkerTracing | None = None,
    ) -> None:
        self.client = client
        self.tracing = tracing
        self.initial = initial
        self.maximum = maximum
        self._queue: deque[PendingResult] = deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self.dropped = 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="stepway-outbox", daemon=True)
            self._thread.start()

    def deliver(self, pending: PendingResult) -> bool:
        """Post now; queue for retry on a transient error. True when settled."""
        settled, _ = self._deliver(pending, take_next=False)
        return settled

    def deliver_and_take_next(self, pending: PendingResult) -> dict[str, Any] | None:
        """Post now through ``update-v2`` and return the next task it hands out (None:
        none, or the result is not settled yet). A result that cannot be posted now
        is queued for retry as by :meth:`deliver`, by the plain post: the retries run
        in the outbox's thread, which executes no task."""
        _, task = self._deliver(pending, take_next=True)
        return task

    def _deliver(
        self, pending: PendingResult, *, take_next: bool
    ) -> tuple[bool, dict[str, Any] | None]:
        with self._cond:
            queued_before = bool(self._queue)
        if not queued_before:
            settled, task = self._try(pending, take_next=take_next)
            if settled:
                return True, task
        with self._cond:
            self._queue.append(pending)
            self._cond.notify_all()
        return False, None

    def _try(
        self, pending: PendingResult, *, take_next: bool = False
    ) -> tuple[bool, dict[str, Any] | None]:
        """(settled: posted or dropped for good, the next task ``update-v2`` handed out)."""
        pending.tries += 1
        try:
            task = send_once(self.client, pending, self.tracing, take_next=take_next)
        except TransientError as exc:
            if pending.tries == 1 or pending.tries % 20 == 0:
                log.warning(
                    "result of task %s not posted (try %d), will retry: %s",
                    pending.task_id,
                    pending.tries,
                    exc,
                )
            return False, None
        except ConflictError as exc:
            log.warning("result of task %s dropped: stale attempt: %s", pending.task_id, exc)
            self.dropped += 1
            return True, None
        except RejectedError as exc:
            log.error("FAILED result of task %s refused too, dropped: %s", pending.task_id, exc)
            self.dropped += 1
            return True, None
        except Exception:
            log.exception("result of task %s: unexpected error, will retry", pending.task_id)
            return False, None
        if pending.tries > 1:
            log.info("result of task %s posted after %d tries", pending.task_id, pending.tries)
        self.delivered += 1
        return True, task

    def _loop(self) -> None:
        delay = self.initial
        while True:
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait()
                if not self._queue:
                    return
                head = self._queue[0]
            settled, _ = self._try(head)
            if settled:
                with self._cond:
                    self._queue.popleft()
                    self._cond.notify_all()
                delay = self.initial
                continue
            with self._cond:
                self._cond.wait(delay)
            delay = min(delay * 2, self.maximum)

    def drain(self, timeout: float) -> bool:
        """Wait until every queued result is settled, at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
