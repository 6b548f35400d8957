"""SUB_WORKFLOW: a child run of ``subWorkflowParam`` (for a DYNAMIC task that resolved to
SUB_WORKFLOW: the child its input names, :func:`sub_workflow_of`), waited for; its failure
fails the task with the child's reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.nodes import Node
from engine.decider.state import TaskState
from engine.decider.tasks.base import ActionFields, ScheduledTask, TaskFailed, TaskStart
from engine.language.definitions import SubWorkflowParams

if TYPE_CHECKING:
    from engine.decider.core import Decider

__all__ = ["SubWorkflowTask", "sub_workflow_of"]


class SubWorkflowTask(ScheduledTask):
    def start(self, decider: Decider, start: TaskStart) -> None:
        param = start.definition.sub_workflow_param
        if param is not None and _has_expressions(param):
            # Conductor's SubWorkflowTaskMapper resolves subWorkflowParam's name,
            # taskToDomain and a workflowDefinition given as text against the run, and
            # puts the child it names into the task's input
            ts = start.task
            given = param.workflow_definition
            resolved = decider.resolve_values(
                start.state,
                {
                    "name": param.name,
                    "taskToDomain": param.task_to_domain,
                    # a definition object is taken as it is (its own ${...} are its own)
                    "workflowDefinition": given if isinstance(given, str) else None,
                    "idempotencyKey": param.idempotency_key,
                },
                decider.context(start.state),
                lambda key: f"subWorkflowParam.{key} of task {ts.ref!r}",
            )
            if not isinstance(given, str):
                resolved["workflowDefinition"] = given
            ts.input = dict(ts.input)
            ts.input.update(
                # the child's input (SubWorkflow.start reads workflowInput)
                workflowInput=dict(ts.input),
                subWorkflowName=resolved["name"],
                subWorkflowVersion=param.version,
                subWorkflowTaskToDomain=resolved["taskToDomain"],
                subWorkflowDefinition=resolved["workflowDefinition"],
            )
            if resolved["idempotencyKey"] is not None:
                ts.input.update(
                    idempotencyKey=resolved["idempotencyKey"],
                    idempotencyStrategy=param.idempotency_strategy,
                )
        decider.schedule(start)

    def action_fields(
        self, decider: Decider, task: TaskState, node: Node, base_ms: int
    ) -> ActionFields:
        param = node.task.sub_workflow_param
        child = (
            param if param is not None and not _has_expressions(param) else None
        ) or sub_workflow_of(task.input)
        if child is None:
            raise TaskFailed(
                "SUB_WORKFLOW names no child: subWorkflowParam, or (a DYNAMIC task) "
                "subWorkflowName and subWorkflowVersion, or subWorkflowDefinition, in its input"
            )
        return ActionFields(sub_workflow=child)


def _has_expressions(param: SubWorkflowParams) -> bool:
    """Whether ``subWorkflowParam`` names its child by expressions (``${...}``)."""
    return (
        "${" in param.name
        or any("${" in value for value in param.task_to_domain.values())
        or isinstance(param.workflow_definition, str)
        or (isinstance(param.idempotency_key, str) and "${" in param.idempotency_key)
    )


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
            idempotency_key=task_input.get("idempotencyKey"),
            idempotency_strategy=task_input.get("idempotencyStrategy"),
        )
    except ValueError:
        return None
