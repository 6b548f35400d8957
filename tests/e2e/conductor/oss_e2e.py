"""Helpers of the ports of conductor-oss's Java end-to-end tests
(``e2e/src/test/java/io/conductor/e2e``): the definitions its ``RegistrationUtil`` and
``WorkflowRerunTests`` build, and its ways of reading and answering tasks.

The Java tests answer tasks by task id or by reference (``TaskClient.updateTask``,
``updateTaskSync``), without polling; so do these, through the same endpoints
(``POST /api/tasks``, ``POST /api/tasks/{workflowId}/{ref}/{status}/sync``). Conductor
decides inside those calls; Stepway a moment later, so after each call the tests wait
for the state the Java test awaits (its ``await().untilAsserted``) and then assert it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.e2e.conductor.harness import SETTLE_SECONDS, Conductor, task, workflow

#: Conductor's terminal task statuses (``Task.Status.isTerminal``)
TERMINAL = frozenset(
    {
        "COMPLETED",
        "COMPLETED_WITH_ERRORS",
        "FAILED",
        "FAILED_WITH_TERMINAL_ERROR",
        "CANCELED",
        "TIMED_OUT",
        "SKIPPED",
    }
)


# --- definitions ------------------------------------------------------------------------


def task_def(name: str, retry_count: int = 0) -> dict[str, Any]:
    return {"name": name, "retryCount": retry_count, "ownerEmail": "test@conductor.io"}


def simple_task(ref: str, name: str | None = None, **input_parameters: Any) -> dict[str, Any]:
    """``WorkflowRerunTests.simpleTask``: a SIMPLE task with its own TaskDef, retryCount 0
    (``name`` defaults to ``ref``, as there)."""
    name = name or ref
    return {
        "name": name,
        "taskReferenceName": ref,
        "type": "SIMPLE",
        "taskDefinition": task_def(name),
        "inputParameters": input_parameters,
    }


def sub_workflow_task(ref: str, child: str, **fields: Any) -> dict[str, Any]:
    """``WorkflowRerunTests.subWorkflowTask``: version 1 of ``child``."""
    return {
        "name": child,
        "taskReferenceName": ref,
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": child, "version": 1},
        "inputParameters": {},
        **fields,
    }


def fork_join(ref: str, branches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "name": "FORK_JOIN",
        "taskReferenceName": ref,
        "type": "FORK_JOIN",
        "forkTasks": branches,
    }


def join(ref: str, join_on: list[str]) -> dict[str, Any]:
    return {"name": "JOIN", "taskReferenceName": ref, "type": "JOIN", "joinOn": join_on}


def definition(name: str, tasks: list[dict[str, Any]], timeout: int = 600) -> dict[str, Any]:
    """``WorkflowRerunTests.registerWorkflow``'s definition: TIME_OUT_WF after ``timeout``."""
    return workflow(name, tasks, timeoutSeconds=timeout, timeoutPolicy="TIME_OUT_WF")


def register_workflow_def(
    conductor: Conductor, name: str, task1: str, task2: str, *, shared_def: bool = False
) -> dict[str, Any]:
    """``RegistrationUtil.registerWorkflowDef``: an INLINE ``inline_<task1>`` then a
    SIMPLE ``<task2>``, retryCount 0. RegistrationUtil gives the SIMPLE task ``task1``'s
    TaskDef (``shared_def``: ``test_oss_workflows.
    test_registration_util_shares_a_task_definition``); the other ports give it
    ``task2``'s, of the same settings, so as not to depend on that shape."""
    def1, def2 = task_def(task1), task_def(task2)
    inline = {
        "name": task1,
        "taskReferenceName": f"inline_{task1}",
        "type": "INLINE",
        "taskDefinition": def1,
        "inputParameters": {"evaluatorType": "graaljs", "expression": "true;"},
    }
    simple = {
        "name": task2,
        "taskReferenceName": task2,
        "type": "SIMPLE",
        "taskDefinition": def1 if shared_def else def2,
        "inputParameters": {"value": "${workflow.input.value}", "order": "123"},
    }
    wf = workflow(
        name,
        [inline, simple],
        inputParameters=["value", "inlineValue"],
        description="Workflow to monitor order state",
        timeoutSeconds=600,
        timeoutPolicy="TIME_OUT_WF",
    )
    conductor.register(wf)
    # RegistrationUtil registers both TaskDefs in one call, the same one twice when
    # task1 == task2, which Stepway refuses (test_oss_workflows.
    # test_registration_util_registers_a_task_definition_twice): once here
    if task1 == task2 and not shared_def:
        conductor.taskdefs(def1)
    else:
        conductor.taskdefs(def1, def2)
    return wf


