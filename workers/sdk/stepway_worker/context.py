"""The per-task context a handler may ask for, and ``task_log``."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_current: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar(
    "stepway_task_context", default=None
)

#: Sends one log line of a task; returns False when it could not be delivered.
LogSink = Callable[[str, str], bool]


@dataclass
class TaskContext:
    """What a handler knows about the task it runs.

    Declare a parameter annotated ``TaskContext`` to receive it. ``previous_output``
    is the task's ``outputData`` as handed out: empty on a first run, the output of
    the last ``InProgress`` when the task is called back.
    """

    task_id: str
    task_type: str
    workflow_id: str | None = None
    reference_name: str | None = None
    attempt: int = 1
    poll_count: int = 0
    input: dict[str, Any] = field(default_factory=dict)
    previous_output: dict[str, Any] = field(default_factory=dict)
    task: dict[str, Any] = field(default_factory=dict)
    worker_id: str = ""
    #: set by the runtime: posts a log line to ``POST /api/tasks/{taskId}/log``
    sink: LogSink | None = field(default=None, repr=False)
    #: set by the runtime: uploads bytes through the external storage location and
    #: returns ``(path, uri)``
    uploader: Callable[[bytes, str, str], tuple[str, str]] | None = field(default=None, repr=False)
    #: lines that could not be posted; they travel with the result instead
    pending_logs: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def log(self, message: str) -> None:
        """Post one log line for this task (best effort; a line that cannot be posted
        now is sent with the result)."""
        text = str(message)
        delivered = False
        if self.sink is not None:
            try:
                delivered = self.sink(self.task_id, text)
            except Exception:
                delivered = False
        if not delivered:
            with self._lock:
                self.pending_logs.append(text)

    def take_pending_logs(self) -> list[str]:
        with self._lock:
            lines, self.pending_logs = self.pending_logs, []
        return lines

    @property
    def logger(self) -> logging.Logger:
        """A ``logging.Logger`` whose records (INFO and above) become task log lines."""
        logger = logging.getLogger(f"stepway_worker.task.{self.task_type}")
        if not any(isinstance(h, _TaskLogHandler) for h in logger.handlers):
            logger.addHandler(_TaskLogHandler())
            logger.setLevel(logging.INFO)
        return logger

    def upload(
        self, data: bytes, name: str = "output.json", content_type: str = "application/json"
    ) -> tuple[str, str]:
        """Upload ``data`` through ``GET /api/tasks/external-storage-location`` and a PUT
        to the returned URI; returns ``(path, uri)``. Use it for large files (an
        export); large JSON outputs are offloaded automatically."""
        if self.uploader is None:
            raise RuntimeError("this task context has no uploader")
        return self.uploader(data, name, content_type)


class _TaskLogHandler(logging.Handler):
    """Routes records logged through ``TaskContext.logger`` to the running task."""

    def emit(self, record: logging.LogRecord) -> None:
        ctx = _current.get()
        if ctx is None:
            return
        try:
            ctx.log(f"{record.levelname} {self.format(record)}")
        except Exception:
            self.handleError(record)


def current_context() -> TaskContext | None:
    """The context of the task running in this thread, if any."""
    return _current.get()


def task_log(message: str) -> None:
    """Post a log line for the task running in this thread (no-op outside a task)."""
    ctx = _current.get()
    if ctx is None:
        logging.getLogger("stepway_worker").info("task_log outside a task: %s", message)
        return
    ctx.log(message)


def set_current(ctx: TaskContext | None) -> contextvars.Token[TaskContext | None]:
    return _current.set(ctx)


def reset_current(token: contextvars.Token[TaskContext | None]) -> None:
    _current.reset(token)


def now_ms() -> int:
    return int(time.time() * 1000)
