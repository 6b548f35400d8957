"""The inputs and results of the interpreter's own activities, one typed model each.

The orchestration (:mod:`engine.runtime.interpreter`) builds them, the activities
(:mod:`engine.runtime.activities`) read them; on the wire (the durable history) they are
camelCase JSON. Activity names are here too, so both sides spell them once.

``traceparent`` is the run's trace context (``RunInput.traceparent``), handed to the
activities so that their spans are in the run's trace (engine/runtime/tracing.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine.decider.state import RunResult, ScheduleTask, TaskChange
from protocol.runs import RunInput

__all__ = [
    "ACTIVITY_BUILTIN",
    "ACTIVITY_CHECK",
    "ACTIVITY_DISPATCH",
    "ACTIVITY_FINISH",
    "ACTIVITY_POLL",
    "ACTIVITY_RECORD",
    "ACTIVITY_RESOLVE_CHILD",
    "BuiltinInput",
    "CanceledChild",
    "CheckInput",
    "ChildResolution",
    "DispatchInput",
    "DispatchResult",
    "FinishInput",
    "PollInput",
    "PolledTask",
    "RecordInput",
    "ResolveChildInput",
    "RunSummary",
    "TaskCheck",
]

ACTIVITY_RECORD = "stepway.record"
ACTIVITY_DISPATCH = "stepway.dispatch"
ACTIVITY_FINISH = "stepway.finish"
ACTIVITY_RESOLVE_CHILD = "stepway.resolve_child"
ACTIVITY_BUILTIN = "stepway.builtin"
ACTIVITY_POLL = "stepway.poll"
ACTIVITY_CHECK = "stepway.check_task"


class _Io(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def wire(self) -> dict[str, Any]:
        """The JSON form handed to (or returned by) an activity."""
        data = self.model_dump(mode="json", by_alias=True)
        if "traceparent" in data and data["traceparent"] is None:
            del data["traceparent"]  # tracing is off: nothing in the history
        return data


class CanceledChild(_Io):
    """The child run of a SUB_WORKFLOW task the run canceled while the run goes on."""

    #: the child's workflow id (``<taskId>-<attempt>``)
    child_id: str
    #: the SUB_WORKFLOW task's reference name (named in the child's reason)
    ref: str


class RecordInput(_Io):
    """Record the task rows the Decider changed, and run warnings; terminate the child
    runs of SUB_WORKFLOW tasks canceled in the step (None, not in the history, when
    there are none)."""

    workflow_id: str
    records: list[TaskChange] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    cancel_children: list[CanceledChild] | None = None
    traceparent: str | None = None


class DispatchInput(_Io):
    """Queue one attempt of a WORKER task (and record the rows changed before it)."""

    workflow_id: str
    workflow_type: str | None = None
    correlation_id: str | None = None
    priority: int = 0
    task_to_domain: dict[str, str] = Field(default_factory=dict)
    task: ScheduleTask
    records: list[TaskChange] = Field(default_factory=list)
    #: orchestration time of the step (the row's scheduling order)
    now_ms: int | None = None
    traceparent: str | None = None


class DispatchResult(_Io):
    queue: str | None = None
    scheduled_time: int | None = None
    #: no worker polled the type recently (also logged on the task)
    warning: str | None = None
    #: the attempt could not be queued; the task fails with this reason
    error: str | None = None
    #: the failure is terminal (another attempt would fail the same way)
    terminal: bool = False


class CheckInput(_Io):
    """Read where a WORKER attempt stands in the run store (a deadline of it is due)."""

    workflow_id: str
    task_id: str
    attempt: int
    traceparent: str | None = None


class TaskCheck(_Io):
    """Where the task row stands: its current attempt and status (None: no row), and for
    an attempt a worker took, who, since when (the row's start) and where its response
    timeout runs from (``response_from``: the last lease extension, or the end of a
    callback wait; a check recorded before the field existed gave that as
    ``start_time``), or the result the worker posted."""

    attempt: int | None = None
    status: str | None = None
    worker_id: str | None = None
    start_time: int | None = None
    response_from: int | None = None
    #: a posted result: the output, or ``{"outputRef": ref}`` for one kept in the store
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None


class ResolveChildInput(_Io):
    """Resolve a SUB_WORKFLOW's definition and write the child's run row."""

    workflow_id: str
    #: the child's workflow id (``<taskId>-<attempt>``)
    child_id: str
    #: the parent's run input (without its carried state)
    run: RunInput
    task: ScheduleTask
    records: list[TaskChange] = Field(default_factory=list)


class ChildResolution(_Io):
    name: str = ""
    version: int = 0
    task_to_domain: dict[str, str] | None = None
    definition_ref: str | None = None
    #: the child run's priority (``subWorkflowParam.priority``; None: the parent's)
    priority: int | None = None
    #: the child cannot start (its definition does not exist); the task fails
    error: str | None = None
    #: the resolving span's trace context: the child run's spans are in the parent's trace
    traceparent: str | None = None
    #: the error is terminal: another attempt would meet it again (the nesting limit)
    terminal: bool = False


class BuiltinInput(_Io):
    """Run one attempt of a built-in activity type (HTTP, CALL_TOOL, ..., START_WORKFLOW)."""

    workflow_id: str
    task: ScheduleTask
    records: list[TaskChange] = Field(default_factory=list)
    traceparent: str | None = None
    #: START_WORKFLOW: the starting run's input (its correlation id and task domains are
    #: the defaults of the run it starts)
    run: RunInput | None = None


class PolledTask(_Io):
    """Which task attempt a poll belongs to (its output is offloaded under it)."""

    workflow_id: str
    task_id: str
    attempt: int
    ref: str


class PollInput(_Io):
    """Poll a long-running built-in activity once."""

    type: str
    input: dict[str, Any] = Field(default_factory=dict)
    task: PolledTask | None = None
    traceparent: str | None = None


class FinishInput(_Io):
    """Record the run's end, cancel its children, start its failure workflow."""

    workflow_id: str
    #: the run's input (without its carried state)
    run: RunInput
    result: RunResult
    records: list[TaskChange] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    #: child runs to terminate (``<taskId>-<attempt>``)
    cancel_children: list[str] = Field(default_factory=list)
    variables: dict[str, Any] = Field(default_factory=dict)
    now_ms: int | None = None


class RunSummary(_Io):
    """What a run's orchestration returns (a parent reads a child's)."""

    status: str = "FAILED"
    #: the output, or ``{"outputRef": ref}`` when it is kept in the payload store
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    failure_workflow_id: str | None = None

    def wire(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True, exclude={"failure_workflow_id"})
        if self.failure_workflow_id:
            data["failureWorkflowId"] = self.failure_workflow_id
        return data
