"""NOOP: completes at once, doing nothing (Conductor's Noop)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import TaskHandler, TaskStart

if TYPE_CHECKING:
    from engine.decider.core import Decider


class NoopTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        decider.complete_inline(start.state, start.task, {}, start.now_ms)
