"""SUB_WORKFLOW: a child run of ``subWorkflowParam``, waited for; its failure fails the
task with the child's reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.nodes import Node
from engine.decider.state import TaskState
from engine.decider.tasks.base import ActionFields, ScheduledTask, TaskFailed

if TYPE_CHECKING:
    from engine.decider.core import Decider


class SubWorkflowTask(ScheduledTask):
    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        if node.task.sub_workflow_param is None:
            raise TaskFailed("SUB_WORKFLOW without subWorkflowParam")
        return ActionFields()
