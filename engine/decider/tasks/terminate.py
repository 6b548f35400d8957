"""TERMINATE: ends the run with ``terminationStatus`` (COMPLETED | FAILED | TERMINATED,
default COMPLETED), canceling pending tasks. As Conductor's: the task's output (and the
run's, whose ``outputParameters`` are then not evaluated) is ``workflowOutput`` when a map,
``{"output": value}`` for any other value, else ``{}``; the run's reason is
``terminationReason``, else "Workflow is <STATUS> by TERMINATE task: <taskId>"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.tasks.base import TaskFailed, TaskHandler, TaskStart
from engine.language.definitions import RunStatus

if TYPE_CHECKING:
    from engine.decider.core import Decider


class TerminateTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        state, ts, now_ms = start.state, start.task, start.now_ms
        status_text = str(ts.input.get("terminationStatus") or "COMPLETED").upper()
        allowed = {"COMPLETED", "FAILED", "TERMINATED"}
        if status_text not in allowed:
            raise TaskFailed(
                f"terminationStatus must be one of {sorted(allowed)}, not {status_text}"
            )
        reason = ts.input.get("terminationReason")
        wf_output = ts.input.get("workflowOutput")
        # as Conductor's Terminate: a map is the output, any other value is {"output": v}
        if wf_output is None:
            output: dict[str, Any] = {}
        elif isinstance(wf_output, dict):
            output = dict(wf_output)
        else:
            output = {"output": wf_output}
        decider.complete_inline(state, ts, output, now_ms)
        if reason is None or not str(reason).strip():
            reason = f"Workflow is {status_text} by TERMINATE task: {ts.task_id}"
        status = RunStatus(status_text)
        # the run's output is the TERMINATE task's (outputParameters are not evaluated)
        decider.finish_run(
            state,
            status,
            dict(output),
            str(reason),
            now_ms,
            failed_task_id=ts.task_id if status != RunStatus.COMPLETED else None,
        )
