"""SUB_WORKFLOW: a child run of ``subWorkflowParam`` (for a DYNAMIC task that resolved to
SUB_WORKFLOW: the child its input names, :func:`sub_workflow_of`), waited for; its failure
fails the task with the child's reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.nodes import Node
from engine.decider.state import TaskState
from engine.decider.tasks.base import ActionFields, ScheduledTask, TaskFailed
from engine.language.definitions import SubWorkflowParams

if TYPE_CHECKING:
    from engine.decider.core import Decider

__all__ = ["SubWorkflowTask", "sub_workflow_of"]


class SubWorkflowTask(ScheduledTask):
    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        child = node.task.sub_workflow_param or sub_workflow_of(task.input)
        if child is None:
            raise TaskFailed(
                "SUB_WORKFLOW names no child: subWorkflowParam, or (a DYNAMIC task) "
                "subWorkflowName and subWorkflowVersion, or subWorkflowDefinition, in its input"
            )
        return ActionFields(sub_workflow=child)


def sub_workflow_of(task_input: dict[str, Any]) -> SubWorkflowParams | None:
    """The child run a DYNAMIC task resolved to SUB_WORKFLOW starts, from its input (Orkes'
    form: ``subWorkflowName`` and ``subWorkflowVersion``, or ``subWorkflowDefinition``, an
    inline definition; ``subWorkflowTaskToDomain``); None when the input names none."""
    definition = task_input.get("subWorkflowDefinition")
    name = task_input.get("subWorkflowName")
    if isinstance(definition, dict) and definition:
        name = definition.get("name") if not isinstance(name, str) or not name else name
    elif not isinstance(name, str) or not name.strip():
        return None
    version = task_input.get("subWorkflowVersion")
    if isinstance(version, str) and version.strip().isdigit():
        version = int(version)
    domains = task_input.get("subWorkflowTaskToDomain")
    try:
        return SubWorkflowParams(
            name=str(name or ""),
            version=version if isinstance(version, int) and not isinstance(version, bool) else None,
            task_to_domain=domains if isinstance(domains, dict) else {},
            workflow_definition=definition if isinstance(definition, dict) else None,
        )
    except ValueError:
        return None
