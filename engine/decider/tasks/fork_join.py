"""FORK_JOIN: completes at once and opens one frame per non-empty branch; the JOIN right
after it (:mod:`engine.decider.tasks.join`) waits for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.decider.tasks.base import TaskHandler, TaskStart

if TYPE_CHECKING:
    from engine.decider.core import Decider


class ForkJoinTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        state, frame, ts, wt = start.state, start.frame, start.task, start.definition
        node = decider.nodes[wt.task_reference_name]
        decider.complete_inline(state, ts, {}, start.now_ms)
        opened = [
            decider.open_frame(
                state, frame, ts.ref, node.branches[f"fork:{i}"], f"fork:{i}", frame.suffix, False
            )
            for i, branch in enumerate(wt.fork_tasks)
            if branch
        ]
        for key in opened:
            decider.start_first(state, key, start.now_ms, start.actions)
        decider.start_join(state, frame, start.now_ms, start.actions)
