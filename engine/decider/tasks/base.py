"""The interface between the Decider and the handler of one task type.

Like Conductor's task mappers (one class per task type that turns a workflow task into
what runs), each task type has a handler in its own module of this package. The Decider
core owns frames, retries, timeouts, failures and the run's end; a handler owns what is
particular to its type:

* :meth:`TaskHandler.start`: a new instance of the task was created at a frame's cursor
  with its input resolved; decide it inline (SWITCH, INLINE, ...) or schedule it
  (:meth:`~engine.decider.core.Decider.schedule`) as an I/O action;
* :meth:`TaskHandler.action_fields`: for scheduled types, the type's part of the
  :class:`~engine.decider.state.ScheduleTask` (shared by the first attempt and every
  retry);
* :meth:`TaskHandler.resume`: the task waits at a frame's cursor IN_PROGRESS; may it end
  now (JOIN)?
* :meth:`TaskHandler.child_frame_ended`: a frame the task blocks on ended (DO_WHILE).

A handler raises :class:`TaskFailed` to fail the task (no retry) with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from engine.decider.nodes import Node
from engine.decider.state import Frame, RunState, ScheduleTask, TaskState
from engine.language.definitions import SubWorkflowParams, WorkflowTask

if TYPE_CHECKING:
    from engine.decider.core import Decider

__all__ = ["ActionFields", "ScheduledTask", "TaskFailed", "TaskHandler", "TaskStart"]


class TaskFailed(Exception):
    """Deciding a task failed; the message is the task's reason."""


@dataclass
class TaskStart:
    """A new task instance at a frame's cursor, its input resolved."""

    state: RunState
    frame: Frame
    task: TaskState
    definition: WorkflowTask
    now_ms: int
    #: where a scheduled task's action goes
    actions: list[ScheduleTask]


@dataclass(frozen=True)
class ActionFields:
    """The type-specific fields of a :class:`ScheduleTask`."""

    #: WAIT with duration/until: complete at this epoch ms (None: external completion)
    wait_until_ms: int | None = None
    #: HUMAN: bound of the wait in seconds (None: unbounded)
    timeout_seconds: int | None = None
    #: SUB_WORKFLOW: the child run to start
    sub_workflow: SubWorkflowParams | None = None


class TaskHandler:
    """The handler of a task type (see the module docstring)."""

    #: the task does I/O: the interpreter performs a :class:`ScheduleTask` for it
    scheduled: ClassVar[bool] = False

    def start(self, decider: Decider, start: TaskStart) -> None:
        raise NotImplementedError

    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        """``base_ms``: when the attempt is scheduled from (now for the first attempt,
        the retry's scheduled time for the others)."""
        return ActionFields()

    def resume(
        self, decider: Decider, state: RunState, frame: Frame, task: TaskState, now_ms: int
    ) -> bool:
        """Whether the task (IN_PROGRESS at ``frame``'s cursor) ended now."""
        return False

    def child_frame_ended(
        self,
        decider: Decider,
        state: RunState,
        parent: Frame,
        owner: TaskState,
        child: Frame,
        now_ms: int,
    ) -> None:
        """``child``, a frame ``owner`` blocked ``parent`` on, ended."""


class ScheduledTask(TaskHandler):
    """A task type that does I/O: it becomes a :class:`ScheduleTask` action."""

    scheduled: ClassVar[bool] = True
    #: the attempt is IN_PROGRESS from when it is scheduled (Conductor's WAIT and HUMAN
    #: start at once), not SCHEDULED until a worker takes it
    starts_in_progress: ClassVar[bool] = False
    #: a worker starts the attempt when it polls it (its ``startTime``); the engine starts
    #: every other one (a system task) at its scheduled time
    polled: ClassVar[bool] = False

    def start(self, decider: Decider, start: TaskStart) -> None:
        decider.schedule(start)
