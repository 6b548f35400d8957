"""HUMAN: waits for completion through the API, bounded by ``timeoutSeconds`` (the
task's input, else its task definition's). An input ``timeoutSeconds`` past the WAIT
bound (engine/language/durations.py, 100 years) fails the task: its timer could not be
armed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.nodes import Node
from engine.decider.state import TaskState
from engine.decider.tasks.base import ActionFields, ScheduledTask, TaskFailed
from engine.language.definitions import TaskDef
from engine.language.durations import MAX_WAIT_DAYS, MAX_WAIT_SECONDS

if TYPE_CHECKING:
    from engine.decider.core import Decider


def _input_timeout(task: TaskState) -> int:
    raw = task.input.get("timeoutSeconds")
    try:
        return int(raw) if raw not in (None, "") else 0
    except (TypeError, ValueError, OverflowError):  # OverflowError: infinity
        return 0


def human_timeout(task: TaskState, td: TaskDef | None) -> int | None:
    """The bound of a HUMAN task's wait in seconds, or None when it has none; never past
    :data:`MAX_WAIT_SECONDS` (a longer one fails the task when it is scheduled)."""
    seconds = _input_timeout(task)
    if not seconds and td is not None:
        seconds = td.timeout_seconds
    return min(seconds, MAX_WAIT_SECONDS) or None


class HumanTask(ScheduledTask):
    starts_in_progress = True

    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        seconds = _input_timeout(task)
        if seconds > MAX_WAIT_SECONDS:
            raise TaskFailed(
                f"HUMAN timeoutSeconds {seconds} is too long: at most {MAX_WAIT_SECONDS} "
                f"seconds ({MAX_WAIT_DAYS} days, 100 years)"
            )
        return ActionFields(timeout_seconds=human_timeout(task, node.task_def))
