"""EXCLUSIVE_JOIN: after branches of which one ran (DECISION/SWITCH cases), completes
with the output of the first task of ``joinOn`` that ran (else of the first of
``defaultExclusiveJoinTask`` that ran), once that task has ended; FAILED when it did not
succeed (Conductor's ExclusiveJoin). Input: ``joinOn`` and
``defaultExclusiveJoinTask``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.state import Frame, RunState, TaskState
from engine.decider.tasks.base import TaskHandler, TaskStart
from engine.language.definitions import TaskStatus

if TYPE_CHECKING:
    from engine.decider.core import Decider


class ExclusiveJoinTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        task, wt = start.task, start.definition
        task.status = TaskStatus.IN_PROGRESS
        task.start_time = start.now_ms
        task.input = {**task.input, "joinOn": list(wt.join_on)}
        if wt.default_exclusive_join_task:
            task.input["defaultExclusiveJoinTask"] = list(wt.default_exclusive_join_task)
        self.resume(decider, start.state, start.frame, task, start.now_ms)

    def resume(
        self, decider: Decider, state: RunState, frame: Frame, task: TaskState, now_ms: int
    ) -> bool:
        for refs in (task.input.get("joinOn"), task.input.get("defaultExclusiveJoinTask")):
            for ref in refs if isinstance(refs, list) else []:
                joined = state.tasks.get(str(ref) + frame.suffix)
                if joined is None or joined.status == TaskStatus.SKIPPED:
                    continue
                if not joined.status.is_terminal:
                    return False
                if joined.status.is_successful:
                    decider.complete_inline(state, task, dict(joined.output), now_ms)
                    return True
                decider.fail_inline(state, task, joined.reason or "joined task failed", now_ms)
                return True
        return False
