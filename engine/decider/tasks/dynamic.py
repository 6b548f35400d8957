"""DYNAMIC: a task whose type is the input named by ``dynamicTaskNameParam`` (Conductor's
DynamicTaskMapper, which makes it a task of that type and name).

* A system task type that takes everything it needs from the task's input (HTTP,
  INLINE, JSON_JQ_TRANSFORM, WAIT, SET_VARIABLE, TERMINATE, START_WORKFLOW, ...:
  :data:`SYSTEM_TYPES`) runs as that system task, with the DYNAMIC task's input, as
  Conductor runs it (its docs: the name "can be a system task or a Worker task"), and
  the task definition registered under that name if there is one (a system task needs
  none).
* SUB_WORKFLOW takes its child from the input, as Orkes documents it
  (:func:`engine.decider.tasks.sub_workflow.sub_workflow_of`: ``subWorkflowName`` and
  ``subWorkflowVersion``, or ``subWorkflowDefinition``); an input naming none fails the
  task.
* An operator or a type that needs more than an input (SWITCH, FORK_JOIN, DO_WHILE:
  branches, loops; Conductor's EVENT and KAFKA_PUBLISH, which Stepway does not run)
  fails the task, naming it: it would otherwise wait forever for a worker of that name.
* Any other name runs as that WORKER type, with that type's task definition (the
  definition's own, else Conductor's default). The name must be one a task type may
  have (:func:`engine.language.validation.queue_name_problem`, the rule registration
  applies): any other would be queued where no poll reaches it, or on another type's
  queue (``<type>-high``), so the task fails at once naming the value and the rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import ScheduledTask, TaskFailed, TaskStart
from engine.language.definitions import ACTIVITY_TYPES, TASK_TYPE_ALIASES, TaskType
from engine.language.validation import queue_name_problem

if TYPE_CHECKING:
    from engine.decider.core import Decider

__all__ = ["NOT_RUN", "SYSTEM_TYPES", "DynamicTask", "shown_name"]

#: system task types a DYNAMIC task runs as such: each takes all it needs from its input
SYSTEM_TYPES = frozenset(
    {
        *ACTIVITY_TYPES,
        TaskType.WAIT,
        TaskType.HUMAN,
        TaskType.SET_VARIABLE,
        TaskType.TERMINATE,
        TaskType.NOOP,
        TaskType.START_WORKFLOW,
        TaskType.SUB_WORKFLOW,
    }
)

#: task type names a DYNAMIC task cannot run (operators, types that need their
#: definition's fields, Conductor types Stepway does not run), Conductor's spellings too
NOT_RUN = frozenset(
    {
        *(t.value for t in TaskType if t not in SYSTEM_TYPES and t != TaskType.WORKER),
        *(alias for alias, name in TASK_TYPE_ALIASES.items() if name != TaskType.WORKER),
        "FORK",
        "EVENT",
        "KAFKA_PUBLISH",
        "USER_DEFINED",
    }
)


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
        if name in NOT_RUN:
            raise TaskFailed(
                f"Cannot map a dynamic task: {param} = {shown_name(name)} is a task type a "
                "DYNAMIC task cannot run (it needs more than an input: an operator, or a "
                "type Stepway does not run)"
            )
        system = name in SYSTEM_TYPES
        if not system:
            problem = queue_name_problem(name)
            if problem is not None:
                raise TaskFailed(
                    f"Cannot map a dynamic task: {param} = {shown_name(name)} is not a task "
                    f"type name ({problem})"
                )
        start.state.dynamic_names[wt.task_reference_name] = name
        decider.resolve_dynamic(wt.task_reference_name, name)
        task.name = name
        if not system:
            task.type = TaskType.WORKER
            decider.schedule(start)
            return
        task.type = TaskType(name)
        from engine.decider.tasks import handler_for  # the registry imports this module

        handler = handler_for(name)
        assert handler is not None, name
        handler.start(decider, start)


def shown_name(name: str, limit: int = 80) -> str:
    """``name`` quoted for a reason, cut to ``limit`` characters."""
    return repr(name) if len(name) <= limit else repr(name[:limit]) + f"... ({len(name)} chars)"
