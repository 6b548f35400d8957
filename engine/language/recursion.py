"""Definitions that can start themselves: SUB_WORKFLOW and START_WORKFLOW chains.

A definition whose SUB_WORKFLOW names itself, directly or through other definitions,
starts runs until something stops it. Registration refuses such a definition, checked
against every registered definition (all versions: a child named without a version runs
the latest, and a version may be re-registered), by name. A child named by an expression
(``${...}``) is not known until run time; the engine's nesting limit
(``engine.runtime.run_limits.RunLimits.max_workflow_depth``) bounds those chains.

What starts a run: a SUB_WORKFLOW's ``subWorkflowParam.name`` and a START_WORKFLOW's
``inputParameters.startWorkflow.name`` (Conductor's shape of that task).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.language.definitions import TaskType, WorkflowDef
from engine.language.validation import ValidationIssue

__all__ = ["START_WORKFLOW", "recursion_issues", "started_workflows"]

#: Conductor's task type that starts another run without waiting for it.
START_WORKFLOW = "START_WORKFLOW"


def started_workflows(definition: WorkflowDef) -> list[tuple[str, str]]:
    """``(json path of the name, workflow name)`` of every run the definition starts by
    a literal name (names given by an expression are left out)."""
    found: list[tuple[str, str]] = []
    for location in definition.walk():
        task = location.task
        name: Any = None
        where = location.path
        if task.type == TaskType.SUB_WORKFLOW and task.sub_workflow_param is not None:
            name, where = task.sub_workflow_param.name, where + ".subWorkflowParam.name"
        elif task.type == START_WORKFLOW:
            start = task.input_parameters.get("startWorkflow")
            if isinstance(start, dict):
                name = start.get("name")
                where += ".inputParameters.startWorkflow.name"
        if isinstance(name, str) and name and "${" not in name:
            found.append((where, name))
    return found


def recursion_issues(
    candidates: Iterable[WorkflowDef], registered: Mapping[str, Iterable[WorkflowDef]]
) -> dict[int, list[ValidationIssue]]:
    """Issues of the candidates (by their position) that can start themselves, given the
    ``registered`` definitions by name (every version) plus the candidates themselves."""
    listed = list(candidates)
    graph: dict[str, set[str]] = {}
    for name, versions in registered.items():
        for definition in versions:
            graph.setdefault(name, set()).update(n for _, n in started_workflows(definition))
    for definition in listed:
        graph.setdefault(definition.name, set()).update(n for _, n in started_workflows(definition))
    issues: dict[int, list[ValidationIssue]] = {}
    for index, definition in enumerate(listed):
        for path, child in started_workflows(definition):
            chain = _path_to(graph, child, definition.name)
            if chain is None:
                continue
            cycle = " -> ".join([definition.name, *chain])
            issues.setdefault(index, []).append(
                ValidationIssue(
                    path,
                    f"workflow {definition.name!r} can start itself ({cycle}); a definition "
                    "must not reach itself through SUB_WORKFLOW or START_WORKFLOW tasks",
                )
            )
    return issues


def _path_to(graph: Mapping[str, set[str]], start: str, target: str) -> list[str] | None:
    """The names from ``start`` to ``target`` along the graph (breadth first), or None."""
    previous: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        name = queue.pop(0)
        if name == target:
            chain = [name]
            back = previous[name]
            while back is not None:
                chain.append(back)
                back = previous[back]
            return list(reversed(chain))
        for child in sorted(graph.get(name, ())):
            if child not in previous:
                previous[child] = name
                queue.append(child)
    return None
