"""Task hand-out: a worker's long poll takes messages from the type's queues.

Receive from ``<type>-high`` then ``<type>`` (or only ``<domain>-<type>``); for each
message, in one run-store transaction (``hand_out_task``): drop it when stale (row
missing, terminal or at another attempt), take a concurrency slot (only when the type has
a limit) and a rate token (at a limit the message is requeued with a delay), take the
lease and move the row to IN_PROGRESS. Then raise ``<taskId>.started`` on the run, defer
the message, and return Conductor Task JSON (with the message's ``traceparent``: each
hand-out is a span in the run's trace). The protocol is docs/architecture.md, "The
worker-task protocol".

A poll records the worker's poll time (Conductor's poll data) at most once per
``poll_record_interval_ms`` of the same worker, type and domain, so a busy worker's
polls do not each cost a write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from control_plane.api.errors import ApiError, bad_request
from control_plane.deps import Deps, Settings
from control_plane.services.task_support import InputUnreadable, TaskDefCache, TaskSupport
from control_plane.services.task_tracing import record_handout
from control_plane.services.wire import task_json
from engine.language.definitions import TaskDef
from engine.ports.payload_store import PayloadStoreUnavailable
from engine.ports.queue import (
    MessageLockLost,
    QueueError,
    QueueMessage,
    QueueNotFound,
    QueueUnavailable,
)
from engine.ports.queue_provisioning import queue_names
from engine.ports.run_store import (
    RunStoreUnavailable,
    TaskLimits,
    TaskRecord,
    TaskStatus,
    TaskUpdate,
)
from protocol.events import TaskResultEvent, result_event
from protocol.messages import TaskMessage
from protocol.queues import poll_queues

log = logging.getLogger(__name__)


#: poll data entries kept to skip repeated writes; past it the memory starts afresh
_POLLS_REMEMBERED = 10_000


class TaskHandout(TaskSupport):
    def __init__(self, settings: Settings, deps: Deps, taskdefs: TaskDefCache) -> None:
        super().__init__(settings, deps, taskdefs)
        self._polls_recorded: dict[tuple[str, str | None, str], int] = {}
        self._polls_lock = threading.Lock()

    def _record_poll(self, task_type: str, domain: str | None, worker_id: str) -> None:
        now = self.deps.clock()
        key = (task_type, domain, worker_id)
        with self._polls_lock:
            last = self._polls_recorded.get(key)
            if last is not None and 0 <= now - last < self.settings.poll_record_interval_ms:
                return
            if len(self._polls_recorded) >= _POLLS_REMEMBERED:
                self._polls_recorded.clear()
            self._polls_recorded[key] = now
        self.deps.run_store.record_poll(task_type, domain, worker_id, now)

    def poll(
        self,
        task_type: str,
        worker_id: str,
        domain: str | None,
        count: int,
        timeout_ms: int,
        *,
        holder: str | None = None,
        receiver_gone: Callable[[], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Hand out up to ``count`` tasks, waiting up to ``timeout_ms`` for the first.
        The lease goes to ``holder`` (the authenticated principal; default
        ``worker_id``). ``receiver_gone`` is asked before each receive and before each
        hand-out: once it answers True (the client went away) the poll ends, and a
        message received meanwhile is made visible again instead of handed out."""
        holder = holder or worker_id
        gone = receiver_gone or (lambda: False)
        td = self.taskdefs.effective(task_type)
        self._record_poll(task_type, domain, worker_id)
        queues = poll_queues(task_type, domain)
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
            if gone():
                break
            wait = 0.0 if first else max(0.0, min(remaining, 0.5))
            messages = self._receive(queues, task_type, domain, want, wait)
            for i, message in enumerate(messages):
                if gone():
                    self._make_visible(message.queue, message)
                    continue
                began = time.time_ns()
                try:
                    task = self._hand_out(td, task_type, worker_id, holder, message.queue, message)
                except (RunStoreUnavailable, PayloadStoreUnavailable):
                    # nothing of this hand-out was written (or it was undone): its message
                    # and the others received go back now, not when their locks expire; the
                    # tasks handed out already are the answer, else the caller learns of
                    # the outage
                    for left in messages[i:]:
                        self._make_visible(left.queue, left)
                    if handed:
                        return handed
                    raise
                if task is not None:
                    record_handout(self.deps.tracer_provider, task, began)
                    handed.append(task)
            first = False
            if handed or time.monotonic() >= deadline:
                break
        return handed

    def _receive(
        self, queues: list[str], task_type: str, domain: str | None, want: int, wait: float
    ) -> list[QueueMessage]:
        """Up to ``want`` messages from ``queues`` in their order, in one receive; the
        wait covers all of them."""
        readable = list(queues)
        while readable:
            try:
                return self.deps.queue.receive_first(
                    readable, max_messages=want, max_wait_seconds=wait, lock_seconds=60.0
                )
            except QueueNotFound as exc:
                queue = exc.queue
                if not self.settings.strict_task_definitions and queue in readable:
                    # Conductor: a type (or domain) nothing was queued for yet has no
                    # task to hand out; its queue is made on first use
                    readable.remove(queue)
                    continue
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
        time.sleep(wait)  # no queue yet: wait as a receive would
        return []

    def _make_visible(self, queue: str, message: QueueMessage) -> None:
        try:
            self.deps.queue.requeue(queue, message, 0.0)
        except (QueueError, QueueUnavailable) as exc:  # its lock expires: it comes back
            log.warning("could not put %s back on %s: %s", message.message_id, queue, exc)

    def give_back(self, tasks: list[dict[str, Any]], holder: str) -> None:
        """Undo the hand-out of tasks whose poll response could not be delivered (the
        client went away): release the lease and the concurrency slot and make the
        message visible again, so that the next poll hands the task out at once
        instead of after its response timeout. The row stays IN_PROGRESS; the next
        hand-out starts it again."""
        store = self.deps.run_store
        for task in tasks:
            task_id, attempt = str(task["taskId"]), int(task["attempt"])
            lease = store.get_lease(task_id, attempt)
            row = store.get_task(task_id)
            if lease is None or row is None or lease.worker_id != holder or lease.released:
                continue
            if not store.release_lease(task_id, attempt, holder):
                continue
            task_type = str(task["taskType"])
            log.info("poll of %s went unanswered: task %s goes back", task_type, task_id)
            self._requeue(row, lease, task_type, 0)

    def _limit_delay(self, td: TaskDef) -> float:
        """How long a message a limit refused waits before it is handed out again: at
        most ``limit_requeue_delay_seconds`` (60 s, Conductor's postpone), and no longer
        than the type's rate-limit window, which frees a slot when it ends (a message
        back after a minute for a 10 s window would wait out five windows)."""
        delay = self.settings.limit_requeue_delay_seconds
        window = td.rate_limit_frequency_in_seconds or 0
        if (td.rate_limit_per_frequency or 0) > 0 and window > 0:
            return min(delay, float(window))
        return delay

    def _hand_out(
        self,
        td: TaskDef,
        task_type: str,
        worker_id: str,
        holder: str,
        queue: str,
        message: QueueMessage,
    ) -> dict[str, Any] | None:
        store, q = self.deps.run_store, self.deps.queue
        try:
            body = TaskMessage.model_validate(message.json())
        except (ValueError, TypeError):
            log.warning("dead-lettering malformed message %s on %s", message.message_id, queue)
            q.dead_letter(queue, message, "MalformedMessage", "not a task message")
            return None
        task_id, attempt = body.task_id, body.attempt
        now = self.deps.clock()
        response_timeout = body.response_timeout_seconds or td.response_timeout_seconds
        out = store.hand_out_task(
            task_id,
            attempt,
            worker_id,
            lease_expires_at=now + response_timeout * 1000,
            now=now,
            sequence_number=message.sequence_number,
            queue_name=queue,
            holder=holder,
            limits=TaskLimits(
                task_type=task_type,
                concurrency_limit=td.concurrent_exec_limit or 0,
                rate_per_frequency=td.rate_limit_per_frequency or 0,
                rate_frequency_seconds=td.rate_limit_frequency_in_seconds or 0,
            ),
        )
        if out.limited:
            q.requeue(queue, message, self._limit_delay(td))
            return None
        started = out.task
        if started is None:
            # stale (the task no longer waits for this attempt), or a duplicate of a task
            # handed out already
            q.complete(queue, message)
            return None
        try:
            input_data = self._input_of(started)
        except InputUnreadable as exc:
            # the store answered that the payload is not there: it will not be later.
            # The attempt fails now (as a worker would fail it), so the engine retries
            # the task at once instead of when this hand-out's response timeout is due.
            self._fail_unreadable(started, queue, message, holder, str(exc))
            return None
        except PayloadStoreUnavailable:
            # its offloaded input cannot be read now: the hand-out is undone (lease and
            # slot released; the caller makes the message visible again), so the next
            # poll hands the task out instead of it waiting out its response timeout
            store.release_lease(task_id, attempt, holder)
            raise
        # no event to the run: the engine reads the hand-out (lease) from the run store
        # when a response deadline is due (engine/runtime/interpreter.py, check_task)
        try:
            q.defer(queue, message)
        except MessageLockLost:
            log.warning("lost the lock of %s before deferring it", message.message_id)
        return task_json(
            started,
            task_type=task_type,
            input_data=input_data,
            workflow_type=body.workflow_type,
            correlation_id=body.correlation_id,
            priority=body.priority,
            response_timeout_seconds=response_timeout,
            task_def=td,
            traceparent=body.traceparent,
        )

    def _fail_unreadable(
        self,
        row: TaskRecord,
        queue: str,
        message: QueueMessage,
        holder: str,
        reason: str,
    ) -> None:
        """End the attempt just handed out as FAILED with ``reason`` and tell the run;
        its message is deferred first, for the engine to settle as for any failed
        attempt (retry or dead-letter)."""
        store, now = self.deps.run_store, self.deps.clock()
        log.warning("task %s cannot be handed out: %s", row.task_id, reason)
        try:
            self.deps.queue.defer(queue, message)
        except MessageLockLost:
            log.warning("lost the lock of %s before deferring it", message.message_id)
        failed = TaskUpdate(
            status=TaskStatus.FAILED,
            reason_for_incompletion=reason,
            worker_id=row.worker_id,
            end_time=now,
        )
        if not store.finish_task(row.task_id, row.attempt, failed, now, holder=holder):
            return  # it changed meanwhile (canceled, timed out): that end stands
        event = TaskResultEvent(
            attempt=row.attempt, status="FAILED", output={}, reason=reason, worker_id=None
        )
        self._signal(row.workflow_id, result_event(row.task_id), event.payload())

    # --- update -----------------------------------------------------------------------

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
