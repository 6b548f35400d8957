"""DO_WHILE: the body runs at least once; after each iteration the loop output gets
``"<n>": {ref: output}`` and ``"iteration": n``, and ``loopCondition`` is evaluated with
``$`` = the loop's resolved inputParameters + ``{loopRef: loop output}`` (every
iteration so far) + ``{bodyRef: latest output}``. An empty condition means one
iteration; an empty body completes at once. Iteration ``n`` of a body task ``x`` is the
instance ``x__n``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from engine.decider.state import Frame, RunState, TaskState
from engine.decider.tasks.base import TaskFailed, TaskHandler, TaskStart
from engine.language.definitions import TaskStatus
from engine.language.scripting import ScriptError, evaluate_condition

if TYPE_CHECKING:
    from engine.decider.core import Decider


class DoWhileTask(TaskHandler):
    def start(self, decider: Decider, start: TaskStart) -> None:
        state, frame, ts, wt = start.state, start.frame, start.task, start.definition
        node = decider.nodes[wt.task_reference_name]
        ts.status = TaskStatus.IN_PROGRESS
        ts.start_time = start.now_ms
        if not wt.loop_over:
            decider.complete_inline(state, ts, {"iteration": 0}, start.now_ms)
            return
        state.loops[ts.ref] = 1
        ts.output = {"iteration": 1}
        decider.open_frame(
            state, frame, ts.ref, node.branches["body"], "body:1", frame.suffix + "__1", True
        )

    def child_frame_ended(
        self,
        decider: Decider,
        state: RunState,
        parent: Frame,
        owner: TaskState,
        child: Frame,
        now_ms: int,
    ) -> None:
        """An iteration (``child``, the body frame) ended: record it, then run the next
        one or complete the loop."""
        loop, body = owner, child
        node = decider.nodes[loop.def_ref]
        wt = node.task
        n = state.loops[loop.ref]
        latest: dict[str, Any] = {}
        for ref in node.body_refs:
            ts = state.tasks.get(ref + body.suffix)
            if ts is not None:
                latest[ref] = ts.output
        # in place: copying a growing loop output on every iteration would be quadratic
        output = loop.output
        output[str(n)] = latest
        output["iteration"] = n
        decider.touch(state, loop)
        again = False
        if wt.loop_condition and wt.loop_condition.strip():
            ctx = decider.context(state)
            ctx["CPEWF_TASK_ID"] = loop.task_id
            try:
                inputs = decider.resolve_values(
                    state,
                    wt.input_parameters,
                    ctx,
                    lambda key: f"input {key!r} of task {loop.ref!r}",
                )
            except TaskFailed as failure:
                decider.fail_inline(state, loop, str(failure), now_ms)
                return
            bindings: dict[str, Any] = dict(decider.dereferenced(inputs))
            # as Conductor: the loop's whole output (every iteration so far), then each
            # body task's latest output under its reference name. A condition that reads
            # only the loop's iteration count gets just that and the latest iteration:
            # binding the whole (growing) output would make each iteration cost
            # O(iterations)
            if _reads_only_iteration(wt.loop_condition, loop.def_ref):
                bindings[loop.def_ref] = {"iteration": n, str(n): latest}
            else:
                bindings[loop.def_ref] = output
            bindings.update(latest)
            try:
                again = evaluate_condition(wt.loop_condition, {"$": bindings}, memo=decider.scripts)
            except ScriptError as exc:
                decider.fail_inline(state, loop, f"loopCondition: {exc}", now_ms)
                return
        if again and n >= decider.max_loop_iterations:
            decider.fail_inline(
                state,
                loop,
                f"DO_WHILE {loop.ref!r} reached the limit of {decider.max_loop_iterations} "
                "iterations",
                now_ms,
            )
            return
        if again:
            state.loops[loop.ref] = n + 1
            output["iteration"] = n + 1
            decider.touch(state, loop)
            decider.open_frame(
                state,
                parent,
                loop.ref,
                node.branches["body"],
                f"body:{n + 1}",
                parent.suffix + f"__{n + 1}",
                True,
            )
        else:
            state.loops.pop(loop.ref, None)
            decider.complete_inline(state, loop, output, now_ms)


def _reads_only_iteration(condition: str, loop_ref: str) -> bool:
    """Whether every mention of ``loop_ref`` in ``condition`` is followed by
    ``.iteration`` (or ``['iteration']``), so that the loop's other output cannot be read."""
    mentions = [m.end() for m in re.finditer(re.escape(loop_ref), condition)]
    return all(_ITERATION.match(condition, end) is not None for end in mentions)


_ITERATION = re.compile(r"""\s*(?:\.\s*iteration\b|\[\s*(['"])iteration\1\s*\])""")
