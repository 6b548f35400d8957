"""DYNAMIC: a worker task whose type is the input named by ``dynamicTaskNameParam``
(Conductor's DynamicTaskMapper); it then runs as that WORKER type, with that type's task
definition (the definition's own, else Conductor's default). The name must be one a
task type may have (:func:`engine.language.validation.queue_name_problem`, the rule
registration applies): any other would be queued where no poll reaches it, or on another
type's queue (``<type>-high``), so the task fails at once naming the value and the rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import ScheduledTask, TaskFailed, TaskStart
from engine.language.definitions import TaskType
from engine.language.validation import queue_name_problem

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
        problem = queue_name_problem(name)
        if problem is not None:
            raise TaskFailed(
                f"Cannot map a dynamic task: {param} = {shown_name(name)} is not a task type "
                f"name ({problem})"
            )
        start.state.dynamic_names[wt.task_reference_name] = name
        decider.resolve_dynamic(wt.task_reference_name, name)
        task.name = name
        task.type = TaskType.WORKER
        decider.schedule(start)


def shown_name(name: str, limit: int = 80) -> str:
    """``name`` quoted for a reason, cut to ``limit`` characters."""
    return repr(name) if len(name) <= limit else repr(name[:limit]) + f"... ({len(name)} chars)"
