"""DO_WHILE: the body runs at least once; after each iteration the loop output gets
``"<n>": {ref: output}`` and ``"iteration": n``, and ``loopCondition`` is evaluated with
``$`` = the loop's resolved inputParameters + ``{loopRef: loop output}`` (every
iteration so far) + ``{bodyRef: latest output}``. An empty condition means one
iteration; an empty body completes at once. Iteration ``n`` of a body task ``x`` is the
instance ``x__n``. ``inputParameters.keepLastN`` (a number N) keeps only the last N
iterations, as conductor-oss's: when iteration ``n`` ends, iteration ``n - N`` leaves the
loop's output and its task instances (nested ones too, every attempt) leave the run and
its rows. A retried or rerun run re-enters such a loop at the oldest iteration it kept
rows of, not at the first: the iterations before it are not run again.

Over a list (conductor-oss's list iteration): ``items`` (an expression; Orkes' form:
``inputParameters._items``) gives the list, resolved again before each iteration (a
single value is a list of one, null an empty list). An empty list completes the loop
at once with ``iteration`` 0; otherwise iteration ``n`` runs with ``loopIndex`` n - 1
and ``loopItem`` the list's item there in the loop's output, and the loop goes on while
there is a next item and, if it has one, ``loopCondition`` holds (evaluated with
``$.loopIndex`` and ``$.loopItem`` too)."""

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
        # 1, or where a retried run's kept iterations begin (keepLastN removed the others)
        first = _resumed_at(state, ts, node.body_refs, frame.suffix)
        ts.output = {"iteration": first}
        if wt.iterates_a_list():
            try:
                items = _items(decider, state, ts)
                if len(items) > decider.max_loop_iterations:
                    raise TaskFailed(
                        f"DO_WHILE {ts.ref!r} has {len(items)} items to iterate over, above "
                        f"the limit of {decider.max_loop_iterations} iterations"
                    )
                if first > len(items):
                    first = 1  # the list changed: the kept iterations are not of this one
                    ts.output["iteration"] = first
                if items:
                    _at(decider, ts, ts.output, items, first - 1)
            except TaskFailed as failure:
                decider.fail_inline(state, ts, str(failure), start.now_ms)
                return
            if not items:
                decider.complete_inline(state, ts, {"iteration": 0}, start.now_ms)
                return
            decider.touch(state, ts)  # the body's inputs read loopItem
        state.loops[ts.ref] = first
        decider.open_frame(
            state,
            frame,
            ts.ref,
            node.branches["body"],
            f"body:{first}",
            frame.suffix + f"__{first}",
            True,
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
        failure: str | None = None
        for ref in node.body_refs:
            ts = state.tasks.get(ref + body.suffix)
            if ts is not None:
                latest[ref] = ts.output
                if failure is None and ts.status.is_terminal and not ts.status.is_successful:
                    # a permissive body task failed (any other ended the run): the loop
                    # fails at its iteration's end, as conductor-oss's DoWhile
                    failure = ts.reason or f"task {ts.ref} {ts.status.value}"
        # in place: copying a growing loop output on every iteration would be quadratic
        output = loop.output
        output[str(n)] = latest
        output["iteration"] = n
        keep = _keep_last_n(loop)
        if keep is not None and keep < n:
            # conductor-oss's keepLastN: the output keeps the last N iterations only (one
            # key leaves per iteration, the older ones left before), and the tasks of that
            # iteration leave the run
            output.pop(str(n - keep), None)
            _remove_iteration(decider, state, loop, parent.suffix + f"__{n - keep}")
        decider.touch(state, loop)
        if failure is not None:
            decider.fail_inline(state, loop, failure, now_ms)
            return
        again = False
        items: list[Any] | None = None
        if wt.iterates_a_list():
            try:
                items = _items(decider, state, loop)
            except TaskFailed as failure:
                decider.fail_inline(state, loop, str(failure), now_ms)
                return
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
            if items is not None:
                bindings["loopIndex"] = n - 1
                if n - 1 < len(items):
                    bindings["loopItem"] = items[n - 1]
            try:
                again = evaluate_condition(wt.loop_condition, {"$": bindings}, memo=decider.scripts)
            except ScriptError as exc:
                decider.fail_inline(state, loop, f"loopCondition: {exc}", now_ms)
                return
        elif items is not None:
            again = True
        if items is not None:
            # over a list: only while there is a next item
            again = again and n < len(items)
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
            if items is not None:
                try:
                    _at(decider, loop, output, items, n)
                except TaskFailed as failure:
                    decider.fail_inline(state, loop, str(failure), now_ms)
                    return
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


def _keep_last_n(loop: TaskState) -> int | None:
    """The loop's ``keepLastN``, a whole number above 0, else None (not set, or not
    one: ignored, as a value Conductor could not read as an Integer)."""
    keep = loop.input.get("keepLastN")
    if isinstance(keep, int) and not isinstance(keep, bool) and keep > 0:
        return keep
    return None


def _remove_iteration(decider: Decider, state: RunState, loop: TaskState, suffix: str) -> None:
    """Remove the iteration of ``loop`` whose frame suffix is ``suffix`` (an ended one):
    its task instances, nested loops' iterations and dynamic forks' tasks included, leave
    the state, and their rows the run store."""
    body = set(decider.nodes[loop.def_ref].body_refs)
    for ts in list(state.tasks.values()):
        rest = ts.ref[len(ts.def_ref) :]
        if (
            (rest == suffix or rest.startswith(suffix + "__"))
            and ts.ref.startswith(ts.def_ref)
            and ts.status.is_terminal
            and decider.inside(ts.def_ref, body)
        ):
            decider.forget(state, ts)
    inside = [ref for ref in decider.nodes if decider.inside(ref, body)]
    decider.remove_rows(state, inside, suffix)


def _resumed_at(state: RunState, loop: TaskState, body_refs: list[str], suffix: str) -> int:
    """The iteration a retried or rerun run re-enters ``loop`` at: the oldest one it
    kept a row of, when ``keepLastN`` removed the ones before it; else 1."""
    if not state.replay or _keep_last_n(loop) is None:
        return 1
    oldest: int | None = None
    for ref in state.replay:
        for body_ref in body_refs:
            head = body_ref + suffix + "__"
            if ref.startswith(head):
                number = ref[len(head) :].split("__", 1)[0]
                if number.isdigit() and (oldest is None or int(number) < oldest):
                    oldest = int(number)
    return oldest if oldest is not None and oldest > 1 else 1


def _reads_only_iteration(condition: str, loop_ref: str) -> bool:
    """Whether every mention of ``loop_ref`` in ``condition`` is followed by
    ``.iteration`` (or ``['iteration']``), so that the loop's other output cannot be read."""
    mentions = [m.end() for m in re.finditer(re.escape(loop_ref), condition)]
    return all(_ITERATION.match(condition, end) is not None for end in mentions)


_ITERATION = re.compile(r"""\s*(?:\.\s*iteration\b|\[\s*(['"])iteration\1\s*\])""")


def _items(decider: Decider, state: RunState, loop: TaskState) -> list[Any]:
    """The list a DO_WHILE over a list iterates over, read now (not copied: each
    iteration reads its length and one item): ``items``, else ``inputParameters._items``;
    a list as is, null as an empty list, any other value as a list of one
    (conductor-oss's ``evaluateItemsList``)."""
    wt = decider.nodes[loop.def_ref].task
    ctx = decider.context(state)
    ctx["CPEWF_TASK_ID"] = loop.task_id
    value: Any = None
    if wt.items and wt.items.strip():
        value = decider.read_value(state, wt.items, ctx, f"items of task {loop.ref!r}")
    if value is None and "_items" in wt.input_parameters:
        template = wt.input_parameters["_items"]
        what = f"input '_items' of task {loop.ref!r}"
        if isinstance(template, str):
            value = decider.read_value(state, template, ctx, what)
        else:
            value = decider.resolve_values(state, {"_items": template}, ctx, lambda _: what)
            value = decider.dereferenced(value["_items"])
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _at(
    decider: Decider, loop: TaskState, output: dict[str, Any], items: list[Any], index: int
) -> None:
    """``loopIndex`` and, within the list, ``loopItem`` (a copy) of the iteration at
    ``index``."""
    output["loopIndex"] = index
    if 0 <= index < len(items):
        output["loopItem"] = decider.bounded_copy(items[index], f"loopItem of task {loop.ref!r}")
    else:
        output.pop("loopItem", None)
