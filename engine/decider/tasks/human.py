"""HUMAN: waits for completion through the API, bounded by ``timeoutSeconds`` (the
task's input, else its task definition's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.nodes import Node
from engine.decider.state import TaskState
from engine.decider.tasks.base import ActionFields, ScheduledTask
from engine.language.definitions import TaskDef

if TYPE_CHECKING:
    from engine.decider.core import Decider


def human_timeout(task: TaskState, td: TaskDef | None) -> int | None:
    """The bound of a HUMAN task's wait in seconds, or None when it has none."""
    raw = task.input.get("timeoutSeconds")
    try:
        seconds = int(raw) if raw not in (None, "") else 0
    except (TypeError, ValueError):
        seconds = 0
    if not seconds and td is not None:
        seconds = td.timeout_seconds
    return seconds or None


class HumanTask(ScheduledTask):
    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        return ActionFields(timeout_seconds=human_timeout(task, node.task_def))
