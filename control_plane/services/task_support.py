"""What the task services share: the task definition cache, reading a task's input
and raising events on a run."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from control_plane.api.errors import ApiError
from control_plane.deps import Deps, Settings
from engine.language.definitions import TaskDef
from engine.ports.payload_store import PayloadError, PayloadStore, resolve
from engine.ports.queue import MessageNotFound, QueueError
from engine.ports.run_store import Lease, TaskRecord
from protocol.messages import TaskMessage, callback_message_id

log = logging.getLogger(__name__)

WORKER = "WORKER"


class InputUnreadable(ApiError):
    """The offloaded input of a task is not in the payload store (a 502 where it is
    read for a caller; at a hand-out the attempt fails instead)."""


class TaskDefCache:
    """Task definitions by type, re-read at most every ``taskdef_cache_seconds``."""

    def __init__(self, settings: Settings, deps: Deps) -> None:
        self.settings = settings
        self.deps = deps
        self._taskdefs: dict[str, tuple[float, TaskDef | None]] = {}
        self._lock = threading.Lock()
        #: changes each time a task definition is forgotten (registered, deleted) or a
        #: workflow definition registered or deleted (what a snapshot holds)
        self.generation = 0

    def get(self, task_type: str) -> TaskDef | None:
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

    def forget(self, task_type: str) -> None:
        with self._lock:
            self._taskdefs.pop(task_type, None)
            self.generation += 1

    def workflows_changed(self) -> None:
        """A workflow definition was registered or deleted: a run's snapshot, which
        pins the latest version of the children it names, is built again."""
        with self._lock:
            self.generation += 1

    def effective(self, task_type: str) -> TaskDef:
        """The task definition ``task_type`` runs with: the registered one, else
        Conductor's default (``new TaskDef(name)``); in strict mode 404 when none is
        registered."""
        td = self.get(task_type)
        if td is not None:
            return td
        if self.settings.strict_task_definitions:
            return self.registered(task_type)
        return TaskDef(name=task_type)

    def registered(self, task_type: str) -> TaskDef:
        """The task definition of ``task_type``; 404 when there is none."""
        td = self.get(task_type)
        if td is None:
            raise ApiError(
                404,
                f"task type {task_type!r} has no registered task definition",
                validation_errors=[("taskType", f"unknown task type {task_type!r}")],
            )
        return td


class TaskSupport:
    """The base of the task services."""

    def __init__(self, settings: Settings, deps: Deps, taskdefs: TaskDefCache) -> None:
        self.settings = settings
        self.deps = deps
        self.taskdefs = taskdefs

    def _payloads(self) -> PayloadStore:
        if self.deps.payloads is None:
            raise ApiError(501, "no payload store is configured")
        return self.deps.payloads

    def _input_of(self, row: TaskRecord) -> Any:
        """The task's input, read from the payload store when offloaded. Raises
        :class:`InputUnreadable` (a 502) when the store answers that it is not there."""
        if row.input_ref is None:
            return row.input_data
        try:
            return resolve(self._payloads(), None, row.input_ref)
        except PayloadError as exc:
            raise InputUnreadable(
                502, f"cannot read the input of task {row.task_id}: {exc}"
            ) from exc

    def _signal(self, workflow_id: str, name: str, data: Any) -> bool:
        try:
            self.deps.signals.raise_event(workflow_id, name, data)
            return True
        except Exception:
            log.exception("could not raise %s on run %s", name, workflow_id)
            return False

    def _requeue(self, row: TaskRecord, lease: Lease, task_type: str, delay: int) -> None:
        """Put the attempt's deferred message back, visible after ``delay`` seconds
        (a new message when the deferred one is gone)."""
        q = self.deps.queue
        if lease.sequence_number is not None and lease.queue_name:
            try:
                for message in q.receive_deferred(lease.queue_name, [lease.sequence_number]):
                    q.requeue(lease.queue_name, message, float(delay))
                return
            except (MessageNotFound, QueueError):
                log.info("deferred message of %s is gone; sending a new one", row.task_id)
        self._send_anew(row, task_type, delay)

    def _send_anew(self, row: TaskRecord, task_type: str, delay: int) -> None:
        """Send a new message of the row's attempt, visible after ``delay`` seconds (a
        fresh message id: duplicate detection still holds the attempt's first one)."""
        q = self.deps.queue
        queue = row.queue_name or task_type
        run = self.deps.run_store.get_run(row.workflow_id)
        resent = TaskMessage(
            task_id=row.task_id,
            workflow_id=row.workflow_id,
            workflow_type=run.name if run else None,
            correlation_id=run.correlation_id if run else None,
            task_ref=row.reference_task_name,
            task_type=task_type,
            attempt=row.attempt,
            priority=run.priority if run else 0,
            domain=row.domain,
            input=row.input_data if row.input_ref is None else None,
            input_ref=row.input_ref,
        )
        q.send(
            queue,
            resent.body(),
            message_id=callback_message_id(row.task_id, row.attempt),
            scheduled_enqueue_time=(
                datetime.now(UTC) + timedelta(seconds=delay) if delay > 0 else None
            ),
        )
