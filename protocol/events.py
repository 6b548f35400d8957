"""The external events raised on a run (``raise_orchestration_event``), and their payloads.

* :func:`result_event` (the task id): the outcome of a WORKER attempt, or the completion
  of a HUMAN task or of a WAIT without a duration; payload :class:`TaskResultEvent`.
* :func:`started_event` (``<taskId>.started``): a worker took the attempt (or extended
  its lease), so the response timeout runs from ``startTime``; payload
  :class:`TaskStartedEvent`. Optional: the Task API no longer raises it (a hand-out
  costs the run no event); the interpreter reads the hand-out from the run store when a
  deadline is due, and still applies the event when one comes.
* :func:`child_end_event` (``<taskId>.child``): the end of a SUB_WORKFLOW's child run that
  was retried in place (``retry`` with ``resumeSubworkflowTasks``, or a retry of the
  child itself), which its parent, retried with it, waits for by this event instead of
  as its sub-orchestration; payload the child's run summary (what its orchestration
  returns).
* :data:`TERMINATE_EVENT`: end the run TERMINATED (the API's terminate, or a parent run
  that ended); payload :class:`TerminateEvent`.

The interpreter ignores an event for another attempt than the one it waits for.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "SKIP_EVENT",
    "STARTED_SUFFIX",
    "TERMINATE_EVENT",
    "SkipEvent",
    "TaskResultEvent",
    "TaskStartedEvent",
    "TerminateEvent",
    "child_end_event",
    "result_event",
    "started_event",
]

TERMINATE_EVENT = "stepway.terminate"
#: skip a task the run has not reached yet (Conductor's ``skiptask``)
SKIP_EVENT = "stepway.skip"
STARTED_SUFFIX = ".started"
CHILD_END_SUFFIX = ".child"


def result_event(task_id: str) -> str:
    """The name of the event that carries a task's result."""
    return task_id


def child_end_event(task_id: str) -> str:
    """The name of the event that carries the end of a SUB_WORKFLOW task's child run,
    resumed in place (the child's orchestration is no longer the parent's
    sub-orchestration)."""
    return task_id + CHILD_END_SUFFIX


def started_event(task_id: str) -> str:
    """The name of the event that says a worker took a task."""
    return task_id + STARTED_SUFFIX


class _Event(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def payload(self) -> dict[str, Any]:
        """The event's JSON payload (camelCase)."""
        return self.model_dump(mode="json", by_alias=True)


class TaskStartedEvent(_Event):
    #: the attempt the worker took (an event without one is ignored)
    attempt: int | None = None
    worker_id: str | None = None
    #: epoch ms the worker took the attempt
    start_time: int | None = None


class TaskResultEvent(_Event):
    #: the attempt the result is for (None: the current one)
    attempt: int | None = None
    status: str = "COMPLETED"
    #: the output, or ``{"outputRef": ref}`` for one kept in the payload store
    output: dict[str, Any] | None = Field(default_factory=dict)
    reason: str | None = None
    worker_id: str | None = None
    output_ref: str | None = None

    def payload(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True, exclude={"output_ref"})
        if self.output_ref is not None:
            data["outputRef"] = self.output_ref
        return data


class TerminateEvent(_Event):
    reason: str | None = None


class SkipEvent(_Event):
    """Conductor's SkipTaskRequest, for task ``task_reference_name``."""

    task_reference_name: str
    task_input: dict[str, Any] = Field(default_factory=dict)
    task_output: dict[str, Any] = Field(default_factory=dict)
