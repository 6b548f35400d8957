"""The message a WORKER task attempt is queued as (what the Task API reads).

* queue: :func:`protocol.queues.queue_for`;
* message id ``<taskId>:<attempt>`` (:func:`message_id`): a repeated send of the same
  attempt is dropped by the queue's duplicate detection; a callback
  (``callbackAfterSeconds``) re-sends it under :func:`callback_message_id`;
* body: :class:`TaskMessage` in camelCase, with ``input`` or, for an input kept in the
  payload store, ``inputRef`` (never both);
* the engine writes the task row SCHEDULED before it sends the message, so a message
  whose row is missing, terminal or at another attempt is stale and is dropped;
* ``traceparent`` (only when the engine traces): the W3C trace context of the dispatch
  that sent it, so the worker's span for the attempt is that span's child; the Task API
  hands it on in the Task JSON (``engine/runtime/tracing.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["TaskMessage", "callback_message_id", "message_id"]


def message_id(task_id: str, attempt: int) -> str:
    """The id of the message of one attempt of a task."""
    return f"{task_id}:{attempt}"


def callback_message_id(task_id: str, attempt: int) -> str:
    """A fresh id for re-sending an attempt after ``callbackAfterSeconds`` (the
    duplicate detection window still holds the first one)."""
    return f"{message_id(task_id, attempt)}#cb{uuid.uuid4().hex[:12]}"


class TaskMessage(BaseModel):
    """The body of a task message."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    task_id: str
    workflow_id: str
    workflow_type: str | None = None
    correlation_id: str | None = None
    task_ref: str
    #: the WORKER task type (the task's ``name``)
    task_type: str
    attempt: int
    priority: int = 0
    domain: str | None = None
    #: the attempt's responseTimeoutSeconds (its task definition: registered, inline in
    #: the workflow, or Conductor's default); the hand-out lease lasts that long
    response_timeout_seconds: int | None = None
    input: Any = None
    input_ref: str | None = None
    #: W3C trace context of the dispatch span (absent when tracing is off)
    traceparent: str | None = None

    def body(self) -> dict[str, Any]:
        """The JSON body: ``input`` or ``inputRef``, whichever the task has."""
        leave_out = {"input", "input_ref"} | ({"traceparent"} if not self.traceparent else set())
        data = self.model_dump(mode="json", by_alias=True, exclude=leave_out)
        if self.input_ref is not None:
            data["inputRef"] = self.input_ref
        else:
            data["input"] = self.input
        return data
