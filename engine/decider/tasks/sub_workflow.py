"""SUB_WORKFLOW: a child run of ``subWorkflowParam`` (a DYNAMIC task's: named by its input,
:func:`engine.decider.tasks.dynamic.sub_workflow_of`), waited for; its failure fails the
task with the child's reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.nodes import Node
from engine.decider.state import TaskState
from engine.decider.tasks.base import ActionFields, ScheduledTask, TaskFailed
from engine.decider.tasks.dynamic import sub_workflow_of

if TYPE_CHECKING:
    from engine.decider.core import Decider


class SubWorkflowTask(ScheduledTask):
    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        if node.task.sub_workflow_param is None and sub_workflow_of(task.input) is None:
            raise TaskFailed("SUB_WORKFLOW without subWorkflowParam")
        return ActionFields()
