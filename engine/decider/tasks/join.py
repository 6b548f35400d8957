"""JOIN: waits (IN_PROGRESS, input ``joinOn``) until every task it joins on has ended,
as Conductor's Join does: ``joinOn`` as defined, or the last task of each branch of the
FORK_JOIN before it, or of each branch a FORK_JOIN_DYNAMIC before it made. A branch
still running after the task it is joined on goes on; the run ends once it has. The
output is ``{ref: output}`` of each joined task with an output. A joined task that never
ran (a branch that ended without it) is not waited for once its fork's branches ended.
An optional joined task that failed (COMPLETED_WITH_ERRORS) makes the JOIN
COMPLETED_WITH_ERRORS, as Conductor's; a permissive one that failed fails the JOIN (with
the joined tasks' reasons) once every task it joins on has ended."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.state import Frame, RunState, TaskState
from engine.decider.tasks.base import TaskHandler, TaskStart
from engine.language.definitions import TaskStatus

if TYPE_CHECKING:
    from engine.decider.core import Decider


def join_on(decider: Decider, state: RunState, frame: Frame, task: TaskState) -> list[str]:
    """The refs the JOIN instance ``task`` waits for."""
    node = decider.nodes[task.def_ref]
    if node.task.join_on or node.fork_ref is None:
        return list(node.join_on)
    made = state.dynamic_forks.get(node.fork_ref + frame.suffix)
    if made is not None:  # a FORK_JOIN_DYNAMIC: one branch per task it made
        return [str(task["taskReferenceName"]) for task in made["tasks"]]
    return list(node.join_on)


class JoinTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        task = start.task
        task.status = TaskStatus.IN_PROGRESS
        task.start_time = start.now_ms
        task.input = {**task.input, "joinOn": join_on(decider, start.state, start.frame, task)}

    def resume(
        self, decider: Decider, state: RunState, frame: Frame, task: TaskState, now_ms: int
    ) -> bool:
        node = decider.nodes[task.def_ref]
        refs = task.input.get("joinOn")
        if not isinstance(refs, list):
            refs = join_on(decider, state, frame, task)
        fork = node.fork_ref + frame.suffix if node.fork_ref is not None else None
        branches_open = fork is not None and any(
            key.startswith(fork + "/") for key in frame.children
        )
        output: dict[str, Any] = {}
        with_errors: list[str] = []
        failed: list[TaskState] = []
        for ref in refs:
            joined = state.tasks.get(str(ref) + frame.suffix)
            if joined is None:
                if branches_open:
                    return False  # its branch may still get to it
                continue
            if not joined.status.is_terminal:
                return False
            if joined.output:
                output[str(ref)] = joined.output
            if joined.status == TaskStatus.COMPLETED_WITH_ERRORS:
                with_errors.append(f"{joined.name}/{joined.task_id}")
            elif not joined.status.is_successful:
                failed.append(joined)  # a permissive task: the others were waited for
        if failed:
            # conductor-oss's Join: the reasons of the joined tasks that did not succeed
            task.output = output
            reasons = " ".join(t.reason for t in failed if t.reason)
            decider.fail_inline(state, task, reasons, now_ms)
            return True
        decider.complete_inline(state, task, output, now_ms)
        if with_errors:
            task.status = TaskStatus.COMPLETED_WITH_ERRORS
            task.reason = " ".join(with_errors) + " completed with errors"
        return True
