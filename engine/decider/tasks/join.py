"""JOIN: waits (IN_PROGRESS) until every branch of the FORK_JOIN before it has ended,
also when ``joinOn`` names a subset (nothing runs on detached after the JOIN), and
outputs ``{ref: output}`` for ``joinOn`` (or the last task of each branch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.decider.state import Frame, RunState, TaskState
from engine.decider.tasks.base import TaskHandler, TaskStart
from engine.language.definitions import TaskStatus

if TYPE_CHECKING:
    from engine.decider.core import Decider


class JoinTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        start.task.status = TaskStatus.IN_PROGRESS
        start.task.start_time = start.now_ms

    def resume(
        self, decider: Decider, state: RunState, frame: Frame, task: TaskState, now_ms: int
    ) -> bool:
        node = decider.nodes[task.def_ref]
        if node.fork_ref is not None:
            fork = node.fork_ref + frame.suffix
            if any(key.startswith(fork + "/") for key in frame.children):
                return False
        ctx = decider.context(state)
        output: dict[str, Any] = {}
        for ref in node.join_on:
            joined = state.tasks.get(ref + frame.suffix)
            if joined is not None:
                if not joined.status.is_terminal:
                    return False
                output[ref] = joined.output
            elif isinstance(ctx.get(ref), dict):
                output[ref] = ctx[ref].get("output")
        decider.complete_inline(state, task, output, now_ms)
        return True
