"""The Decider: a pure step function of the workflow language (docs/architecture.md,
"The Decider").

Definition + run state in, next actions out. No I/O, no clock (time is always an argument),
no randomness, no logging. The ``WorkflowInterpreter`` orchestration performs the actions
and feeds the outcomes back.

API::

    decider = Decider(definition, task_defs={name: TaskDef}, payloads=None)
    state = decider.start(workflow_id=..., input=..., correlation_id=None, now_ms=...,
                          variables=None)
    decision = decider.decide(state, now_ms)          # Decision(state, actions, records,
                                                      #          finished, cancel)
    state = decider.on_started(state, task_id, attempt, worker_id, now_ms)
    state = decider.on_outcome(state, TaskOutcome(...), now_ms)
    decision = decider.decide(state, now_ms)          # after every outcome
    deadline = decider.wait_deadline(state, task_id)  # Deadline(at_ms, kind) | None
    decision = decider.on_workflow_timeout(state, now_ms)
    decision = decider.terminate(state, reason, now_ms)
    decider.is_waiting(state, task_id)                # still waiting for this attempt?
    decider.stall(state, now_ms)                      # fail a run that cannot progress
    decider.workflow_deadline_ms(state)               # start + workflow timeoutSeconds

Ownership: ``decide``/``on_*``/``terminate`` update the given state **in place** and return
it (in the Decision). Copying a run state on each step would make a long run quadratic;
keep ``state.model_copy(deep=True)`` if the old value is needed. A stale or duplicate
outcome returns the state unchanged.

Execution model. The definition is indexed once in ``__init__`` (every task list gets a
``list_id``; every ref its list, position, parent and, for containers, their lists). A run
is a set of *frames*: executing task lists with a cursor (the root sequence, a SWITCH case,
each fork branch, each DO_WHILE body iteration). ``decide`` advances only frames marked
ready (by an outcome or by a child frame that ended), evaluating inline task types on the
spot, so a step costs O(tasks started or finished in it), independent of run length.

* Task ids are ``uuid5(workflow id + instance ref)``: stable across attempts (attempts are
  numbered from 1; a message id is ``<taskId>:<attempt>``). Inside a DO_WHILE every
  reference gets the iteration suffix ``ref__N``; nested loops append their own
  (``ref__2__1`` = outer iteration 2, inner iteration 1).
* Expression context (for ``engine.language.expressions.resolve``): ``workflow`` plus one entry per
  task instance (``input``, ``output``, ``status``, ``taskId``, ``referenceTaskName``,
  ``reasonForIncompletion``); the unsuffixed ``ref`` is an alias of the latest instance.
  It is cached on the state object and updated incrementally. An output offloaded to the
  payload store (``{"outputRef": ref}``) is read through the injected ``payloads`` loader,
  so expressions see the value while the state and the history keep only the reference.
* Task types: one handler per type in :mod:`engine.decider.tasks` (SWITCH, FORK_JOIN,
  JOIN, DO_WHILE, SET_VARIABLE, TERMINATE are decided inline; the others are scheduled).
  A script/expression error of an inline type fails the task (no retry).
  A non-optional failure anywhere fails the run at once: the JOINs and DO_WHILEs around
  the failed task become FAILED, everything else pending CANCELED.
* Scheduled types (WORKER, HTTP, CALL_TOOL, LOGIC_APP, DOCUMENT_INTELLIGENCE, INLINE,
  JSON_JQ_TRANSFORM, HUMAN, WAIT, SUB_WORKFLOW) become :class:`ScheduleTask` actions,
  built by one builder for the first attempt and every retry. ``startDelay`` delays
  attempt 1. INLINE and JSON_JQ_TRANSFORM are evaluated by an activity in the engine's
  evaluator processes (``engine.runtime.builtins.evaluate``), so their result is
  recorded once and a replay never evaluates them again.
* Retries: attempts = 1 + (workflow task ``retryCount`` if set, else the task
  definition's, else 0). The task definition is the inline ``taskDefinition`` or the
  registered one named like the task. Delays per :mod:`engine.language.retry`; Retry-After wins
  when larger; a retry that would start after ``totalTimeoutSeconds`` is not made.
  FAILED_WITH_TERMINAL_ERROR (and CANCELED) never retry.
* TIMED_OUT: kind ``total`` ends retries; otherwise ``timeoutPolicy`` (RETRY when there is
  no task definition): RETRY retries while attempts remain, TIME_OUT_WF fails the run
  TIMED_OUT (even for an optional task, as Conductor), ALERT_ONLY records a warning and the
  task keeps waiting (that deadline kind is not reported again for this attempt).
* Exhausted: optional -> COMPLETED_WITH_ERRORS and continue; else the run FAILS (TIMED_OUT
  under TIME_OUT_WF) with ``failedReferenceTaskNames``, pending tasks canceled.
* Run output: ``outputParameters`` resolved against the final context, or the output of the
  task that finished last when empty.
* A single decide() starts at most ``max_inline_steps`` (default
  :data:`MAX_INLINE_STEPS`) tasks; beyond that (a DO_WHILE of inline tasks that never
  ends) the run fails instead of hanging the orchestration. A DO_WHILE runs at most
  ``max_loop_iterations`` (default :data:`MAX_LOOP_ITERATIONS`) iterations: when its
  condition asks for one more, the loop fails, and with it the run (unless optional).
  While a loop runs, its records carry only ``{"iteration": n}``: its output grows with
  every iteration and is recorded whole when the loop ends.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from engine.decider.nodes import Node
from engine.decider.state import (
    Deadline,
    DeadlineKind,
    Decision,
    Frame,
    RunResult,
    RunState,
    ScheduleTask,
    TaskChange,
    TaskOutcome,
    TaskState,
)
from engine.decider.tasks import TaskFailed, TaskStart, handler_for, human_timeout
from engine.decider.tasks.base import ScheduledTask
from engine.decider.tasks.dynamic import SYSTEM_TYPES as DYNAMIC_SYSTEM_TYPES
from engine.language.definitions import (
    CALL_TASK_TYPES,
    RunStatus,
    TaskDef,
    TaskStatus,
    TaskType,
    WorkflowDef,
    WorkflowTask,
)
from engine.language.expressions import (
    InterpolationTooLong,
    copy_json,
    peek,
    reference_paths,
    resolve,
)
from engine.language.retry import retry_delay_seconds
from engine.language.scripting import ScriptMemo
from engine.runtime.payload_refs import dereference, has_pointers, is_pointer, pointer
from protocol.payload_keys import INPUT_REF, OUTPUT_REF, POINTER, POINTER_PATH, offloaded
from protocol.runs import BEHAVIOUR, ReplayTask, child_run_id
from protocol.task_types import row_kind

__all__ = [
    "MAX_INLINE_STEPS",
    "MAX_LOOP_ITERATIONS",
    "Deadline",
    "Decider",
    "Decision",
    "PayloadLoader",
    "RunResult",
    "RunState",
    "ScheduleTask",
    "TaskChange",
    "TaskOutcome",
    "TaskState",
]

#: Upper bound of tasks one decide() evaluates inline before it fails the run.
MAX_INLINE_STEPS = 10_000
#: Default upper bound of the iterations of one DO_WHILE (engine.runtime.run_limits.RunLimits).
MAX_LOOP_ITERATIONS = 10_000

ROOT = "$"
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://stepway/task-id")

#: Reads an offloaded payload by reference. Payloads are written once under their
#: reference and never change, so reading one is as deterministic as the Decider.
PayloadLoader = Callable[[str], Any]

_WAITING = (TaskStatus.SCHEDULED, TaskStatus.IN_PROGRESS)
_KIND_ORDER: dict[str, int] = {"total": 0, "task": 1, "human": 2, "response": 3, "poll": 4}


#: ``${ref.output}`` or ``${ref.output.some.path}``: one whole reference to a task output.
_OUTPUT_REFERENCE = re.compile(r"^\$\{(?P<root>[A-Za-z0-9_\-]+)\.output(?P<path>[.\[][^${}]*)?\}$")
#: ``${workflow.input.some.path}``: one whole reference into the workflow input.
_INPUT_REFERENCE = re.compile(r"^\$\{workflow\.input(?P<path>[.\[][^${}]*)\}$")
#: ``${workflow.variables.name.some.path}``: one whole reference into a variable.
_VARIABLE_REFERENCE = re.compile(
    r"^\$\{workflow\.variables\.(?P<name>[A-Za-z0-9_\-]+)(?P<path>[.\[][^${}]*)?\}$"
)
#: the first key of a path (``.a.b`` / ``['a']``)
_FIRST_KEY = re.compile(r"^(?:\.(?P<name>[A-Za-z0-9_\-]+)|\[['\"](?P<quoted>[^'\"]+)['\"]\])")


def _json_size(value: Any, limit: int) -> int:
    """The size of ``value`` as compact UTF-8 JSON; short scalars are not serialized."""
    if value is None or isinstance(value, bool | int | float):
        return 8
    if isinstance(value, str) and len(value) * 4 + 2 <= limit:
        return len(value) + 2
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


#: the DO_WHILE iteration suffixes of an instance ref (``__2``, ``__2__1``)
_ITERATION_SUFFIXES = re.compile(r"(?:__\d+)+$")


def _iteration_base(ref: str) -> str:
    """``ref`` without DO_WHILE iteration suffixes (``x__2__1`` -> ``x``)."""
    return _ITERATION_SUFFIXES.sub("", ref) or ref


def _same_instances(a: str, b: str) -> bool:
    """Whether task refs ``a`` and ``b`` (of one :func:`_iteration_base`) can name the
    same instance: equal, or one is the other with iteration suffixes (``x`` inside a
    DO_WHILE runs as ``x__1``, as a task named ``x__1`` outside it does)."""
    return a == b or a.startswith(b + "__") or b.startswith(a + "__")


def _iteration_of(ts: TaskState) -> int:
    suffix = ts.ref[len(ts.def_ref) :]
    if not suffix:
        return 0
    return int(suffix.rsplit("__", 1)[-1])


def _loop_iteration(ts: TaskState) -> int:
    """A DO_WHILE row's ``iteration``: the iteration its loop is in (1 from its first),
    as Conductor's DoWhile counts it; 0 before it starts one."""
    current = ts.output.get("iteration")
    return current if isinstance(current, int) and not isinstance(current, bool) else 0


