"""DYNAMIC: a worker task whose type is the input named by ``dynamicTaskNameParam``
(Conductor's DynamicTaskMapper); it then runs as that WORKER type, with that type's task
definition (the definition's own, else Conductor's default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import ScheduledTask, TaskFailed, TaskStart
from engine.language.definitions import TaskType

if TYPE_CHECKING:
    from engine.decider.core import Decider


class DynamicTask(ScheduledTask):
    def start(self, decider: Decider, start: TaskStart) -> None:
        task, wt = start.task, start.definition
        param = wt.dynamic_task_name_param or ""
        name = decider.dereferenced(task.input.get(param))
        if not isinstance(name, str) or not name:
            raise TaskFailed(
                "Cannot map a dynamic task based on the parameter and input. "
                f"Parameter= {param}, input= {task.input}"
            )
        start.state.dynamic_names[wt.task_reference_name] = name
        decider.resolve_dynamic(wt.task_reference_name, name)
        task.name = name
        task.type = TaskType.WORKER
        decider.schedule(start)
