"""WAIT: a durable timer until ``duration`` after the attempt is scheduled or until the
time ``until``; with neither, a wait for completion through the API. A value the parser
refuses (engine/language/durations.py: unreadable, or past its 100-year bound, as an
expression can give) fails the task with its reason; the run goes on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.nodes import Node
from engine.decider.state import TaskState
from engine.decider.tasks.base import ActionFields, ScheduledTask, TaskFailed
from engine.language.durations import parse_duration, parse_until

if TYPE_CHECKING:
    from engine.decider.core import Decider


class WaitTask(ScheduledTask):
    starts_in_progress = True

    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        duration, until = task.input.get("duration"), task.input.get("until")
        try:
            if duration not in (None, ""):
                return ActionFields(wait_until_ms=base_ms + parse_duration(duration) * 1000)
            if until not in (None, ""):
                return ActionFields(wait_until_ms=parse_until(until, base_ms))
        except ValueError as exc:
            raise TaskFailed(str(exc)) from None
        return ActionFields()
