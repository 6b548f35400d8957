"""SET_VARIABLE: merges its resolved inputs into ``workflow.variables``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import TaskHandler, TaskStart

if TYPE_CHECKING:
    from engine.decider.core import Decider


class SetVariableTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        state = start.state
        state.variables = {**state.variables, **start.task.input}
        decider.context(state)["workflow"] = decider.workflow_entry(state)
        decider.complete_inline(state, start.task, {}, start.now_ms)
