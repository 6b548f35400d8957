"""TERMINATE: ends the run with ``terminationStatus`` (COMPLETED | FAILED | TERMINATED,
default COMPLETED), ``terminationReason`` and ``workflowOutput`` (else the normal run
output), canceling pending tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
        decider.complete_inline(
            state, ts, {"output": wf_output if wf_output is not None else {}}, now_ms
        )
        if wf_output is None or wf_output == {}:
            try:
                output = decider.run_output(state)
            except TaskFailed:
                output = {}
        else:
            output = wf_output if isinstance(wf_output, dict) else {"output": wf_output}
        status = RunStatus(status_text)
        decider.finish_run(
            state,
            status,
            output,
            str(reason) if reason is not None else None,
            now_ms,
            failed_task_id=ts.task_id if status == RunStatus.FAILED else None,
        )
