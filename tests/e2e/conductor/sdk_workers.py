"""Workers written with the official Conductor Python SDK (``@worker_task``), unchanged
for Stepway, for ``test_sdk.py``. None of their task types has a registered task
definition (except ``sdk2_autoreg``, which the SDK registers itself).

This module imports only the SDK: the SDK's TaskHandler spawns one process per worker
that imports it. No ``from __future__ import annotations``: the SDK compares parameter
annotations to its ``Task`` class.
"""

from typing import Any

from conductor.client.http.models.task import Task
from conductor.client.http.models.task_result import TaskResult
from conductor.client.http.models.task_result_status import TaskResultStatus
from conductor.client.worker.worker_task import worker_task

TASK_TYPES = ("sdk2_greet", "sdk2_fail_once", "sdk2_item", "sdk2_domained", "sdk2_autoreg")
#: the domain ``sdk2_domained`` polls
DOMAIN = "cool"


@worker_task(task_definition_name="sdk2_greet", poll_interval_millis=50)
def greet(name: str) -> dict[str, Any]:
    return {"greeting": f"Hello, {name}"}


@worker_task(task_definition_name="sdk2_fail_once", poll_interval_millis=50)
def fail_once(task: Task) -> TaskResult:
    """FAILED on a task's first try (``retryCount`` 0), COMPLETED on any later one."""
    result = TaskResult(task_id=task.task_id, workflow_instance_id=task.workflow_instance_id)
    if task.retry_count == 0:
        result.status = TaskResultStatus.FAILED
        result.reason_for_incompletion = "first try fails"
    else:
        result.status = TaskResultStatus.COMPLETED
        result.output_data = {"tries": task.retry_count + 1}
    return result


@worker_task(task_definition_name="sdk2_item", poll_interval_millis=50)
def item(n: int) -> dict[str, Any]:
    return {"double": n * 2}


@worker_task(task_definition_name="sdk2_domained", poll_interval_millis=50, domain=DOMAIN)
def domained(x: int) -> dict[str, Any]:
    return {"where": DOMAIN, "x": x}


@worker_task(task_definition_name="sdk2_autoreg", poll_interval_millis=50, register_task_def=True)
def autoreg(x: int) -> dict[str, Any]:
    return {"x": x}