def register_workflow_with_sub_workflow_def(
    conductor: Conductor, name: str, child: str, task: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``RegistrationUtil.registerWorkflowWithSubWorkflowDef``: the parent's only task is a
    SUB_WORKFLOW ``<child>`` (priority 12) whose run's only task is a SIMPLE ``<task>``."""
    def1, def2 = task_def(task), task_def(child)
    inner = {
        "name": task,
        "taskReferenceName": task,
        "type": "SIMPLE",
        "taskDefinition": def1,
        "inputParameters": {"evaluatorType": "graaljs", "expression": "true;"},
    }
    sub = {
        "name": child,
        "taskReferenceName": child,
        "type": "SUB_WORKFLOW",
        "taskDefinition": def2,
        "subWorkflowParam": {"name": child, "version": 1, "priority": 12},
        "inputParameters": {"subWorkflowName": child, "subWorkflowVersion": "1"},
    }
    common = {
        "inputParameters": ["value", "inlineValue"],
        "timeoutSeconds": 600,
        "timeoutPolicy": "TIME_OUT_WF",
    }
    child_wf = workflow(child, [inner], description="Sub Workflow to test retry", **common)
    parent_wf = workflow(name, [sub], description="Workflow to test retry", **common)
    conductor.register(parent_wf)
    conductor.register(child_wf)
    conductor.taskdefs(def1, def2)
    return parent_wf, child_wf


# --- reading runs -----------------------------------------------------------------------


def first_of(run: dict[str, Any], ref: str) -> dict[str, Any]:
    """``taskOf``/``getTaskByRefName``-style: the first task of ``ref`` in the run."""
    found = [t for t in run["tasks"] if t["referenceTaskName"] == ref]
    assert found, (
        f"{ref} not found in {run['workflowId']}: {[t['referenceTaskName'] for t in run['tasks']]}"
    )
    first: dict[str, Any] = found[0]
    return first


def active_of(run: dict[str, Any], ref: str) -> dict[str, Any] | None:
    """``findActiveTask``: the first non-terminal task of ``ref``, or None."""
    tasks: list[dict[str, Any]] = run["tasks"]
    for t in tasks:
        if t["referenceTaskName"] == ref and t["status"] not in TERMINAL:
            return t
    return None


def eventually(probe: Callable[[], Any], seconds: float = SETTLE_SECONDS, message: str = "") -> Any:
    """Awaitility's ``await().untilAsserted``: ``probe()`` until it returns a truthy value
    without raising an AssertionError; the last error (or ``message``) when it never did."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = probe()
            if value:
                return value
            error: AssertionError = AssertionError(message or "condition not reached")
        except AssertionError as exc:
            error = exc
        if time.monotonic() > deadline:
            raise error
        time.sleep(0.05)


def await_active(
    conductor: Conductor, workflow_id: str, ref: str, seconds: float = SETTLE_SECONDS
) -> dict[str, Any]:
    """``awaitActiveTask``: the first non-terminal task of ``ref`` once there is one."""
    found: dict[str, Any] = eventually(
        lambda: active_of(conductor.run(workflow_id), ref),
        seconds,
        f"no active {ref} in {workflow_id}",
    )
    return found


def await_first_task(conductor: Conductor, workflow_id: str) -> dict[str, Any]:
    """``awaitFirstTask``: ``tasks[0]`` once the run has a task."""
    run = conductor.wait_tasks(workflow_id, 1)
    assert run["tasks"], f"{workflow_id} has no task"
    first: dict[str, Any] = run["tasks"][0]
    return first


def await_sub_workflow_id(conductor: Conductor, workflow_id: str, ref: str | None = None) -> str:
    """``awaitSubWorkflowId``: the child run id of ``tasks[0]`` (or of the task ``ref``,
    its latest, as ``Workflow.getTaskByRefName``)."""

    def probe() -> str | None:
        run = conductor.run(workflow_id)
        if not run["tasks"]:
            return None
        found = run["tasks"][0] if ref is None else task(run, ref)
        child: str | None = found.get("subWorkflowId")
        return child

    child: str = eventually(probe, message=f"no child run of {workflow_id}")
    return child


# --- answering tasks and steering runs --------------------------------------------------


def complete_task(
    conductor: Conductor,
    task: dict[str, Any],
    status: str,
    output: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``completeTask``/``TaskClient.updateTaskSync``: ``POST
    /tasks/{workflowId}/{ref}/{status}/sync`` with the task's output; the run it answers."""
    body = (task.get("outputData") or {}) if output is None else output
    r = conductor.http.post(
        f"/api/tasks/{task['workflowInstanceId']}/{task['referenceTaskName']}/{status}/sync",
        json=body,
    )
    assert r.status_code == 200, r.text
    run: dict[str, Any] = r.json()
    return run


def update_task(
    conductor: Conductor,
    workflow_id: str,
    task_id: str,
    status: str,
    reason: str | None = None,
    output: dict[str, Any] | None = None,
) -> None:
    """``TaskClient.updateTask`` with a TaskResult naming the task by id."""
    body: dict[str, Any] = {
        "workflowInstanceId": workflow_id,
        "taskId": task_id,
        "status": status,
        "outputData": output or {},
    }
    if reason is not None:
        body["reasonForIncompletion"] = reason
    r = conductor.http.post("/api/tasks", json=body)
    assert r.status_code == 200, r.text


def rerun(conductor: Conductor, workflow_id: str, **request: Any) -> None:
    """``WorkflowClient.rerunWorkflow``: ``POST /workflow/{id}/rerun`` with a
    RerunWorkflowRequest (keyword arguments in its camelCase field names)."""
    r = conductor.http.post(f"/api/workflow/{workflow_id}/rerun", json=request)
    assert r.status_code == 200, r.text


def restart(conductor: Conductor, workflow_id: str, use_latest: bool = False) -> None:
    """``WorkflowClient.restart``."""
    r = conductor.http.post(
        f"/api/workflow/{workflow_id}/restart", params={"useLatestDefinitions": use_latest}
    )
    assert r.status_code == 204, r.text


def bulk_retry(conductor: Conductor, *workflow_ids: str) -> None:
    """``WorkflowClient.retryWorkflow(List)``: ``POST /workflow/bulk/retry``."""
    r = conductor.http.post("/api/workflow/bulk/retry", json=list(workflow_ids))
    assert r.status_code == 200, r.text
    assert r.json()["bulkErrorResults"] == {}, r.text


def terminate(conductor: Conductor, workflow_id: str, reason: str) -> None:
    r = conductor.http.delete(f"/api/workflow/{workflow_id}", params={"reason": reason})
    assert r.status_code == 200, r.text
