"""Synchronous execution and signals (the additions the official Conductor SDKs call).

* ``POST /api/workflow/execute/{name}/{version}`` starts a run and answers once it has
  ended, or is blocked on a WAIT task (one that waits for a signal, in it or in a running
  sub-workflow), or a task named in ``waitUntilTaskRef`` has ended; after
  ``waitForSeconds`` (default 10) it answers with the run as it is.
* ``POST /api/tasks/{workflowId}/{status}/signal`` completes (or fails) the first WAIT
  task still waiting in the run, else in its running sub-workflows; ``/signal/sync``
  does the same and answers like ``execute`` (404 when nothing waits).

The answer's shape follows ``returnStrategy`` (Conductor's WorkflowSignalResponder and
NotificationResult): ``TARGET_WORKFLOW`` (default) the run, ``BLOCKING_WORKFLOW`` the
(sub-)run that blocks, ``BLOCKING_TASK`` / ``BLOCKING_TASK_INPUT`` the task that blocks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from control_plane.deps import Deps
from engine.ports.run_store import RunRecord, TaskRecord
from protocol.task_types import conductor_task_type

__all__ = ["ReturnStrategy", "RunWaits"]

#: how often a waiting call re-reads the run when no write of this process wakes it
POLL_SECONDS = 0.1


class ReturnStrategy(StrEnum):
    TARGET_WORKFLOW = "TARGET_WORKFLOW"
    BLOCKING_WORKFLOW = "BLOCKING_WORKFLOW"
    BLOCKING_TASK = "BLOCKING_TASK"
    BLOCKING_TASK_INPUT = "BLOCKING_TASK_INPUT"


@dataclass
class _Blocking:
    tasks: list[tuple[RunRecord, TaskRecord]] = field(default_factory=list)
    run: RunRecord | None = None
    #: the highest ``seq`` of each run read, by workflow id
    last_seq: dict[str, int] = field(default_factory=dict)


def sub_workflow_id(row: TaskRecord) -> str | None:
    """The child run of a SUB_WORKFLOW row, once it was created."""
    output = row.output_data if isinstance(row.output_data, dict) else {}
    child = output.get("subWorkflowId")
    return child if isinstance(child, str) and child else None


def _waits_for_signal(row: TaskRecord) -> bool:
    """A WAIT task without a duration or time, still waiting (its input has neither)."""
    if row.task_type != "WAIT" or row.status.is_terminal:
        return False
    data = row.input_data if isinstance(row.input_data, dict) else {}
    return not data.get("duration") and not data.get("until")


class RunWaits:
    """Reads a run until it ends or blocks; renders the SignalResponse."""

    def __init__(
        self,
        deps: Deps,
        workflow_json: Callable[[RunRecord, bool], dict[str, Any]],
        task_json: Callable[[TaskRecord, RunRecord], dict[str, Any]],
    ) -> None:
        self.deps = deps
        self.workflow_json = workflow_json
        self.task_json = task_json

    def blocked_wait_task(self, workflow_id: str, depth: int = 0) -> TaskRecord | None:
        """The first WAIT task waiting for a signal in the run, else in its running
        sub-workflows (Conductor's TaskServiceImpl.findPendingBlockingTask)."""
        rows = self.deps.run_store.list_tasks(workflow_id)
        for row in rows:
            if row.task_type == "WAIT" and not row.status.is_terminal:
                return row
        if depth >= 32:
            return None
        for row in rows:
            child = sub_workflow_id(row)
            if row.task_type == "SUB_WORKFLOW" and not row.status.is_terminal and child:
                found = self.blocked_wait_task(child, depth + 1)
                if found is not None:
                    return found
        return None

    def _blocking(
        self, run: RunRecord, refs: list[str], found: _Blocking, depth: int = 0
    ) -> _Blocking:
        rows = self.deps.run_store.list_tasks(run.workflow_id)
        found.last_seq[run.workflow_id] = max((row.seq for row in rows), default=0)
        for row in rows:
            if _waits_for_signal(row) or (
                row.reference_task_name in refs and row.status.is_terminal
            ):
                found.tasks.append((run, row))
                found.run = found.run or run
            child = sub_workflow_id(row)
            if row.task_type == "SUB_WORKFLOW" and not row.status.is_terminal and child:
                sub = self.deps.run_store.get_run(child)
                if sub is not None and depth < 32:
                    self._blocking(sub, refs, found, depth + 1)
        return found

    def await_response(
        self,
        workflow_id: str,
        refs: list[str],
        strategy: ReturnStrategy,
        request_id: str | None,
        timeout_seconds: float,
    ) -> dict[str, Any] | None:
        """Wait until the run ended or blocks (at most ``timeout_seconds``); the
        SignalResponse (None when the strategy asks for a blocking task and none blocks,
        as Conductor answers an empty body)."""
        request_id = request_id or str(uuid.uuid4())
        deadline = time.monotonic() + timeout_seconds
        # woken by this process's writes to the run (the embedded engine); a blocking
        # task in a sub-workflow, or an engine elsewhere, is seen at the next re-read
        with self.deps.run_store.watch(workflow_id) as watch:
            while True:
                run = self.deps.run_store.get_run(workflow_id)
                if run is None:
                    return None
                blocking = _Blocking()
                if not run.status.is_terminal:
                    self._blocking(run, refs, blocking)
                    if blocking.tasks:
                        # read again: the tasks were read after the run, and the run's
                        # end (one transaction with its last rows) may have come between
                        run = self.deps.run_store.get_run(workflow_id) or run
                remaining = deadline - time.monotonic()
                if blocking.tasks and remaining > 0 and self._undecided(blocking):
                    watch.wait(min(remaining, POLL_SECONDS))
                    continue
                if run.status.is_terminal or blocking.tasks:
                    return self._response(run, blocking, strategy, request_id, False)
                if remaining <= 0:
                    return self._response(run, _Blocking(), strategy, request_id, True)
                watch.wait(min(remaining, POLL_SECONDS))

    def _undecided(self, blocking: _Blocking) -> bool:
        """Whether the answer waits (until its deadline at most) for the run to take in
        the end of a task it waits for: a task that did not get through, in a run that
        has neither ended nor added a task since (a retry, what comes after a permissive
        task; an optional one is COMPLETED_WITH_ERRORS once taken in). conductor-oss
        answers after the decision that took the task's end in, so a task that fails
        its run answers the run FAILED; here a worker's result ends the task's row a
        moment before the interpreter decides. A failed permissive task that ends its
        branch, the JOIN waiting for others, is answered at the deadline."""
        for run, row in blocking.tasks:
            if (
                _waits_for_signal(row)
                or row.status.is_successful
                or blocking.last_seq[run.workflow_id] > row.seq  # a task added since
            ):
                continue
            # read again, as the target run is: its end may have come after its rows
            current = self.deps.run_store.get_run(run.workflow_id)
            if current is not None and not current.status.is_terminal:
                return True
        return False

    def _response(
        self,
        target: RunRecord,
        blocking: _Blocking,
        strategy: ReturnStrategy,
        request_id: str,
        timed_out: bool,
    ) -> dict[str, Any] | None:
        common = {
            "responseType": strategy.value,
            "targetWorkflowId": target.workflow_id,
            "targetWorkflowStatus": target.status.value,
            "requestId": request_id,
            "signalTimeout": timed_out,
        }
        if strategy in (ReturnStrategy.BLOCKING_TASK, ReturnStrategy.BLOCKING_TASK_INPUT):
            if not blocking.tasks:
                return None
            run, row = blocking.tasks[0]
            task = self.task_json(row, run)
            return {
                **common,
                "taskType": conductor_task_type(row.task_type, row.task_def_name),
                "taskId": row.task_id,
                "referenceTaskName": row.reference_task_name,
                "retryCount": row.retry_count,
                "taskDefName": task.get("taskDefName"),
                "retriedTaskId": row.retried_task_id,
                "workflowType": run.name,
                "reasonForIncompletion": row.reason_for_incompletion,
                "priority": run.priority,
                "workflowId": row.workflow_id,
                "correlationId": run.correlation_id,
                "status": row.status.value,
                "input": task.get("inputData") or {},
                "output": task.get("outputData") or {},
                "createdBy": row.worker_id,
                "createTime": row.start_time or 0,
                "updateTime": row.update_time or 0,
            }
        run = target
        if strategy == ReturnStrategy.BLOCKING_WORKFLOW and blocking.run is not None:
            run = blocking.run
        body = self.workflow_json(run, True)
        return {
            **common,
            "workflowId": run.workflow_id,
            "correlationId": run.correlation_id,
            "input": body.get("input") or {},
            "output": body.get("output") or {},
            "createdBy": body.get("createdBy"),
            "createTime": run.create_time,
            "updateTime": run.update_time or 0,
            "priority": run.priority,
            "variables": body.get("variables") or {},
            "tasks": body.get("tasks") or [],
            "status": run.status.value,
        }
