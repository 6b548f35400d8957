"""The data the :class:`~engine.decider.Decider` works on: run state, outcomes, actions.

Everything here is JSON-shaped: ``RunState.model_validate(state.model_dump(mode="json"))``
gives back an equivalent state, which is how a long run carries it into
``continue_as_new``. Field names are snake_case in Python and camelCase with
``by_alias=True`` (both are accepted on input).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from pydantic.alias_generators import to_camel

from engine.language.definitions import RunStatus, SubWorkflowParams, TaskDef, TaskStatus
from protocol.runs import ReplayTask

__all__ = [
    "Deadline",
    "DeadlineKind",
    "Decision",
    "Frame",
    "RunResult",
    "RunState",
    "ScheduleTask",
    "TaskChange",
    "TaskOutcome",
    "TaskState",
    "TimeoutKind",
]

DeadlineKind = Literal["poll", "response", "task", "total", "human"]
#: what timed an attempt out: one of its deadlines, or (SUB_WORKFLOW) its child run's own
#: timeout
TimeoutKind = DeadlineKind | Literal["child"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class _TaskRow(_Model):
    """The fields of a task row (shared by the state and by records)."""

    task_id: str
    #: the reference name of this instance: ``ref`` or, inside a DO_WHILE, ``ref__N``
    ref: str
    #: the ``taskReferenceName`` in the definition (``ref`` without iteration suffix)
    def_ref: str
    name: str
    type: str
    status: TaskStatus
    #: 1 for the first attempt; the queue message id is ``<taskId>:<attempt>``
    attempt: int = 1
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    #: epoch ms when this attempt is (or was) queued, after any start/retry delay
    scheduled_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    #: epoch ms when the first attempt was queued (base of totalTimeoutSeconds)
    first_scheduled_time: int | None = None
    worker_id: str | None = None
    #: Conductor's ``seq``: 1, 2, 3... in the order the run created its task rows (every
    #: attempt is a row of its own, with a task id of its own)
    seq: int = 0
    #: the task id of the attempt this one retries (Conductor's ``retriedTaskId``)
    retried_task_id: str | None = None
    #: this attempt failed and a retry replaced it (Conductor's ``retried``)
    retried: bool = False
    #: Conductor's ``callbackAfterSeconds``, in whole seconds: a retry's delay without
    #: its jitter, a first attempt's ``startDelay``, a WAIT's wait; left out of the JSON
    #: when 0
    callback_after_seconds: int = Field(default=0, exclude_if=lambda seconds: not seconds)


class TaskState(_TaskRow):
    """A task instance in the run state."""

    #: key of the :class:`Frame` (sequence) the task belongs to
    frame: str = "$"
    #: set while a failed attempt waits for its retry to be dispatched
    retry_delay_seconds: float | None = None
    #: that delay without its jitter, in whole seconds: the retry's
    #: ``callbackAfterSeconds`` (Conductor's DeciderService.retry reports the delay
    #: before the jitter); left out of the JSON when unset
    retry_callback_seconds: int | None = Field(
        default=None, exclude_if=lambda seconds: seconds is None
    )
    #: timeout kinds already reported under ALERT_ONLY for this attempt
    alerts: list[str] = Field(default_factory=list)
    #: where the attempt's response timeout runs from when not its ``start_time`` (the
    #: worker's last lease extension, or the end of a callback wait); the run's
    #: expressions read ``start_time`` (``${ref.startTime}``) alone; left out of the
    #: JSON when unset
    response_from: int | None = Field(default=None, exclude_if=lambda at: at is None)


class TaskChange(_TaskRow):
    """A task row that changed in a decision step; the interpreter's activities write it
    to the run store (as a :class:`engine.ports.run_store.TaskRecord`)."""

    workflow_id: str
    #: the row's kind (:func:`protocol.task_types.row_kind`): ``WORKER``, or the system
    #: task type as Conductor reports it (``DECISION`` as defined, ``FORK``, ...)
    kind: str = ""
    #: innermost DO_WHILE iteration of this instance (0 outside loops)
    iteration: int = 0
    optional: bool = False
    #: a SET_VARIABLE that completed: the run's variables since (the run row shows them
    #: while the run runs, as Conductor's)
    variables: dict[str, Any] | None = None
    #: not a row: the instance ``ref`` left the run (a DO_WHILE's ``keepLastN`` dropped
    #: its iteration), and the rows of it and of every instance nested in it
    #: (``ref__*``), every attempt, are deleted; ``task_id`` is empty. Left out of the
    #: JSON when False: records ride in the run's messages, whose size is bounded
    removed: bool = Field(default=False, exclude_if=lambda removed: not removed)


class Frame(_Model):
    """One executing task list (the root sequence, a SWITCH case, a fork branch, a loop
    body iteration) with its cursor."""

    key: str
    list_id: int
    #: iteration suffix appended to every reference name in this list (``""``, ``"__2"``)
    suffix: str = ""
    pos: int = 0
    parent: str | None = None
    #: instance ref of the container task (SWITCH, FORK_JOIN, DO_WHILE) that opened it
    owner: str | None = None
    #: child frame the task at ``pos`` waits for (a SWITCH case or a loop body)
    blocking: str | None = None
    #: every open child frame (blocking child and fork branches)
    children: list[str] = Field(default_factory=list)


class RunState(_Model):
    """Everything the Decider needs about one run; small and JSON-serializable."""

    workflow_id: str
    workflow_type: str
    version: int = 1
    correlation_id: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    variables: dict[str, Any] = Field(default_factory=dict)
    start_time: int = 0
    status: RunStatus = RunStatus.RUNNING
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    failed_task_id: str | None = None
    failed_reference_task_names: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    end_time: int | None = None
    #: task instances by instance ref, in creation order
    tasks: dict[str, TaskState] = Field(default_factory=dict)
    #: outstanding I/O: task id -> instance ref (includes failed attempts awaiting retry)
    pending: dict[str, str] = Field(default_factory=dict)
    #: open sequences by key
    frames: dict[str, Frame] = Field(default_factory=dict)
    #: DO_WHILE instance ref -> current iteration
    loops: dict[str, int] = Field(default_factory=dict)
    #: frames that may be able to advance at the next decide()
    ready: list[str] = Field(default_factory=list)
    #: instance refs whose next attempt the next decide() dispatches
    retries: list[str] = Field(default_factory=list)
    #: instance refs changed since the last decision (emitted as records)
    dirty: list[str] = Field(default_factory=list)
    #: task ids canceled since the last decision (emitted as ``Decision.cancel``)
    canceled: list[str] = Field(default_factory=list)
    #: instance ref of the task that finished last (run output when outputParameters is empty)
    last_ref: str | None = None
    #: the workflow timeout fired under ALERT_ONLY
    timeout_alerted: bool = False
    #: task rows created so far (the last ``seq`` given)
    seq: int = 0
    #: part of every task id: a restart, rerun or retry of the run starts a new
    #: generation, so no task id of it collides with one of an earlier execution
    generation: str = ""
    #: the interpreter behaviour the run was started under (``protocol.runs.BEHAVIOUR``;
    #: a state carried before the field was 0)
    behaviour: int = 0
    #: permissive tasks that failed (Conductor's text for each: "Task <id> failed with
    #: status: <status> and reason: '<reason>'"): the run fails with them when it would
    #: have completed
    permissive_failures: list[str] = Field(default_factory=list)
    #: final records of attempts replaced in this step by their retry (emitted first)
    closed: list[TaskChange] = Field(default_factory=list)
    #: instances dropped from the run in this step (``TaskChange.removed``; emitted last,
    #: after any record of theirs)
    removed: list[TaskChange] = Field(default_factory=list)
    #: a retried or rerun run: the rows it keeps by instance ref, adopted when the run
    #: reaches them again (:class:`protocol.runs.ReplayTask`)
    replay: dict[str, ReplayTask] = Field(default_factory=dict)
    #: new inputs of tasks by instance ref (a rerun's ``taskInput``)
    task_inputs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: tasks the run made: FORK_JOIN_DYNAMIC instance ref -> ``{"defRef", "tasks"}`` (the
    #: workflow task of each branch), DYNAMIC ``taskReferenceName`` -> its worker type
    dynamic_forks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    dynamic_names: dict[str, str] = Field(default_factory=dict)

    # expression context cache; never serialized, rebuilt after deserialization or copy
    _ctx: dict[str, Any] | None = PrivateAttr(default=None)
    _ctx_owner: int = PrivateAttr(default=0)


class TaskOutcome(_Model):
    """What happened to a scheduled task attempt."""

    task_id: str
    attempt: int
    status: TaskStatus
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    #: a server's Retry-After; wins over the retry logic's delay when larger
    retry_after_seconds: float | None = None
    #: for TIMED_OUT: which deadline fired; when None the Decider works it out from
    #: :meth:`~engine.decider.Decider.wait_deadline` at the outcome's time
    timeout_kind: TimeoutKind | None = None


class Deadline(_Model):
    at_ms: int
    kind: DeadlineKind


class ScheduleTask(_Model):
    """Perform a task attempt: an activity, a worker dispatch, a HUMAN or WAIT wait or a
    child run (``type`` says which)."""

    kind: Literal["schedule_task"] = "schedule_task"
    task_id: str
    ref: str
    def_ref: str
    name: str
    type: str
    input: dict[str, Any] = Field(default_factory=dict)
    attempt: int = 1
    #: wait this long before (re)dispatching (start delay or retry delay)
    delay_seconds: float = 0.0
    #: that delay as the row's ``callbackAfterSeconds`` (a retry's without its jitter);
    #: left out of the JSON when 0
    callback_after_seconds: int = Field(default=0, exclude_if=lambda seconds: not seconds)
    optional: bool = False
    #: the effective task definition (inline ``taskDefinition`` or registered), if any
    task_def: TaskDef | None = None
    #: WAIT with duration/until: complete at this epoch ms (None: external completion)
    wait_until_ms: int | None = None
    #: HUMAN: bound of the wait in seconds (None: unbounded)
    timeout_seconds: int | None = None
    #: SUB_WORKFLOW: the child definition
    sub_workflow: SubWorkflowParams | None = None
    #: a call (HTTP, CALL_TOOL, ...) with ``asyncComplete``: once the call answered the
    #: task stays IN_PROGRESS, its output the call's, until a task update ends it
    async_complete: bool = False
    #: SUB_WORKFLOW: the attempt's child run exists and was retried in place with this
    #: run (``ReplayTask.resume``): the attempt waits for its end, and starts no child
    resume_child: bool = False
    #: the row's ``seq`` and, for a retry, the task id of the attempt it replaces
    seq: int = 0
    retried_task_id: str | None = None

    @property
    def message_id(self) -> str:
        return f"{self.task_id}:{self.attempt}"


class RunResult(_Model):
    status: RunStatus
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    failed_task_id: str | None = None
    failed_reference_task_names: list[str] = Field(default_factory=list)


@dataclass
class Decision:
    """The result of a decision step."""

    state: RunState
    #: I/O the orchestration must start now
    actions: list[ScheduleTask] = field(default_factory=list)
    #: task rows changed in this step (also inline-decided ones), to record with the next I/O
    records: list[TaskChange] = field(default_factory=list)
    #: set when the run is over
    finished: RunResult | None = None
    #: task ids whose waits, timers or child runs to cancel
    cancel: list[str] = field(default_factory=list)