class Decider:
    """Pure decision logic for runs of one definition (see the module docstring)."""

    def __init__(
        self,
        definition: WorkflowDef,
        task_defs: Mapping[str, TaskDef] = {},
        max_inline_steps: int = MAX_INLINE_STEPS,
        payloads: PayloadLoader | None = None,
        max_loop_iterations: int = MAX_LOOP_ITERATIONS,
        max_value_bytes: int | None = None,
        scripts: ScriptMemo | None = None,
    ) -> None:
        self.definition = definition
        #: the memo of SWITCH and DO_WHILE scripts: a replay evaluates them again on the
        #: same data (shared by the Deciders of one definition cache)
        self.scripts = scripts if scripts is not None else ScriptMemo()
        self.payloads = payloads
        self.max_inline_steps = max_inline_steps
        self.max_loop_iterations = max_loop_iterations
        self.max_value_bytes = max_value_bytes
        self.task_defs = dict(task_defs)
        self.lists: list[list[WorkflowTask]] = []
        self.nodes: dict[str, Node] = {}
        self._index(definition.tasks, None)
        self._referenced, self._all_instances, self._compactable = self._references()
        self._joins: dict[str, str] | None = None
        #: the definition makes tasks while it runs (FORK_JOIN_DYNAMIC, DYNAMIC)
        self.dynamic = any(
            node.task.type in (TaskType.FORK_JOIN_DYNAMIC, TaskType.DYNAMIC)
            for node in self.nodes.values()
        )

    # ------------------------------------------------------------------ definition index

    def for_run(self, state: RunState) -> Decider:
        """The Decider to decide ``state`` with: this one, or for a definition that makes
        tasks while it runs a copy of it that knows the tasks this run made (a Decider is
        shared by the runs of its definition; no run changes it)."""
        if not self.dynamic:
            return self
        mine = copy.copy(self)
        mine.nodes = dict(self.nodes)
        mine.lists = list(self.lists)
        mine._joins = None
        mine.dynamic = False  # a copy is not copied again
        for fork_ref, made in state.dynamic_forks.items():
            tasks = [WorkflowTask.model_validate(spec) for spec in made["tasks"]]
            mine.extend_fork(fork_ref, str(made["defRef"]), tasks)
        for def_ref, name in state.dynamic_names.items():
            mine.resolve_dynamic(def_ref, name)
        return mine

    def extend_fork(self, fork_ref: str, fork_def_ref: str, tasks: list[WorkflowTask]) -> list[int]:
        """Index the branches (one per task) a FORK_JOIN_DYNAMIC instance made; their
        list ids. A WORKER task among them without a task definition of its own or in the
        snapshot gets Conductor's default one. :meth:`fork_ref_problem` first: a ref
        indexed again replaces the node it names."""
        return [self._index([task], fork_def_ref, made_by=fork_def_ref) for task in tasks]

    def fork_ref_problem(self, fork_def_ref: str, tasks: list[WorkflowTask]) -> str | None:
        """Why the tasks FORK_JOIN_DYNAMIC ``fork_def_ref`` would make cannot be indexed,
        or None: a ``taskReferenceName`` (nesting included) given twice, or naming a task
        of the definition or one another dynamic fork made, or one of their DO_WHILE
        instances (``ref__N``). The tasks an earlier instance of the same fork made (a
        DO_WHILE iteration, a rerun) are its own to replace."""
        taken: dict[str, list[str]] = {}
        for ref, node in self.nodes.items():
            if not self._made_by(node, fork_def_ref):
                taken.setdefault(_iteration_base(ref), []).append(ref)
        given: dict[str, list[str]] = {}
        for ref in self._descendants(tasks):
            base = _iteration_base(ref)
            for other in given.get(base, []):
                if _same_instances(ref, other):
                    return (
                        f"taskReferenceName {ref!r} is given twice"
                        if ref == other
                        else f"taskReferenceName {ref!r} names an iteration of {other!r}, "
                        "also given"
                    )
            for other in taken.get(base, []):
                if _same_instances(ref, other):
                    node = self.nodes[other]
                    whose = (
                        f"a task the dynamic fork {node.made_by!r} made"
                        if node.made_by is not None
                        else "a task of the workflow definition"
                    )
                    what = (
                        f"is {whose}"
                        if ref == other
                        else f"would share the DO_WHILE iteration names of {other!r}, {whose}"
                    )
                    return f"taskReferenceName {ref!r} {what}"
            given.setdefault(base, []).append(ref)
        return None

    def _made_by(self, node: Node, fork_def_ref: str) -> bool:
        """Whether FORK_JOIN_DYNAMIC ``fork_def_ref`` made ``node``, itself or through a
        dynamic fork it made."""
        return node.made_by is not None and self.inside(node.made_by, {fork_def_ref})

    def inside(self, def_ref: str, refs: set[str]) -> bool:
        """Whether the task ``def_ref`` is one of ``refs`` or was made by a
        FORK_JOIN_DYNAMIC among them (itself or through a dynamic fork it made)."""
        seen: set[str] = set()
        ref: str | None = def_ref
        while ref is not None and ref not in seen:
            if ref in refs:
                return True
            seen.add(ref)
            node = self.nodes.get(ref)
            ref = node.made_by if node is not None else None
        return False

    def forget(self, state: RunState, ts: TaskState) -> None:
        """Drop an ended task instance from the run state and the expression context
        (a DO_WHILE's ``keepLastN``; :meth:`remove_rows` removes its rows)."""
        del state.tasks[ts.ref]
        state.dynamic_forks.pop(ts.ref, None)
        ctx = state._ctx
        if ctx is not None and state._ctx_owner == id(state):
            ctx.pop(ts.ref, None)
            latest = ctx.get(ts.def_ref)
            if latest is not None and latest["referenceTaskName"] == ts.ref:
                # as :meth:`context` would build it now: the last instance left, if any
                ctx.pop(ts.def_ref)
                for other in state.tasks.values():
                    if other.def_ref == ts.def_ref and other.ref in ctx:
                        ctx[ts.def_ref] = ctx[other.ref]

    def remove_rows(self, state: RunState, def_refs: list[str], suffix: str) -> None:
        """Have the run store delete the rows of the instances ``<def_ref><suffix>`` and
        every instance nested in one (``<def_ref><suffix>__*``), every attempt: records
        with ``removed`` set, emitted after the step's other records. By reference name,
        as the run state may no longer hold those instances (:meth:`compact`)."""
        for def_ref in def_refs:
            task = self.nodes[def_ref].task
            state.removed.append(
                TaskChange(
                    workflow_id=state.workflow_id,
                    task_id="",
                    ref=def_ref + suffix,
                    def_ref=def_ref,
                    name=task.name,
                    type=task.type,
                    status=TaskStatus.COMPLETED,
                    removed=True,
                )
            )

    def resolve_dynamic(self, def_ref: str, name: str) -> None:
        """A DYNAMIC task resolved to type ``name`` (a worker type, or a system task
        type it runs as such): its node takes the task definition of that name (a
        worker type with none: Conductor's default; a system task needs none)."""
        node = self.nodes[def_ref]
        td = node.task.task_definition or self.task_defs.get(name)
        if td is None and name not in DYNAMIC_SYSTEM_TYPES:
            td = TaskDef(name=name)
        self.nodes[def_ref] = dataclasses.replace(node, task_def=td)

    def _index(
        self, tasks: list[WorkflowTask], parent: str | None, made_by: str | None = None
    ) -> int:
        """Index a task list; ``made_by``: the FORK_JOIN_DYNAMIC that made it."""
        list_id = len(self.lists)
        self.lists.append(tasks)
        for pos, task in enumerate(tasks):
            ref = task.task_reference_name
            task_def = task.task_definition or self.task_defs.get(task.name)
            if task_def is None and made_by is not None and task.type == TaskType.WORKER:
                task_def = TaskDef(name=task.name)
            node = Node(task, list_id, pos, parent, task_def, made_by=made_by)
            self.nodes[ref] = node
            for key, case in task.decision_cases.items():
                node.branches[f"case:{key}"] = self._index(case, ref, made_by)
            if task.default_case:
                node.branches["default"] = self._index(task.default_case, ref, made_by)
            for i, branch in enumerate(task.fork_tasks):
                node.branches[f"fork:{i}"] = self._index(branch, ref, made_by)
            if task.loop_over:
                node.branches["body"] = self._index(task.loop_over, ref, made_by)
        forks = (TaskType.FORK_JOIN, TaskType.FORK_JOIN_DYNAMIC)
        for pos, task in enumerate(tasks):
            if task.type == TaskType.JOIN and pos > 0 and tasks[pos - 1].type in forks:
                fork = tasks[pos - 1]
                join = self.nodes[task.task_reference_name]
                join.fork_ref = fork.task_reference_name
                self.nodes[fork.task_reference_name].join_ref = task.task_reference_name
            if task.type == TaskType.JOIN:
                join = self.nodes[task.task_reference_name]
                if task.join_on:
                    join.join_on = list(task.join_on)
                elif join.fork_ref is not None:
                    fork = tasks[pos - 1]
                    join.join_on = [b[-1].task_reference_name for b in fork.fork_tasks if b]
            if task.type == TaskType.DO_WHILE:
                self.nodes[task.task_reference_name].body_refs = self._descendants(task.loop_over)
        return list_id

    def _descendants(self, tasks: list[WorkflowTask]) -> list[str]:
        refs: list[str] = []
        for task in tasks:
            refs.append(task.task_reference_name)
            for _, nested in task.children():
                refs.extend(self._descendants(nested))
        return refs

    def _references(self) -> tuple[set[str], set[str], bool]:
        """Refs some expression reads (latest instance), refs read with an explicit iteration
        (every instance), and whether every reference could be known statically."""
        templates: list[Any] = [self.definition.output_parameters]
        templates.extend(node.task.input_parameters for node in self.nodes.values())
        latest: set[str] = set()
        every: set[str] = set()
        known = True
        for template in templates:
            text = json.dumps(template)
            if re.search(r"\$\{[^}]*\$\{", text):
                known = False  # a computed root (${${...}.output}) may name any task
            # each root once: a template may repeat a reference many times
            for root in {root for _, root in reference_paths(template)}:
                latest.add(root)
                if re.search(r"\b" + re.escape(root) + r"__\d", text):
                    every.add(root)
        return latest, every, known

    def compact(self, state: RunState) -> RunState:
        """Drop the task instances nothing can read again, in place (the interpreter calls
        it before carrying the state into ``continue_as_new``, so that the state of a long
        run stays as small as its live part instead of growing with every step).

        Kept: live and pending tasks, the task that finished last, containers that own
        open frames, tasks at or after an open frame's cursor, every task of an iteration
        still running, the branch ends an unfinished JOIN waits for, and the latest
        instance of every ref an expression of the definition reads (every instance when
        one is read with an explicit ``__N``). Rows in the run store keep everything.
        When a reference cannot be known statically nothing is dropped."""
        if not self._compactable or state.status != RunStatus.RUNNING:
            return state
        open_suffixes = {frame.suffix for frame in state.frames.values() if frame.suffix}
        owners = {frame.owner for frame in state.frames.values() if frame.owner}
        retries = set(state.retries)
        latest: dict[str, str] = {}
        for ref, ts in state.tasks.items():
            if ts.def_ref in self._referenced:
                seen = latest.get(ts.def_ref)
                if seen is None or _iteration_rank(ref) >= _iteration_rank(seen):
                    latest[ts.def_ref] = ref
        keep_latest = set(latest.values())
        dropped = False
        for ref in list(state.tasks):
            ts = state.tasks[ref]
            suffix = ref[len(ts.def_ref) :]
            node = self.nodes[ts.def_ref]
            frame = state.frames.get(ts.frame)
            join_ref = self._join_waiting_for(ts.def_ref)
            if (
                not ts.status.is_terminal
                or ts.task_id in state.pending
                or ref in retries
                or ref == state.last_ref
                or ref in owners
                or ref in keep_latest
                or ts.def_ref in self._all_instances
                or (suffix and suffix in open_suffixes)
                or (frame is not None and frame.list_id == node.list_id and node.pos >= frame.pos)
                or (join_ref is not None and self._join_open(state, join_ref + suffix, suffix))
            ):
                continue
            del state.tasks[ref]
            dropped = True
        if dropped:
            state._ctx = None
        return state

    @staticmethod
    def _join_open(state: RunState, join_ref: str, suffix: str) -> bool:
        """Whether JOIN instance ``join_ref`` may still read its branch ends."""
        join = state.tasks.get(join_ref)
        if join is not None:
            return not join.status.is_terminal
        # not started yet, or finished and dropped: only an open iteration can start it
        return not suffix or any(frame.suffix == suffix for frame in state.frames.values())

    def _join_waiting_for(self, def_ref: str) -> str | None:
        """The JOIN whose joinOn names ``def_ref``, if any."""
        if self._joins is None:
            self._joins = {
                ref: node.task.task_reference_name
                for node in self.nodes.values()
                if node.task.type == TaskType.JOIN
                for ref in node.join_on
            }
        return self._joins.get(def_ref)

    def next_task_id(self, state: RunState) -> tuple[str, int]:
        """The id and ``seq`` of the run's next task row (a task instance or a retry of
        one): deterministic, from the run, its generation and the count of rows so far."""
        state.seq += 1
        key = f"{state.workflow_id}/{state.generation}/{state.seq}"
        return str(uuid.uuid5(_NAMESPACE, key)), state.seq

    # ------------------------------------------------------------------ public API

    def start(
        self,
        *,
        workflow_id: str,
        input: dict[str, Any],
        correlation_id: str | None = None,
        now_ms: int,
        variables: dict[str, Any] | None = None,
        generation: str = "",
        replay: list[ReplayTask] | None = None,
        seq_base: int = 0,
        task_inputs: dict[str, dict[str, Any]] | None = None,
        behaviour: int = BEHAVIOUR,
    ) -> RunState:
        """A new run's state; call :meth:`decide` next. ``generation``: see
        :attr:`RunState.generation`; ``replay``, ``seq_base``, ``task_inputs``: a retried
        or rerun run (:class:`protocol.runs.RunInput`); ``behaviour``: the interpreter
        behaviour it was started under (``protocol.runs.BEHAVIOUR``)."""
        state = RunState(
            behaviour=behaviour,
            generation=generation,
            seq=seq_base,
            replay={entry.ref: entry for entry in replay or []},
            task_inputs=dict(task_inputs or {}),
            workflow_id=workflow_id,
            workflow_type=self.definition.name,
            version=self.definition.version,
            correlation_id=correlation_id,
            input=input if offloaded(input, INPUT_REF) else self.definition.run_input(input),
            variables={**self.definition.run_variables(), **(variables or {})},
            start_time=now_ms,
        )
        state.frames[ROOT] = Frame(key=ROOT, list_id=0)
        state.ready.append(ROOT)
        return state

    def decide(self, state: RunState, now_ms: int) -> Decision:
        """Advance everything that needs no I/O; the I/O to start now."""
        actions: list[ScheduleTask] = []
        if state.status != RunStatus.RUNNING:
            return self._emit(state, actions)
        if state.retries:
            retries, state.retries = state.retries, []
            for ref in retries:
                self._dispatch_retry(state, state.tasks[ref], now_ms, actions)
        budget = [self.max_inline_steps]
        while state.ready and state.status == RunStatus.RUNNING:
            key = state.ready.pop(0)
            frame = state.frames.get(key)
            if frame is not None:
                self._advance(state, frame, now_ms, actions, budget)
        return self._emit(state, actions)

    def on_started(
        self,
        state: RunState,
        task_id: str,
        attempt: int,
        worker_id: str,
        now_ms: int,
        response_from: int | None = None,
    ) -> RunState:
        """A worker took the task (IN_PROGRESS) at ``now_ms``; the response timeout runs
        from then, or from ``response_from`` when later (a check found the worker's
        lease extended, or the attempt waiting out a callback). Learning the same start
        again changes nothing."""
        ts = self._waiting_task(state, task_id, attempt)
        if ts is None:
            return state
        later = response_from if response_from is not None and response_from > now_ms else None
        if (
            ts.status == TaskStatus.IN_PROGRESS
            and ts.start_time == now_ms
            and ts.response_from == later
        ):
            return state
        ts.status = TaskStatus.IN_PROGRESS
        ts.start_time = now_ms
        ts.response_from = later
        ts.worker_id = worker_id or None
        if "response" in ts.alerts:
            ts.alerts = [k for k in ts.alerts if k != "response"]
        self.touch(state, ts)
        return state

    def on_child_started(
        self, state: RunState, task_id: str, attempt: int, child_id: str, now_ms: int
    ) -> RunState:
        """A SUB_WORKFLOW's child run was created: the task is IN_PROGRESS with
        ``subWorkflowId`` in its output (as Conductor's SubWorkflow.start)."""
        ts = self._waiting_task(state, task_id, attempt)
        if ts is None:
            return state
        ts.output = {"subWorkflowId": child_id}
        return self.on_started(state, task_id, attempt, "", now_ms)

    def on_called(
        self, state: RunState, task_id: str, attempt: int, output: dict[str, Any]
    ) -> RunState:
        """The call of an ``asyncComplete`` task answered with success: the task is
        IN_PROGRESS with the call's output and waits for a task update to end it (as
        Conductor's HTTP task with ``asyncComplete``); its deadlines still hold."""
        ts = self._waiting_task(state, task_id, attempt)
        if ts is None:
            return state
        ts.status = TaskStatus.IN_PROGRESS
        ts.output = dict(output)
        self.touch(state, ts)
        return state

    def on_outcome(self, state: RunState, outcome: TaskOutcome, now_ms: int) -> RunState:
        """Apply what happened to a scheduled attempt; call :meth:`decide` next."""
        ts = self._waiting_task(state, outcome.task_id, outcome.attempt)
        if ts is None:
            return state
        status = outcome.status
        if status in _WAITING:
            return state
        if status.is_successful:
            ts.status = TaskStatus.COMPLETED if status == TaskStatus.SKIPPED else status
            ts.output = dict(outcome.output)
            ts.reason = outcome.reason
            ts.end_time = now_ms
            del state.pending[ts.task_id]
            self._succeeded(state, ts)
            return state
        node = self.nodes[ts.def_ref]
        td = node.task_def
        run_status = RunStatus.FAILED
        final_status = status
        retry = status in (TaskStatus.FAILED, TaskStatus.TIMED_OUT)
        #: TIME_OUT_WF ends the run TIMED_OUT at once, even for an optional task
        time_out_run = False
        reason = outcome.reason
        fired = outcome.timeout_kind
        if status == TaskStatus.TIMED_OUT and fired == "child":
            # the child run of a SUB_WORKFLOW timed out (its own timeoutSeconds): the task is
            # TIMED_OUT (Conductor's SubWorkflow) and retried per its retry count, then times
            # the run out (DeciderService.retry), whatever this task's timeout policy
            run_status = RunStatus.TIMED_OUT
        elif status == TaskStatus.TIMED_OUT:
            # ("child" was taken above; the test narrows the type to a deadline's kind)
            kind = (None if fired == "child" else fired) or self._fired_kind(state, ts, now_ms)
            policy = td.timeout_policy if td is not None else "RETRY"
            # an attempt that timed out and cannot be retried times the run out
            # (Conductor's DeciderService.retry), whatever the policy
            run_status = RunStatus.TIMED_OUT
            reason = reason or self._timeout_reason(ts, kind, now_ms)
            if kind == "response":
                pass  # Conductor times the attempt out whatever the policy and retries it
            elif policy == "ALERT_ONLY":
                if kind in ts.alerts:  # this deadline was reported already: a duplicate
                    return state
                ts.alerts.append(kind)
                state.warnings.append(
                    f"task {ts.ref} attempt {ts.attempt}: {kind} timeout elapsed (ALERT_ONLY)"
                )
                return state
            elif policy == "TIME_OUT_WF":
                retry = False
                time_out_run = True
            elif kind == "total":
                retry = False
        elif status == TaskStatus.CANCELED:
            # a SUB_WORKFLOW whose child run was terminated (Conductor's SubWorkflow maps a
            # TERMINATED child to a CANCELED task): not retried, and the run ends
            # TERMINATED (Conductor's DeciderService.retry maps CANCELED so)
            run_status = RunStatus.TERMINATED
        elif status != TaskStatus.FAILED:
            final_status = TaskStatus.FAILED_WITH_TERMINAL_ERROR
        ts.status = final_status
        ts.output = dict(outcome.output)
        ts.reason = reason or f"task {final_status.value}"
        ts.end_time = now_ms
        if retry and ts.attempt < 1 + self._retry_count(node):
            delay_of = functools.partial(
                retry_delay_seconds,
                td.retry_logic if td is not None else "FIXED",
                td.retry_delay_seconds if td is not None else 0,
                td.backoff_scale_factor if td is not None else 1,
                ts.attempt - 1,
                outcome.retry_after_seconds,
                max_delay_seconds=td.max_retry_delay_seconds if td is not None else 0,
            )
            delay = delay_of(
                jitter_ms=td.backoff_jitter_ms if td is not None else 0,
                jitter_key=f"{ts.task_id}:{ts.attempt}",
            )
            total = td.total_timeout_seconds if td is not None else 0
            first = ts.first_scheduled_time if ts.first_scheduled_time is not None else now_ms
            if not total or now_ms + delay * 1000 < first + total * 1000:
                ts.retry_delay_seconds = delay
                ts.retry_callback_seconds = int(delay_of())
                state.retries.append(ts.ref)
                self.touch(state, ts)
                return state
            ts.status = TaskStatus.TIMED_OUT
            ts.reason = f"{ts.reason}; no retry: totalTimeoutSeconds ({total}s) would elapse"
            run_status = RunStatus.TIMED_OUT
        self.touch(state, ts)
        self._final_failure(state, ts, now_ms, run_status, even_optional=time_out_run)
        return state

    def _timeout_reason(self, ts: TaskState, kind: DeadlineKind, now_ms: int) -> str:
        """Conductor's reason for a timed-out attempt (DeciderService)."""
        td = self.nodes[ts.def_ref].task_def
        policy = td.timeout_policy if td is not None else "RETRY"
        since = ts.scheduled_time if ts.scheduled_time is not None else now_ms
        elapsed = max(0, now_ms - since) // 1000
        if kind == "response" and td is not None:
            return (
                f"responseTimeout: {td.response_timeout_seconds} exceeded for the taskId: "
                f"{ts.task_id} with Task Definition: {ts.name}"
            )
        if kind == "poll" and td is not None:
            return (
                f"Task poll timed out after {elapsed} seconds. Poll timeout configured as "
                f"{td.poll_timeout_seconds} seconds. Timeout policy configured to {policy}"
            )
        if kind == "total" and td is not None:
            first = ts.first_scheduled_time if ts.first_scheduled_time is not None else since
            return (
                f"Task {ts.name}/{ts.task_id} exceeded total timeout of "
                f"{td.total_timeout_seconds} seconds (elapsed {max(0, now_ms - first) // 1000} "
                f"seconds across all attempts including retry delays). Timeout policy: {policy}"
            )
        seconds = human_timeout(ts, td) if ts.type == TaskType.HUMAN else None
        if seconds is None:
            seconds = td.timeout_seconds if td is not None else 0
        return (
            f"Task timed out after {elapsed} seconds. Timeout configured as {seconds} seconds. "
            f"Timeout policy configured to {policy}"
        )

    def wait_deadline(self, state: RunState, task_id: str) -> Deadline | None:
        """The earliest deadline of a pending wait, or None when it has none."""
        ref = state.pending.get(task_id)
        if ref is None:
            return None
        ts = state.tasks[ref]
        if ts.status not in _WAITING or ts.retry_delay_seconds is not None:
            return None
        found = [d for d in self._deadlines(ts) if d.kind not in ts.alerts]
        if not found:
            return None
        return min(found, key=lambda d: (d.at_ms, _KIND_ORDER[d.kind]))

    def response_bound(self, state: RunState, task_id: str, since_ms: int) -> Deadline | None:
        """For a WORKER attempt the run has not seen taken (SCHEDULED), the earliest its
        response timeout can fall: a worker may take it at ``since_ms`` (its scheduling, or
        the last time the run saw it untaken). None for other tasks, and without a task
        definition (no response timeout)."""
        ref = state.pending.get(task_id)
        if ref is None:
            return None
        ts = state.tasks[ref]
        td = self.nodes[ts.def_ref].task_def
        if (
            ts.type != TaskType.WORKER
            or ts.status != TaskStatus.SCHEDULED
            or ts.retry_delay_seconds is not None
            or td is None
            or "response" in ts.alerts
        ):
            return None
        since = max(since_ms, ts.scheduled_time or 0)
        return Deadline(at_ms=since + td.response_timeout_seconds * 1000, kind="response")

    def is_waiting(self, state: RunState, task_id: str) -> bool:
        """True while the current attempt of ``task_id`` still waits for its outcome."""
        ref = state.pending.get(task_id)
        if ref is None or state.status != RunStatus.RUNNING:
            return False
        ts = state.tasks[ref]
        return ts.status in _WAITING and ts.retry_delay_seconds is None

    def on_workflow_timeout(self, state: RunState, now_ms: int) -> Decision:
        """The workflow's timeoutSeconds elapsed."""
        if state.status == RunStatus.RUNNING:
            seconds = self.definition.timeout_seconds
            if self.definition.timeout_policy == "TIME_OUT_WF":
                self.finish_run(
                    state, RunStatus.TIMED_OUT, {}, f"workflow timed out after {seconds}s", now_ms
                )
            elif not state.timeout_alerted:
                state.timeout_alerted = True
                state.warnings.append(f"workflow timeout of {seconds}s elapsed (ALERT_ONLY)")
        return self._emit(state, [])

    def terminate(self, state: RunState, reason: str, now_ms: int) -> Decision:
        """External terminate: the run ends TERMINATED, pending tasks canceled."""
        if not state.status.is_terminal:
            self.finish_run(state, RunStatus.TERMINATED, {}, reason, now_ms)
        return self._emit(state, [])

    def fail(self, state: RunState, reason: str, now_ms: int) -> Decision:
        """The interpreter cannot go on (a defect, bad data): the run ends FAILED with
        ``reason`` and, as a terminated run, every task still open is CANCELED (Conductor's
        terminateWorkflow cancels the non-terminal tasks of a run that FAILED too). A run
        the Decider had ended already (the defect came while its end was recorded) keeps
        its rows and becomes FAILED with ``reason``."""
        self.finish_run(
            state, RunStatus.FAILED, {}, reason, now_ms, failed_task_id=state.failed_task_id
        )
        return self._emit(state, [])

    def stall(self, state: RunState, now_ms: int) -> RunResult:
        """The result for a run with nothing pending that did not finish (a bug guard)."""
        if not state.status.is_terminal:
            self.finish_run(
                state,
                RunStatus.FAILED,
                {},
                "run stalled: no task pending and nothing to decide",
                now_ms,
            )
        return self._result(state)

    def workflow_deadline_ms(self, state: RunState) -> int | None:
        seconds = self.definition.timeout_seconds
        return state.start_time + seconds * 1000 if seconds else None

    def context(self, state: RunState) -> dict[str, Any]:
        """The expression context of the run (cached on the state; do not mutate)."""
        ctx = state._ctx
        if ctx is None or state._ctx_owner != id(state):
            ctx = {"workflow": self.workflow_entry(state)}
            for ts in state.tasks.values():
                entry = self._entry(ts, state.behaviour)
                ctx[ts.ref] = entry
                ctx[ts.def_ref] = entry
            state._ctx = ctx
            state._ctx_owner = id(state)
        return ctx

    # ------------------------------------------------------------------ frames

    def _advance(
        self,
        state: RunState,
        frame: Frame,
        now_ms: int,
        actions: list[ScheduleTask],
        budget: list[int],
    ) -> None:
        tasks = self.lists[frame.list_id]
        while state.status == RunStatus.RUNNING:
            if frame.blocking is not None:
                return
            if frame.pos >= len(tasks):
                if not frame.children:
                    self._end_frame(state, frame, now_ms)
                return
            wt = tasks[frame.pos]
            ts = state.tasks.get(wt.task_reference_name + frame.suffix)
            if ts is None:
                budget[0] -= 1
                if budget[0] < 0:
                    self.finish_run(
                        state,
                        RunStatus.FAILED,
                        {},
                        f"more than {self.max_inline_steps} tasks evaluated in one step "
                        "(a DO_WHILE that never ends?)",
                        now_ms,
                    )
                    return
                self._start_task(state, frame, wt, now_ms, actions)
                continue
            if ts.status.is_successful or (
                ts.status.is_terminal
                and ts.task_id not in state.pending
                and self._permissive(state, self.nodes[ts.def_ref])
            ):
                # (a permissive task that failed: the run goes on past it)
                frame.pos += 1
                continue
            handler = handler_for(ts.type)
            if (
                ts.status == TaskStatus.IN_PROGRESS
                and handler is not None
                and handler.resume(self, state, frame, ts, now_ms)
            ):
                continue
            return

    def open_frame(
        self,
        state: RunState,
        parent: Frame,
        owner: str,
        list_id: int,
        label: str,
        suffix: str,
        blocking: bool,
    ) -> str:
        key = f"{owner}/{label}"
        state.frames[key] = Frame(
            key=key, list_id=list_id, suffix=suffix, parent=parent.key, owner=owner
        )
        parent.children.append(key)
        if blocking:
            parent.blocking = key
        state.ready.append(key)
        return key

    def start_first(
        self, state: RunState, key: str, now_ms: int, actions: list[ScheduleTask]
    ) -> None:
        """Create the first task of a frame just opened, now: a fork starts the first task
        of every branch before the JOIN after it (Conductor's ForkJoinTaskMapper), so rows
        come in that order. The rest of the branch runs when the frame advances."""
        frame = state.frames.get(key)
        if frame is None or state.status != RunStatus.RUNNING:
            return
        tasks = self.lists[frame.list_id]
        if frame.pos < len(tasks) and tasks[frame.pos].task_reference_name + frame.suffix not in (
            state.tasks
        ):
            wt = tasks[frame.pos]
            self._start_task(state, frame, wt, now_ms, actions)
            if state.behaviour >= 2 and wt.type == TaskType.SWITCH and frame.blocking is not None:
                # Conductor's SwitchTaskMapper maps the chosen case's first task with the
                # SWITCH, so within a fork it comes before the next branch's first task
                self.start_first(state, frame.blocking, now_ms, actions)

    def start_join(
        self, state: RunState, frame: Frame, now_ms: int, actions: list[ScheduleTask]
    ) -> None:
        """Create the JOIN right after the FORK_JOIN at ``frame.pos`` now, after its
        branches' first tasks (Conductor's ForkJoinTaskMapper maps ``[fork, the branches'
        first tasks..., join]``): the JOIN of a fork nested in a branch comes before the
        next branch's tasks, as in Conductor (behaviour 2 on: ``protocol.runs.BEHAVIOUR``;
        before, the enclosing frame created it when it advanced past the fork)."""
        tasks = self.lists[frame.list_id]
        at = frame.pos + 1
        if (
            state.behaviour >= 2
            and state.status == RunStatus.RUNNING
            and at < len(tasks)
            and tasks[at].type == TaskType.JOIN
            and tasks[at].task_reference_name + frame.suffix not in state.tasks
        ):
            self._start_task(state, frame, tasks[at], now_ms, actions)

    def _end_frame(self, state: RunState, frame: Frame, now_ms: int) -> None:
        del state.frames[frame.key]
        if frame.parent is None:
            self._complete_run(state, now_ms)
            return
        parent = state.frames[frame.parent]
        parent.children.remove(frame.key)
        if parent.blocking == frame.key:
            parent.blocking = None
            assert frame.owner is not None
            owner = state.tasks[frame.owner]
            handler = handler_for(owner.type)
            if handler is not None:
                handler.child_frame_ended(self, state, parent, owner, frame, now_ms)
        if state.status == RunStatus.RUNNING:
            state.ready.append(parent.key)

    # ------------------------------------------------------------------ starting tasks

    def _start_task(
        self,
        state: RunState,
        frame: Frame,
        wt: WorkflowTask,
        now_ms: int,
        actions: list[ScheduleTask],
    ) -> None:
        ref = wt.task_reference_name + frame.suffix
        kind = wt.type
        handler = handler_for(kind)
        kept = state.replay.pop(ref, None)
        kept_id: tuple[str, int] | None
        if kept is not None and kept.rerun:
            # the task a rerun starts from: again under its id and seq, at a new attempt
            kept_id = (kept.task_id, kept.seq)
        elif kept is not None and handler is not None and handler.scheduled:
            if TaskStatus(kept.status).is_successful:
                self._adopt(state, frame, wt, kept)
                return
            if kept.resume and kind == TaskType.SUB_WORKFLOW:
                self._resume_child(state, frame, wt, kept, now_ms, actions)
                return
            kept_id = None
        else:
            kept_id = (kept.task_id, kept.seq) if kept is not None else None
        task_id, seq = kept_id or self.next_task_id(state)
        ts = TaskState(
            task_id=task_id,
            seq=seq,
            ref=ref,
            def_ref=wt.task_reference_name,
            name=wt.name,
            type=wt.type,
            status=TaskStatus.SCHEDULED,
            scheduled_time=now_ms,
            first_scheduled_time=now_ms,
            frame=frame.key,
        )
        if kept is not None and kept_id is None:
            # a scheduled task the run did not get through: its next attempt, after the
            # last one the run made (Conductor's workflow retry)
            ts.attempt = kept.attempt + 1
            ts.retried_task_id = kept.task_id
        elif kept is not None and kept.rerun and handler is not None and handler.scheduled:
            # a new attempt of the task a rerun starts from: its queue message, lease,
            # activity and child run are named by task id and attempt
            ts.attempt = kept.attempt + 1
        state.tasks[ref] = ts
        ctx = self.context(state)
        ctx["CPEWF_TASK_ID"] = ts.task_id
        # the task definition's inputTemplate fills what inputParameters leave out, and
        # what resolves to null (Conductor's ParametersUtils.getTaskInputV2)
        td = self.nodes[wt.task_reference_name].task_def
        template = td.input_template if td is not None and kind != TaskType.DYNAMIC else {}
        params = {**copy.deepcopy(template), **wt.input_parameters} if template else None
        try:
            resolved = self.resolve_values(
                state,
                params or wt.input_parameters,
                ctx,
                lambda key: f"input {key!r} of task {ref!r}",
            )
        except TaskFailed as failure:
            self.fail_inline(state, ts, str(failure), now_ms)
            return
        except Exception as exc:  # resolve() should not raise; a bad template fails the task
            self.fail_inline(state, ts, f"input resolution failed: {exc}", now_ms)
            return
        ts.input = resolved if isinstance(resolved, dict) else {}
        for key in template:
            if ts.input.get(key) is None:
                ts.input[key] = copy.deepcopy(template[key])
        if ref in state.task_inputs:
            ts.input = state.task_inputs.pop(ref)
        try:
            if handler is None:
                raise TaskFailed(f"unknown task type {kind!r}")
            handler.start(self, TaskStart(state, frame, ts, wt, now_ms, actions))
        except TaskFailed as failure:
            self.fail_inline(state, ts, str(failure), now_ms)
            return
        self.touch(state, ts)

    def _adopt(self, state: RunState, frame: Frame, wt: WorkflowTask, kept: ReplayTask) -> None:
        """A task the retried or rerun run got through already: its row and result stand
        (nothing is recorded again)."""
        ts = _kept_task(
            kept,
            wt,
            frame,
            status=TaskStatus(kept.status),
            output=kept.output,
            reason=kept.reason,
            worker_id=kept.worker_id,
            scheduled_time=kept.scheduled_time,
            first_scheduled_time=kept.scheduled_time,
            start_time=kept.start_time,
            end_time=kept.end_time,
        )
        state.tasks[ts.ref] = ts
        state.last_ref = ts.ref
        self._update_context(state, ts)

    def _resume_child(
        self,
        state: RunState,
        frame: Frame,
        wt: WorkflowTask,
        kept: ReplayTask,
        now_ms: int,
        actions: list[ScheduleTask],
    ) -> None:
        """A SUB_WORKFLOW task whose child run is retried in place with this run
        (Conductor's ``updateAndPushParents``): the same task id and attempt go IN_PROGRESS
        again, reason cleared, ``subWorkflowId`` kept, and the attempt waits for that
        child's end. Its deadlines count from now."""
        ts = _kept_task(
            kept,
            wt,
            frame,
            status=TaskStatus.IN_PROGRESS,
            output={"subWorkflowId": child_run_id(kept.task_id, kept.attempt)},
            scheduled_time=now_ms,
            first_scheduled_time=kept.scheduled_time or now_ms,
            start_time=now_ms,
        )
        state.tasks[ts.ref] = ts
        action = self._action(state, ts, self.nodes[wt.task_reference_name], 0.0, now_ms)
        action.resume_child = True
        state.pending[ts.task_id] = ts.ref
        actions.append(action)
        self.touch(state, ts)

    def skip(
        self,
        state: RunState,
        ref: str,
        input: dict[str, Any],
        output: dict[str, Any],
        now_ms: int,
    ) -> Decision:
        """Skip task ``ref`` before the run reaches it (Conductor's ``skiptask``): a
        SKIPPED row now with the given input and output; the run passes it by. A ref the
        definition does not have, or one already started, is left alone."""
        node = self.nodes.get(ref)
        if state.status == RunStatus.RUNNING and node is not None and ref not in state.tasks:
            # seq 0, as Conductor creates the skipped row outside its scheduling (so it
            # lists first); the id from the ref, as no other row has seq 0
            key = f"{state.workflow_id}/{state.generation}/skip/{ref}"
            ts = TaskState(
                task_id=str(uuid.uuid5(_NAMESPACE, key)),
                seq=0,
                ref=ref,
                def_ref=ref,
                name=node.task.name,
                type=node.task.type,
                status=TaskStatus.SKIPPED,
                input=dict(input),
                output=dict(output),
                end_time=now_ms,
                frame="",
            )
            state.tasks[ref] = ts
            self.touch(state, ts)
        return self._emit(state, [])

    def schedule(self, start: TaskStart) -> None:
        """Make a new task instance an I/O action (its first attempt)."""
        state, ts, wt, now_ms = start.state, start.task, start.definition, start.now_ms
        node = self.nodes[wt.task_reference_name]
        delay = float(wt.start_delay)
        ts.callback_after_seconds = int(delay)
        action = self._action(state, ts, node, delay, now_ms)
        ts.scheduled_time = ts.first_scheduled_time = now_ms + int(delay * 1000)
        if ts.type == TaskType.WAIT:
            # Conductor's WaitTaskMapper: the wait in seconds, or "forever" without one
            ts.callback_after_seconds = (
                max(0, (action.wait_until_ms - now_ms) // 1000)
                if action.wait_until_ms is not None
                else _WAIT_FOREVER_SECONDS
            )
        self._started_when_scheduled(ts, delay)
        state.pending[ts.task_id] = ts.ref
        start.actions.append(action)

    @staticmethod
    def _started_when_scheduled(ts: TaskState, delay: float) -> None:
        """A scheduled attempt's start: a system task starts at its scheduled time
        (Conductor's ``WorkflowExecutor.scheduleTask`` sets the ``startTime`` of every
        system task it schedules; the engine begins it when that time comes), WAIT and
        HUMAN IN_PROGRESS from then; a worker task when a worker polls it
        (:meth:`on_started`)."""
        handler = handler_for(ts.type)
        if not isinstance(handler, ScheduledTask) or handler.polled:
            return
        if not handler.starts_in_progress:
            ts.start_time = ts.scheduled_time
        elif not delay:
            ts.status = TaskStatus.IN_PROGRESS
            ts.start_time = ts.scheduled_time

    def _dispatch_retry(
        self, state: RunState, ts: TaskState, now_ms: int, actions: list[ScheduleTask]
    ) -> None:
        node = self.nodes[ts.def_ref]
        delay = ts.retry_delay_seconds or 0.0
        callback = ts.retry_callback_seconds
        ts.retry_delay_seconds = ts.retry_callback_seconds = None
        # the failed attempt keeps its row; the retry is a new row with a new task id
        # (Conductor's DeciderService.retry), so no id of a finished attempt is reused
        state.closed.append(self._record(state, ts).model_copy(update={"retried": True}))
        state.pending.pop(ts.task_id, None)
        ts.retried_task_id = ts.task_id
        ts.task_id, ts.seq = self.next_task_id(state)
        state.pending[ts.task_id] = ts.ref
        ts.attempt += 1
        ts.status = TaskStatus.SCHEDULED
        ts.scheduled_time = now_ms + int(delay * 1000)
        ts.callback_after_seconds = int(delay) if callback is None else callback
        ts.start_time = ts.end_time = ts.worker_id = ts.response_from = None
        ts.output = {}
        ts.alerts = []
        self._started_when_scheduled(ts, delay)
        # the input again, with this attempt's id as ${CPEWF_TASK_ID} (Conductor
        # resolves a retry's input anew)
        ctx = self.context(state)
        ctx["CPEWF_TASK_ID"] = ts.task_id
        # a value too large, say: the first attempt's input stands
        with contextlib.suppress(Exception):
            ts.input = self.resolve_values(
                state,
                node.task.input_parameters,
                ctx,
                lambda key: f"input {key!r} of task {ts.ref!r}",
            )
        self.touch(state, ts)
        actions.append(self._action(state, ts, node, delay, ts.scheduled_time))

    @staticmethod
    def _permissive(state: RunState, node: Node) -> bool:
        """``permissive`` acts (behaviour 1 on; ``protocol.runs.BEHAVIOUR``)."""
        return node.task.permissive and state.behaviour >= 1

    def _action(
        self, state: RunState, ts: TaskState, node: Node, delay: float, base_ms: int
    ) -> ScheduleTask:
        """The action of the current attempt of ``ts``; ``base_ms``: when the attempt is
        scheduled from (before its delay)."""
        handler = handler_for(ts.type)
        assert handler is not None and handler.scheduled, ts.type
        fields = handler.action_fields(self, ts, node, base_ms)
        return ScheduleTask(
            task_id=ts.task_id,
            ref=ts.ref,
            def_ref=ts.def_ref,
            name=ts.name,
            type=ts.type,
            input=ts.input,
            attempt=ts.attempt,
            delay_seconds=delay,
            callback_after_seconds=ts.callback_after_seconds,
            optional=node.task.optional,
            task_def=node.task_def,
            wait_until_ms=fields.wait_until_ms,
            timeout_seconds=fields.timeout_seconds,
            sub_workflow=fields.sub_workflow,
            # behaviour 1 on (protocol.runs.BEHAVIOUR): earlier runs ignored the field
            async_complete=(
                node.task.async_complete and ts.type in CALL_TASK_TYPES and state.behaviour >= 1
            ),
            seq=ts.seq,
            retried_task_id=ts.retried_task_id,
        )

    # ------------------------------------------------------------------ completion/failure

    def complete_inline(
        self, state: RunState, ts: TaskState, output: dict[str, Any], now_ms: int
    ) -> None:
        ts.status = TaskStatus.COMPLETED
        ts.output = output
        if ts.start_time is None:
            ts.start_time = now_ms
        ts.end_time = now_ms
        state.last_ref = ts.ref
        self.touch(state, ts)

    def _succeeded(self, state: RunState, ts: TaskState) -> None:
        state.last_ref = ts.ref
        self.touch(state, ts)
        state.ready.append(ts.frame)
        # a JOIN waiting on this task (not the last of its branch) may end now
        join_ref = self._join_waiting_for(ts.def_ref)
        if join_ref is not None:
            join = state.tasks.get(join_ref + ts.ref[len(ts.def_ref) :])
            if join is not None and not join.status.is_terminal:
                state.ready.append(join.frame)

    def fail_inline(self, state: RunState, ts: TaskState, reason: str, now_ms: int) -> None:
        ts.status = TaskStatus.FAILED
        ts.reason = reason
        ts.end_time = now_ms
        self.touch(state, ts)
        self._final_failure(state, ts, now_ms, RunStatus.FAILED)

    def _final_failure(
        self,
        state: RunState,
        ts: TaskState,
        now_ms: int,
        run_status: RunStatus,
        even_optional: bool = False,
    ) -> None:
        state.pending.pop(ts.task_id, None)
        node = self.nodes[ts.def_ref]
        if (node.task.optional or self._permissive(state, node)) and not even_optional:
            if node.task.optional:
                ts.status = TaskStatus.COMPLETED_WITH_ERRORS
            else:
                # conductor-oss's permissive task keeps its failed status and the run goes
                # on (DeciderService.retry); the run fails where it would have completed
                state.failed_reference_task_names.append(ts.ref)
                state.permissive_failures.append(
                    f"Task {ts.task_id} failed with status: {ts.status.value} and reason: "
                    f"'{ts.reason}'"
                )
            if ts.type == TaskType.DO_WHILE:
                state.loops.pop(ts.ref, None)
                self._close_children(state, ts, now_ms)
            self._succeeded(state, ts)
            return
        state.failed_reference_task_names.append(ts.ref)
        # Conductor's text (DeciderService.retry), with the run's status
        reason = (
            f"Task {ts.task_id} failed with status: {run_status.value} and reason: '{ts.reason}'"
        )
        # the JOINs and loops around it are canceled with everything else still open
        # (Conductor cancels the run's non-terminal tasks when a task fails it)
        self.finish_run(state, run_status, {}, reason, now_ms, failed_task_id=ts.task_id)

    def _close_children(self, state: RunState, owner: TaskState, now_ms: int) -> None:
        """Cancel what still runs under a container that ended early."""
        frame = state.frames.get(owner.frame)
        if frame is None:
            return
        for key in list(frame.children):
            child = state.frames.get(key)
            if child is not None and child.owner == owner.ref:
                self._cancel_frame(state, child, now_ms)
                frame.children.remove(key)
                if frame.blocking == key:
                    frame.blocking = None

    def _cancel_frame(self, state: RunState, frame: Frame, now_ms: int) -> None:
        for key in frame.children:
            child = state.frames.get(key)
            if child is not None:
                self._cancel_frame(state, child, now_ms)
        tasks = self.lists[frame.list_id]
        if frame.pos < len(tasks):
            ts = state.tasks.get(tasks[frame.pos].task_reference_name + frame.suffix)
            if ts is not None:
                self._cancel_task(state, ts, now_ms)
        del state.frames[frame.key]

    def _cancel_task(self, state: RunState, ts: TaskState, now_ms: int) -> None:
        if ts.task_id in state.pending:
            del state.pending[ts.task_id]
            state.canceled.append(ts.task_id)
        if not ts.status.is_terminal or ts.retry_delay_seconds is not None:
            ts.status = TaskStatus.CANCELED
            ts.retry_delay_seconds = None
            ts.end_time = now_ms
            self.touch(state, ts)

    def finish_run(
        self,
        state: RunState,
        status: RunStatus,
        output: dict[str, Any],
        reason: str | None,
        now_ms: int,
        failed_task_id: str | None = None,
    ) -> None:
        for task_id, ref in list(state.pending.items()):
            self._cancel_task(state, state.tasks[ref], now_ms)
            if task_id in state.pending:  # pragma: no cover - _cancel_task removes it
                del state.pending[task_id]
        for frame in state.frames.values():
            tasks = self.lists[frame.list_id]
            if frame.pos < len(tasks):
                ts = state.tasks.get(tasks[frame.pos].task_reference_name + frame.suffix)
                if ts is not None and not ts.status.is_terminal:
                    self._cancel_task(state, ts, now_ms)
        state.frames.clear()
        state.ready.clear()
        state.retries.clear()
        state.loops.clear()
        state.status = status
        state.output = output
        state.reason = reason
        state.failed_task_id = failed_task_id
        state.end_time = now_ms
        if state._ctx is not None and state._ctx_owner == id(state):
            state._ctx["workflow"] = self.workflow_entry(state)

    def _complete_run(self, state: RunState, now_ms: int) -> None:
        if state.permissive_failures:
            # conductor-oss's DeciderService: a permissive task that failed fails the run
            # once it has nothing left to do
            reason = ". ".join(state.permissive_failures)
            self.finish_run(state, RunStatus.FAILED, {}, reason, now_ms)
            return
        try:
            output = self.run_output(state)
        except TaskFailed as failure:
            self.finish_run(state, RunStatus.FAILED, {}, str(failure), now_ms)
            return
        self.finish_run(state, RunStatus.COMPLETED, output, None, now_ms)

    def run_output(self, state: RunState) -> dict[str, Any]:
        if self.definition.output_parameters:
            ctx = self.context(state)
            ctx.pop("CPEWF_TASK_ID", None)
            try:
                resolved = self.resolve_values(
                    state,
                    self.definition.output_parameters,
                    ctx,
                    lambda key: f"output {key!r} of the run",
                )
            except TaskFailed:
                raise
            except Exception as exc:
                raise TaskFailed(f"outputParameters resolution failed: {exc}") from None
            return resolved if isinstance(resolved, dict) else {}
        if state.last_ref is not None:
            return dict(state.tasks[state.last_ref].output)
        return {}

    # ------------------------------------------------------------------ helpers

    def _retry_count(self, node: Node) -> int:
        if node.task.retry_count is not None:
            return node.task.retry_count
        if node.task_def is not None:
            return node.task_def.retry_count
        return 0

    def _waiting_task(self, state: RunState, task_id: str, attempt: int) -> TaskState | None:
        """The task if it waits for an outcome of ``attempt`` (else the event is stale)."""
        if state.status != RunStatus.RUNNING:
            return None
        ref = state.pending.get(task_id)
        if ref is None:
            return None
        ts = state.tasks[ref]
        if ts.attempt != attempt or ts.status not in _WAITING or ts.retry_delay_seconds is not None:
            return None
        return ts

    def _deadlines(self, ts: TaskState) -> list[Deadline]:
        node = self.nodes[ts.def_ref]
        td = node.task_def
        sched = ts.scheduled_time or 0
        found: list[Deadline] = []
        if ts.type == TaskType.HUMAN:
            human = human_timeout(ts, td)
            if human:
                found.append(Deadline(at_ms=sched + human * 1000, kind="human"))
        elif td is not None and td.timeout_seconds:
            found.append(Deadline(at_ms=sched + td.timeout_seconds * 1000, kind="task"))
        if td is None:
            return found
        if td.total_timeout_seconds:
            first = ts.first_scheduled_time if ts.first_scheduled_time is not None else sched
            found.append(Deadline(at_ms=first + td.total_timeout_seconds * 1000, kind="total"))
        if ts.type == TaskType.WORKER:
            if ts.status == TaskStatus.SCHEDULED and td.poll_timeout_seconds:
                found.append(Deadline(at_ms=sched + td.poll_timeout_seconds * 1000, kind="poll"))
            if ts.status == TaskStatus.IN_PROGRESS and ts.start_time is not None:
                since = ts.response_from if ts.response_from is not None else ts.start_time
                found.append(
                    Deadline(at_ms=since + td.response_timeout_seconds * 1000, kind="response")
                )
        return found

    def _fired_kind(self, state: RunState, ts: TaskState, now_ms: int) -> DeadlineKind:
        """Which deadline a TIMED_OUT without a kind stands for: a due one not yet reported,
        else a due reported one (a duplicate), else the next unreported one, else any."""
        found = self._deadlines(ts)
        due = [d for d in found if d.at_ms <= now_ms]
        for group in (
            [d for d in due if d.kind not in ts.alerts],
            due,
            [d for d in found if d.kind not in ts.alerts],
            found,
        ):
            if group:
                return min(group, key=lambda d: (d.at_ms, _KIND_ORDER[d.kind])).kind
        return "task"

    def _workflow_input(self, state: RunState) -> dict[str, Any]:
        ref = offloaded(state.input, INPUT_REF)
        if ref is None or self.payloads is None:
            if self.payloads is not None and has_pointers(state.input):
                # a child run's input passed by reference from its parent
                value = dereference(state.input, self.payloads)
                return value if isinstance(value, dict) else {}
            return state.input
        value = self.payloads(ref)
        return self.definition.run_input(value if isinstance(value, dict) else {})

    def workflow_entry(self, state: RunState) -> dict[str, Any]:
        return {
            "input": self._workflow_input(state),
            "output": state.output,
            "variables": self.dereferenced(state.variables),
            "workflowId": state.workflow_id,
            "correlationId": state.correlation_id,
            "workflowType": state.workflow_type,
            "version": state.version,
            "status": state.status.value,
            "startTime": state.start_time,
        }

    def resolve_values(
        self,
        state: RunState,
        params: dict[str, Any],
        ctx: dict[str, Any],
        name: Callable[[str], str],
    ) -> dict[str, Any]:
        """Resolved ``params`` (a task's input, the run's output), bounded so that no large
        value enters the run state or the history:

        * a parameter that is exactly one reference into an offloaded value (a task output
          above the threshold, the offloaded workflow input) stays a pointer
          (:mod:`engine.runtime.payload_refs`); whoever needs the value (the task's
          activity, the finish activity, a SWITCH) dereferences it;
        * any other value computed here (an interpolated string, a copy of inline data)
          larger than ``max_value_bytes`` fails with :class:`TaskFailed` naming the value
          (``name(key)``), its size and the limit. An interpolation stops being built as
          soon as it is too long."""
        out: dict[str, Any] = {}
        limit = self.max_value_bytes
        for key, template in params.items():
            target = self._offloaded_reference(state, template, ctx)
            if target is not None:
                out[key] = target
                continue
            try:
                value = resolve(template, ctx, max_chars=limit)
            except InterpolationTooLong:
                raise TaskFailed(self._too_large(name(key), None)) from None
            if limit is not None:
                size = _json_size(value, limit)
                if size > limit:
                    raise TaskFailed(self._too_large(name(key), size))
            out[key] = value
        return out

    def read_value(self, state: RunState, template: str, ctx: dict[str, Any], what: str) -> Any:
        """What ``template`` resolves to, for reading only (it may be the run's own value,
        not a copy: never change or keep it): an offloaded value read through the loader,
        an interpolated string bounded as in :meth:`resolve_values`."""
        target = self._offloaded_reference(state, template, ctx)
        if target is not None:
            return self.dereferenced(target)
        try:
            value = peek(template, ctx, max_chars=self.max_value_bytes)
        except InterpolationTooLong:
            raise TaskFailed(self._too_large(what, None)) from None
        return self.dereferenced(value)

    def bounded_copy(self, value: Any, what: str) -> Any:
        """A copy of ``value`` (read with :meth:`read_value`) to keep in the run, if it is
        within the limit of a value computed in the run; else :class:`TaskFailed`."""
        limit = self.max_value_bytes
        if limit is not None:
            size = _json_size(value, limit)
            if size > limit:
                raise TaskFailed(self._too_large(what, size))
        return copy_json(value)

    def _too_large(self, what: str, size: int | None) -> str:
        amount = f"{size} bytes" if size is not None else f"more than {self.max_value_bytes} bytes"
        return (
            f"{what} is {amount}, above the limit of {self.max_value_bytes} bytes for a value "
            "computed in the run (the inline threshold); pass a large value whole by "
            "reference, as one ${...} expression, so that it travels through the payload store"
        )

    def dereferenced(self, value: Any) -> Any:
        """``value`` with the pointers :meth:`resolve_values` left in it replaced by what
        they point at (read through the loader)."""
        if self.payloads is None or not has_pointers(value):
            return value
        return dereference(value, self.payloads)

    def _offloaded_reference(
        self, state: RunState, template: Any, ctx: dict[str, Any]
    ) -> dict[str, str] | None:
        if self.payloads is None or not isinstance(template, str):
            return None
        match = _OUTPUT_REFERENCE.match(template)
        if match is None:
            return self._input_reference(state, template) or self._variable_reference(
                state, template
            )
        entry = ctx.get(match["root"])
        if not isinstance(entry, dict):
            return None
        ts = state.tasks.get(str(entry.get("referenceTaskName")))
        ref = offloaded(ts.output, OUTPUT_REF) if ts is not None else None
        if ref is None:
            return None
        return pointer(ref, "$" + (match["path"] or ""))

    def _variable_reference(self, state: RunState, template: str) -> dict[str, str] | None:
        """A pointer for ``${workflow.variables.<name><path>}`` when the variable holds
        one (SET_VARIABLE kept a large value by reference)."""
        match = _VARIABLE_REFERENCE.match(template)
        if match is None:
            return None
        held = state.variables.get(match["name"])
        if not is_pointer(held):
            return None
        assert isinstance(held, dict)
        return pointer(str(held[POINTER]), str(held[POINTER_PATH]) + (match["path"] or ""))

    def _input_reference(self, state: RunState, template: str) -> dict[str, str] | None:
        """A pointer for ``${workflow.input.<path>}`` into an offloaded workflow input,
        when the path's first key is in the stored input (not a default of the
        definition's ``inputTemplate``)."""
        match = _INPUT_REFERENCE.match(template)
        ref = offloaded(state.input, INPUT_REF)
        if match is None or ref is None or self.payloads is None:
            return None
        first = _FIRST_KEY.match(match["path"])
        stored = self.payloads(ref)
        if first is None or not isinstance(stored, dict):
            return None
        if (first["name"] or first["quoted"]) not in stored:
            return None
        return pointer(ref, "$" + match["path"])

    def _output(self, ts: TaskState) -> dict[str, Any]:
        """A task's output for expressions: an offloaded one (``{"outputRef": ref}``, as the
        Task API reports outputs above the threshold) is read through the loader."""
        ref = offloaded(ts.output, OUTPUT_REF)
        if ref is None or self.payloads is None:
            return ts.output
        value = self.payloads(ref)
        return value if isinstance(value, dict) else {"result": value}

    def _entry(self, ts: TaskState, behaviour: int) -> dict[str, Any]:
        """Task instance ``ts`` as expressions read it (``${ref.output.x}``); from
        behaviour 2 on with its times and worker too, as Conductor's ParametersUtils reads
        any field of a task (``${ref.endTime}``; conductor-oss's EndTimeIssueTests)."""
        entry = {
            # a pointer for the whole input (a skip's or rerun's taskInput above the
            # threshold, kept in the payload store) is read through the loader
            "input": self.dereferenced(ts.input) if is_pointer(ts.input) else ts.input,
            "output": self._output(ts),
            "status": ts.status.value,
            "taskId": ts.task_id,
            "referenceTaskName": ts.ref,
            "reasonForIncompletion": ts.reason,
            "retryCount": ts.attempt - 1,
        }
        if behaviour >= 2:
            entry.update(
                taskType=ts.type,
                scheduledTime=ts.scheduled_time or 0,
                startTime=ts.start_time or 0,
                endTime=ts.end_time or 0,
                workerId=ts.worker_id,
                seq=ts.seq,
            )
        return entry

    def touch(self, state: RunState, ts: TaskState) -> None:
        state.dirty.append(ts.ref)
        self._update_context(state, ts)

    def _update_context(self, state: RunState, ts: TaskState) -> None:
        ctx = state._ctx
        if ctx is not None and state._ctx_owner == id(state):
            entry = self._entry(ts, state.behaviour)
            ctx[ts.ref] = entry
            latest = ctx.get(ts.def_ref)
            if (
                ts.ref == ts.def_ref
                or latest is None
                or _iteration_rank(ts.ref) >= _iteration_rank(latest["referenceTaskName"])
            ):
                ctx[ts.def_ref] = entry

    def _record(self, state: RunState, ts: TaskState) -> TaskChange:
        node = self.nodes[ts.def_ref]
        output = ts.output
        if ts.type == TaskType.DO_WHILE and not ts.status.is_terminal:
            # a running loop's output grows with every iteration: recorded whole at its end
            output = {"iteration": ts.output.get("iteration")}
        return TaskChange(
            workflow_id=state.workflow_id,
            kind=row_kind(
                ts.type
                if node.task.type == TaskType.DYNAMIC
                else node.task.declared_type or ts.type
            ),
            task_id=ts.task_id,
            ref=ts.ref,
            def_ref=ts.def_ref,
            name=ts.name,
            type=ts.type,
            status=ts.status,
            attempt=ts.attempt,
            input=ts.input,
            output=output,
            reason=ts.reason,
            scheduled_time=ts.scheduled_time,
            start_time=ts.start_time,
            end_time=ts.end_time,
            first_scheduled_time=ts.first_scheduled_time,
            worker_id=ts.worker_id,
            seq=ts.seq,
            retried_task_id=ts.retried_task_id,
            retried=ts.retried,
            callback_after_seconds=ts.callback_after_seconds,
            iteration=_loop_iteration(ts) if ts.type == TaskType.DO_WHILE else _iteration_of(ts),
            optional=node.task.optional,
            variables=(
                dict(state.variables)
                if ts.type == TaskType.SET_VARIABLE and ts.status == TaskStatus.COMPLETED
                else None
            ),
        )

    def _result(self, state: RunState) -> RunResult:
        return RunResult(
            status=state.status,
            output=state.output,
            reason=state.reason,
            failed_task_id=state.failed_task_id,
            failed_reference_task_names=list(state.failed_reference_task_names),
        )

    def _emit(self, state: RunState, actions: list[ScheduleTask]) -> Decision:
        records = state.closed + [
            self._record(state, state.tasks[ref])
            for ref in dict.fromkeys(state.dirty)
            if ref in state.tasks
        ]
        if state.removed:
            records += state.removed
            state.removed = []
        state.dirty = []
        state.closed = []
        cancel, state.canceled = state.canceled, []
        finished = None
        if state.status.is_terminal:
            finished = self._result(state)
            if actions:
                # the run ended later in this same step (e.g. TERMINATE in another branch):
                # what was scheduled in it is canceled already and must not start
                started = {action.task_id for action in actions}
                actions = []
                cancel = [task_id for task_id in cancel if task_id not in started]
        return Decision(
            state=state, actions=actions, records=records, finished=finished, cancel=cancel
        )


def _iteration_rank(ref: str) -> tuple[int, ...]:
    """Iteration numbers of an instance ref (``a__2__3`` -> (2, 3)); for "latest"."""
    parts = ref.split("__")
    rank: list[int] = []
    for part in reversed(parts[1:]):
        if not part.isdigit():
            break
        rank.append(int(part))
    return tuple(reversed(rank))


#: a WAIT without a duration's ``callbackAfterSeconds`` (Conductor's Integer.MAX_VALUE)
_WAIT_FOREVER_SECONDS = 2**31 - 1


def _kept_task(kept: ReplayTask, wt: WorkflowTask, frame: Frame, **fields: Any) -> TaskState:
    """The task instance a retried or rerun run keeps (``kept``), as the definition's
    ``wt`` in ``frame``: its id, seq, attempt and input, and ``fields``."""
    return TaskState(
        task_id=kept.task_id,
        seq=kept.seq,
        ref=kept.ref,
        def_ref=wt.task_reference_name,
        name=wt.name,
        type=wt.type,
        attempt=kept.attempt,
        input=kept.input,
        frame=frame.key,
        **fields,
    )
