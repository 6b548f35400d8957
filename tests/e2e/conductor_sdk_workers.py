"""Workers written for Conductor with its official Python SDK, unchanged for Stepway.

Used by ``test_conductor_sdk.py``. They live in their own module that imports only the
SDK: the SDK's ``TaskHandler`` spawns one process per worker and pickles each worker
function by reference, so every spawned process imports this module; keeping Stepway
out of it keeps worker start-up fast.

No ``from __future__ import annotations`` here: the SDK tells a worker that takes the
whole ``Task`` from one that takes input fields by comparing the parameter annotation to
the ``Task`` class, which a string annotation would defeat.
"""

from typing import Any

from conductor.client.context.task_context import TaskInProgress, get_task_context
from conductor.client.http.models.task import Task
from conductor.client.http.models.task_result import TaskResult
from conductor.client.http.models.task_result_status import TaskResultStatus
from conductor.client.worker.worker_task import worker_task

#: the workerId of the class-style worker (``Worker(..., worker_id=SHOUTER)``)
SHOUTER = "shouter"


@worker_task(task_definition_name="sdk_greet", poll_interval_millis=50)
def greet(name: str) -> dict[str, Any]:
    """Input fields as parameters, a dict as output."""
    return {"greeting": f"Hello, {name}"}


def shout(task: Task) -> TaskResult:
    """The whole Task in, a TaskResult with a log line out (run as a ``Worker``)."""
    result = TaskResult(
        task_id=task.task_id,
        workflow_instance_id=task.workflow_instance_id,
        worker_id=SHOUTER,
    )
    result.status = TaskResultStatus.COMPLETED
    result.output_data = {"loud": str(task.input_data["text"]).upper() + "!"}
    result.log("shouted")
    return result


@worker_task(task_definition_name="sdk_flaky", poll_interval_millis=50)
def flaky(task: Task) -> TaskResult:
    """FAILED on the first attempt, COMPLETED on the retry the task definition allows.

    The TaskResult names no workerId: it is optional in Conductor's TaskResult."""
    result = TaskResult(task_id=task.task_id, workflow_instance_id=task.workflow_instance_id)
    if task.retry_count == 0:
        result.status = TaskResultStatus.FAILED
        result.reason_for_incompletion = "transient failure, please retry"
    else:
        result.status = TaskResultStatus.COMPLETED
        result.output_data = {"retryCount": task.retry_count}
    return result


@worker_task(task_definition_name="sdk_slow", poll_interval_millis=50)
def slow(task: Task) -> TaskResult:
    """IN_PROGRESS with callbackAfterSeconds twice, then COMPLETED. The round count is
    carried in the task's own outputData, which Conductor keeps between IN_PROGRESS
    updates and hands back on the next poll."""
    result = TaskResult(task_id=task.task_id, workflow_instance_id=task.workflow_instance_id)
    rounds = int((task.output_data or {}).get("rounds", 0)) + 1
    result.output_data = {"rounds": rounds, "pollCount": task.poll_count}
    if rounds < 3:
        result.status = TaskResultStatus.IN_PROGRESS
        result.callback_after_seconds = 1
    else:
        result.status = TaskResultStatus.COMPLETED
    return result


@worker_task(task_definition_name="sdk_progress", poll_interval_millis=50)
def progress(step: int) -> dict[str, Any] | TaskInProgress:
    """The SDK's own long-running shape: return ``TaskInProgress`` until done."""
    polls = get_task_context().get_poll_count()
    if polls < 2:
        return TaskInProgress(callback_after_seconds=1, output={"polls": polls})
    return {"done": True, "step": step, "polls": polls}


#: responseTimeoutSeconds of sdk_long's task definition; the worker runs longer than it
LONG_RESPONSE_TIMEOUT = 8


@worker_task(task_definition_name="sdk_long", poll_interval_millis=50, lease_extend_enabled=True)
def long_running(seconds: float) -> dict[str, Any]:
    """Runs past its response timeout; the SDK's LeaseManager keeps the lease alive by
    posting IN_PROGRESS with extendLease every 80% of the timeout."""
    import time

    time.sleep(seconds)
    return {"slept": seconds}
