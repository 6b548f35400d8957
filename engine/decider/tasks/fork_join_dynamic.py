"""FORK_JOIN_DYNAMIC: the branches come from the input when it runs (Conductor's
ForkJoinDynamicTaskMapper), one per task:

* ``dynamicForkTasksParam`` names the input holding a list of workflow tasks and
  ``dynamicForkTasksInputParamName`` the input holding their inputs by reference name;
* or ``inputParameters.forkTaskName`` (``forkTaskType``, default SIMPLE) or
  ``forkTaskWorkflow`` (``forkTaskWorkflowVersion``, a SUB_WORKFLOW) with a list
  ``forkTaskInputs``: one task per input, reference ``_<name>_<i>`` (``_<fork>_<name>_<i>``
  when an earlier dynamic fork ran in the run), input ``__index`` = i;
* or the legacy ``dynamicForkJoinTasksParam`` (``{"dynamicTasks": [{taskName,
  referenceName, type, input}]}``).

The fork completes at once as a ``FORK`` row whose input lists ``forkedTasks`` and
``forkedTaskDefs``; the first task of every branch starts before the JOIN that must
follow, which waits for the last task of each branch. A list that cannot be read fails
the task (no retry), as does a ``taskReferenceName`` given twice or already naming a task
of the run (:meth:`~engine.decider.core.Decider.fork_ref_problem`): Conductor refuses a
forked ref a task of the run already has ("attempted to create a duplicate task reference
name"); here a ref of a later task of the definition is refused as well, so no forked
task can stand in for it (a HUMAN approval, the JOIN). A WORKER task whose name is no
task type name (the rule registration applies) fails it too: no poll would reach it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.tasks.base import TaskFailed, TaskHandler, TaskStart
from engine.decider.tasks.dynamic import shown_name
from engine.language.definitions import TaskType, WorkflowTask
from engine.language.validation import queue_name_problem

if TYPE_CHECKING:
    from engine.decider.core import Decider


def _simple_form(
    decider: Decider, start: TaskStart, inputs: dict[str, Any]
) -> list[dict[str, Any]] | None:
    items = inputs.get("forkTaskInputs")
    if not isinstance(items, list):
        return None
    wt, state = start.definition, start.state
    workflow = inputs.get("forkTaskWorkflow")
    version = inputs.get("forkTaskWorkflowVersion")
    name = inputs.get("forkTaskName")
    kind = str(inputs.get("forkTaskType") or "SIMPLE")
    if name is None and kind != "SIMPLE":
        name = kind
    name = str(name or (workflow if workflow else wt.task_reference_name))
    earlier = any(
        other.ref != start.task.ref
        and decider.nodes[other.def_ref].task.type == TaskType.FORK_JOIN_DYNAMIC
        for other in state.tasks.values()
        if other.def_ref in decider.nodes
    )
    specs: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        params = dict(item) if isinstance(item, dict) else {"input": item}
        params["__index"] = i
        ref = f"_{wt.task_reference_name}_{name}_{i}" if earlier else f"_{name}_{i}"
        spec: dict[str, Any] = {"name": name, "taskReferenceName": ref, "inputParameters": params}
        if workflow:
            spec["type"] = "SUB_WORKFLOW"
            sub: dict[str, Any] = {"name": str(workflow)}
            try:
                sub["version"] = int(version) if version not in (None, "") else None
            except (TypeError, ValueError):
                sub["version"] = None
            if isinstance(item, dict) and isinstance(item.get("taskToDomain"), dict):
                sub["taskToDomain"] = item["taskToDomain"]
            spec["subWorkflowParam"] = sub
        else:
            spec["type"] = kind
        if wt.optional:
            spec["optional"] = True
        specs.append(spec)
    return specs


def _param_form(wt: WorkflowTask, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    param = wt.dynamic_fork_tasks_param or ""
    listed = inputs.get(param)
    if not isinstance(listed, list) or not all(
        isinstance(t, dict) and t.get("taskReferenceName") for t in listed
    ):
        raise TaskFailed(
            f"Input '{param}' is invalid. Cannot deserialize a list of Workflow Tasks from "
            f"'{listed}'"
        )
    by_ref = inputs.get(wt.dynamic_fork_tasks_input_param_name or "")
    if not isinstance(by_ref, dict):
        raise TaskFailed(
            "Input to the dynamically forked tasks is not a map -> expecting a map of K,V  "
            f"but found {by_ref}"
        )
    specs = []
    for task in listed:
        given = by_ref.get(task["taskReferenceName"])
        params = {
            **(task.get("inputParameters") or {}),
            **(given if isinstance(given, dict) else {}),
        }
        specs.append({**task, "inputParameters": params})
    return specs


def _legacy_form(wt: WorkflowTask, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    value = inputs.get(wt.dynamic_fork_join_tasks_param or "")
    tasks = value.get("dynamicTasks") if isinstance(value, dict) else None
    if not isinstance(tasks, list):
        raise TaskFailed(
            f"Dynamic tasks could not be created. The value of {wt.dynamic_fork_join_tasks_param} "
            f"from task's input {inputs} has no dynamic tasks to be scheduled"
        )
    return [
        {
            "name": t.get("taskName"),
            "taskReferenceName": t.get("referenceName"),
            "type": t.get("type") or "SIMPLE",
            "inputParameters": t.get("input") or {},
        }
        for t in tasks
        if isinstance(t, dict)
    ]


def _unnamed(spec: dict[str, Any]) -> Any:
    """The name of a forked task given none: a SUB_WORKFLOW's child's name, another
    system task's type; a worker task keeps none (its name is its type: the fork fails
    saying it is required)."""
    kind = str(spec.get("type"))
    if kind in ("SIMPLE", TaskType.WORKER):
        return spec.get("name")
    child = spec.get("subWorkflowParam")
    if kind == TaskType.SUB_WORKFLOW and isinstance(child, dict) and child.get("name"):
        return child["name"]
    return kind


def _worker_problem(tasks: list[WorkflowTask]) -> str | None:
    """Why a WORKER (SIMPLE) task among ``tasks`` (nesting included) cannot be queued: its
    name is not one registration lets a task type have, or None."""
    for task in tasks:
        if task.type == TaskType.WORKER:
            problem = queue_name_problem(task.name)
            if problem is not None:
                return (
                    f"task {task.task_reference_name!r} has name {shown_name(task.name)}, "
                    f"not a task type name ({problem})"
                )
        for _, nested in task.children():
            problem = _worker_problem(nested)
            if problem is not None:
                return problem
    return None


class ForkJoinDynamicTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        state, frame, ts, wt = start.state, start.frame, start.task, start.definition
        inputs = decider.dereferenced(ts.input)
        specs = _simple_form(decider, start, inputs)
        if specs is None:
            specs = (
                _param_form(wt, inputs)
                if wt.dynamic_fork_tasks_param is not None
                or wt.dynamic_fork_join_tasks_param is None
                else _legacy_form(wt, inputs)
            )
        for spec in specs:
            spec.setdefault("type", "SIMPLE")
            if state.behaviour >= 2 and not spec.get("name"):
                # Conductor forks a system task that has no name (conductor-oss's
                # DynamicForkTests forks a SUB_WORKFLOW so): its child's name, or its type
                spec["name"] = _unnamed(spec)
        if decider.nodes[wt.task_reference_name].join_ref is None:
            raise TaskFailed(
                "Dynamic join definition is not followed by a join task.  Check the workflow "
                "definition."
            )
        try:
            parsed = [WorkflowTask.model_validate(spec) for spec in specs]
        except ValueError as exc:
            raise TaskFailed(
                f"Tasks could not be dynamically forked due to invalid input: {exc}"
            ) from None
        problem = decider.fork_ref_problem(wt.task_reference_name, parsed) or _worker_problem(
            parsed
        )
        if problem is not None:
            raise TaskFailed(f"Tasks could not be dynamically forked: {problem}")
        refs = [task.task_reference_name for task in parsed]
        state.dynamic_forks[ts.ref] = {"defRef": wt.task_reference_name, "tasks": specs}
        branches = decider.extend_fork(ts.ref, wt.task_reference_name, parsed)
        ts.input = {**ts.input, "forkedTasks": refs, "forkedTaskDefs": specs}
        decider.complete_inline(state, ts, {}, start.now_ms)
        opened = [
            decider.open_frame(state, frame, ts.ref, list_id, f"dyn:{i}", frame.suffix, False)
            for i, list_id in enumerate(branches)
        ]
        for key in opened:
            decider.start_first(state, key, start.now_ms, start.actions)
