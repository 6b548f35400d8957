"""The ``WorkflowInterpreter`` orchestration: one generic interpreter for every run
(docs/architecture.md, "The interpreter").

The orchestration owns no workflow logic. It asks the pure :class:`~engine.decider.Decider`
what to do next, performs the I/O actions it returns (activities, timers, external-event
waits, child runs) and feeds each outcome back. Everything non-deterministic comes from the
orchestration context or from activities.

Waits:

* WORKER: the dispatch activity queues the task (or, where the process hosts the
  activities too, the work item that starts the attempt does: :data:`LocalDispatch`); the
  run then waits for the external event named by the task id (the result), raced against
  ONE durable timer for the earliest deadline. The run is not told of the hand-out:
  until it knows, the timer is armed for the earliest the response timeout can fall (a
  worker may take the task the moment it is queued), and when a deadline that depends
  on the worker (poll, response) is due, the check activity reads the attempt's row and
  lease from the run store (taken? since when? a result posted?) before the task times
  out or the timer is armed again. A ``<taskId>.started`` event, when one is raised, is
  applied the same way. A committed durable timer fires even after its wait is over, so
  stale timer firings are recognised (by task, attempt and fire time) and ignored.
* HUMAN and WAIT without a duration: the external event named by the task id. A WAIT
  with a duration or an end: a durable timer, raced against that event (a task update
  ends it early, as Conductor's).
* Activity types: the activity returns a result envelope; retries are the Decider's (so
  Retry-After and terminal errors are honoured), with the retry delay as a durable timer.
  Where the process hosts the activities too, a quick HTTP, INLINE or JSON_JQ_TRANSFORM
  step is done in the work item that starts it instead, its envelope kept in the run
  store for replays (:data:`LocalBuiltin`).
  An activity that fails because the run store or a task queue is unavailable is not a
  failed attempt: it runs again after a durable timer (the delays of the bookkeeping's
  retries), and its attempt fails only once those are spent.
* SUB_WORKFLOW: a child ``WorkflowInterpreter`` instance named ``<taskId>-<attempt>``,
  started once the resolve activity wrote its run row. An attempt the run stops waiting
  for has its child terminated by the next record or finish activity; if it ended while
  its resolve activity ran, once that activity has returned (the finish waits for it).

A step's rows ride on the I/O it starts (dispatch, activity, child); a step with none
has them written by the record activity, which the run waits for (or, where the process
hosts the activities too, by the work item itself: :data:`LocalRecord`).

Payloads read while deciding (the definition snapshot, an offloaded input or value) come
from the payload store, a definition without a snapshot from the run store. When the
store is unavailable the decision is not made: the work item is given back to the
backend (:class:`DecisionDeferred`) and decided again from the same history once it is
handed out anew, instead of the outage failing the run.

History stays bounded: after :data:`STEPS_PER_EXECUTION` outcomes, at a point where no
activity, timer or child is outstanding, the run carries the Decider's state into
``continue_as_new(save_events=True)`` so that results raised meanwhile carry over. An
activity whose wait is over but which is still running (a dispatch whose task's result
came first) counts as outstanding: a backend routes an activity's completion by instance
and task id, so one arriving in the next execution would be matched to that execution's
task of the same id.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

from durabletask import task as dt
from durabletask.internal.exceptions import AbandonOrchestrationError
from pydantic import BaseModel

from engine.decider import (
    Decider,
    Decision,
    RunResult,
    RunState,
    ScheduleTask,
    TaskOutcome,
)
from engine.decider.state import Deadline, TaskChange, TimeoutKind
from engine.language.definitions import RunStatus, TaskStatus, TaskType
from engine.language.scripting import ScriptsUnavailable
from engine.ports.payload_store import PayloadStoreUnavailable
from engine.ports.queue import QueueUnavailable
from engine.ports.run_store import KeptStep, RunStoreUnavailable
from engine.runtime.activity_io import (
    ACTIVITY_BUILTIN,
    ACTIVITY_CHECK,
    ACTIVITY_DISPATCH,
    ACTIVITY_FINISH,
    ACTIVITY_POLL,
    ACTIVITY_RECORD,
    ACTIVITY_RESOLVE_CHILD,
    BuiltinInput,
    CanceledChild,
    CheckInput,
    ChildResolution,
    DispatchInput,
    DispatchResult,
    FinishInput,
    PolledTask,
    PollInput,
    RecordInput,
    ResolveChildInput,
    RunSummary,
    TaskCheck,
)
from engine.runtime.builtins import ActivityResult
from engine.runtime.definition_cache import DefinitionCache
from engine.runtime.encoded_json import EncodedJson, encode, encoded_size
from engine.runtime.run_limits import RunLimits
from protocol.events import (
    SKIP_EVENT,
    TERMINATE_EVENT,
    SkipEvent,
    TaskResultEvent,
    TaskStartedEvent,
    TerminateEvent,
    child_end_event,
    result_event,
    started_event,
)
from protocol.limits import json_depth_problem
from protocol.runs import ORCHESTRATOR_NAME, RunInput, child_run_id, child_run_input

#: Records a run's end in the orchestration's own work item, where the engine process
#: hosts the activities too (role ``all``: it holds the activities' credentials): the
#: finish activity's work (``RunActivities.finish_here``). Answers the run's summary, or
#: None when that failed and the finish activity is to do it with its retries.
LocalFinish = Callable[[FinishInput], dict[str, Any] | None]

_Input = TypeVar("_Input", DispatchInput, RecordInput)
_T = TypeVar("_T")

#: Queues one attempt of a WORKER task in the orchestration's own work item, where the
#: engine process hosts the activities too: the dispatch activity's work
#: (``RunActivities.dispatch_here``). True when the task is queued; False when that
#: failed or the attempt cannot be queued, and the dispatch activity is to do it (and
#: answer why not) with its retries.
LocalDispatch = Callable[[DispatchInput], bool]

#: Records a step's task rows and warnings (and ends the child runs it canceled) in the
#: orchestration's own work item, where the engine process hosts the activities too: the
#: record activity's work (``RunActivities.record_here``). True when done; False when
#: that failed, and the record activity is to do it with its retries.
LocalRecord = Callable[[RecordInput], bool]

#: Does one attempt of a built-in step (:data:`HERE_TYPES`) in the orchestration's own
#: work item, where the engine process hosts the activities too: the built-in activity's
#: work (``RunActivities.builtin_here``), its result envelope kept in the run store for
#: replays under the run's execution (its continue-as-new count, the second argument).
#: The envelope and when it was kept (the step's end, at which the run decides next);
#: None when that failed, and the built-in activity is to do it.
LocalBuiltin = Callable[[BuiltinInput, int], KeptStep | None]

#: What a :data:`LocalBuiltin` kept for (workflow id, task id, attempt), or None
#: (``RunActivities.builtin_result``): what a replay of its work item reads where it
#: would have read the activity's completion from the history.
BuiltinResult = Callable[[str, str, int], KeptStep | None]

#: the built-in task types a process that hosts the activities does in the work item that
#: starts them (:data:`LocalBuiltin`): calls bounded by the outbound and evaluator limits,
#: with no poll and no run of their own to start
HERE_TYPES = frozenset(
    {TaskType.HTTP, TaskType.INLINE, TaskType.LAMBDA, TaskType.JSON_JQ_TRANSFORM}
)

#: wall-clock seconds of built-in steps one work item does itself; once they are spent,
#: the next built-in step of the work item goes to the activity (the work item ends, and
#: a terminate or a worker's result waiting for it is taken in)
LOCAL_BUILTIN_SECONDS = 0.25


@runtime_checkable
class SeesScheduledActivities(Protocol):
    """An orchestration context that knows which activities its execution's history holds
    as scheduled (engine/adapters/backend/sessions.py, ``HistoryContext``): what a replay
    needs to follow an activity's work done in a work item (:data:`LocalDispatch`,
    :data:`LocalRecord`, :data:`LocalBuiltin`; :meth:`_Run._here`)."""

    @property
    def is_replaying(self) -> bool: ...

    def holds_next(self, name: str) -> bool: ...

    def pass_over_next(self) -> None: ...


#: The interpreter's own bookkeeping activities (record, dispatch, finish, resolve a
#: child) are idempotent; a transient run-store, queue or payload-store error is retried
#: with backoff (about 4 minutes in all) instead of failing the run.
BOOKKEEPING_RETRY = dt.RetryPolicy(
    first_retry_interval=timedelta(seconds=1),
    max_number_of_attempts=8,
    backoff_coefficient=2.0,
    max_retry_interval=timedelta(seconds=60),
)


def _outage_delay_ms(outages: int) -> int | None:
    """How long a built-in task's activity waits before it runs again after its
    ``outages``-th run that met the run store, a task queue or the payload store
    unavailable: the delays of :data:`BOOKKEEPING_RETRY`; None once its attempts are
    spent."""
    policy = BOOKKEEPING_RETRY
    if outages >= policy.max_number_of_attempts:
        return None
    seconds = policy.first_retry_interval.total_seconds()
    seconds *= (policy.backoff_coefficient or 1.0) ** (outages - 1)
    if policy.max_retry_interval is not None:
        seconds = min(seconds, policy.max_retry_interval.total_seconds())
    return int(seconds * 1000)


#: the errors of an activity that mean a backing service was unavailable right now
_OUTAGES: tuple[type[Exception], ...] = (
    RunStoreUnavailable,
    QueueUnavailable,
    PayloadStoreUnavailable,
)

#: outcomes handled per orchestration execution before carrying state into a new one
STEPS_PER_EXECUTION = 10
#: the roles of a wait that are activities (a durable timer or event wait is cancelled)
_ACTIVITY_ROLES = frozenset({"dispatch", "resolve", "activity", "check"})
#: the statuses a worker posts that end its attempt
_POSTED = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.FAILED_WITH_TERMINAL_ERROR)


#: the outages of a read the interpreter makes while deciding: a payload, or the
#: registration of a definition (a run started without a snapshot)
_UNDECIDABLE: tuple[type[Exception], ...] = (
    PayloadStoreUnavailable,
    RunStoreUnavailable,
    ScriptsUnavailable,
)


class DecisionDeferred(AbandonOrchestrationError):
    """A store could not give what a decision needs (a payload, a definition): the work
    item goes back to the backend undecided (engine/adapters/backend/sessions.py gives
    it back after a pause), nothing of it is recorded, and the run decides again from
    the same history when the backend hands the work item out anew."""


class MessageTooLarge(Exception):
    """The run's next orchestration message would exceed the limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} would be an orchestration message of {size} bytes, above the limit of "
            f"{limit} bytes (STEPWAY_MAX_MESSAGE_BYTES): the run carries too much data"
        )


def check_message(what: str, payload: Any, limit: int) -> None:
    """Raise :class:`MessageTooLarge` if ``payload`` as JSON is larger than ``limit``."""
    size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limit:
        raise MessageTooLarge(what, size, limit)


def check_encoded(what: str, text: str, limit: int) -> None:
    """Raise :class:`MessageTooLarge` if the JSON ``text`` is larger than ``limit`` bytes."""
    if _too_large(text, limit):
        raise MessageTooLarge(what, encoded_size(text), limit)


def _too_large(text: str, limit: int) -> bool:
    """Whether the JSON ``text`` is larger than ``limit`` bytes in UTF-8."""
    if len(text) * 4 <= limit:
        return False  # UTF-8 is at most 4 bytes a character: it fits
    return encoded_size(text) > limit


def _parts(records: list[TaskChange], limit: int) -> list[list[TaskChange]]:
    """``records`` in order, in consecutive parts of at most ``limit`` bytes of JSON each
    (a record larger than that alone in its part)."""
    parts: list[list[TaskChange]] = [[]]
    size = 0
    for record in records:
        length = len(record.model_dump_json(by_alias=True))
        if parts[-1] and size + length > limit:
            parts.append([])
            size = 0
        parts[-1].append(record)
        size += length + 1
    return parts


def _ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@dataclass
class _Pending:
    """One outstanding I/O of the run, keyed by task id."""

    action: ScheduleTask
    #: durable tasks racing for this wait, by role
    tasks: dict[str, dt.Task[Any]] = field(default_factory=dict)
    timer_at_ms: int | None = None
    phase: str = "run"
    #: the poll input of a long-running built-in activity (LOGIC_APP, DOCUMENT_INTELLIGENCE)
    poll_input: dict[str, Any] = field(default_factory=dict)
    #: task rows handed to the activity in flight; put back for the next I/O if it fails
    records: list[TaskChange] = field(default_factory=list)
    #: a WORKER attempt: when the run last knew it untaken (dispatched, or a check)
    untaken_since_ms: int = 0
    #: runs of this attempt's activity that met the run store, a task queue or the
    #: payload store unavailable (``_again_after_outage``)
    outages: int = 0


class _Run:
    def __init__(
        self,
        ctx: dt.OrchestrationContext,
        run: RunInput,
        decider: Decider,
        max_message_bytes: int = RunLimits().max_message_bytes,
        local_finish: LocalFinish | None = None,
        local_dispatch: LocalDispatch | None = None,
        local_record: LocalRecord | None = None,
        local_builtin: LocalBuiltin | None = None,
        builtin_result: BuiltinResult | None = None,
    ) -> None:
        self.max_message_bytes = max_message_bytes
        self.local_finish = local_finish
        self.local_dispatch = local_dispatch
        self.local_record = local_record
        self.local_builtin = local_builtin
        self.builtin_result = builtin_result
        #: the built-in step done in this work item whose outcome is still to be handled
        #: (one at most: it was the only action of its decision): its task id, and its
        #: result envelope with when it was kept
        self.ready: tuple[str, KeptStep] | None = None
        #: wall-clock seconds of built-in steps done here since the run last waited
        self.here_seconds = 0.0
        self.ctx = ctx
        self.run = run
        self.decider = decider
        self.pending: dict[str, _Pending] = {}
        self.records: list[TaskChange] = []
        self.owner: dict[int, tuple[str, str]] = {}
        self.steps = 0
        self.state: RunState
        #: child runs of SUB_WORKFLOW attempts the run stopped waiting for (canceled,
        #: timed out): terminated by the next bookkeeping activity (record, or finish)
        self.cancel_children: list[CanceledChild] = []
        #: resolve activities of such attempts still running: each may yet write its
        #: child's run row, so its child joins ``cancel_children`` once it has returned
        self.resolving: list[tuple[dt.Task[Any], CanceledChild]] = []
        #: how many of ``state.warnings`` were recorded already
        self.warned = 0
        #: activities still running whose wait is over (a dispatch whose task's result
        #: came first, a cancelled attempt): their completions must arrive in this
        #: execution, so the run does not continue as new until they have
        self.orphans: list[dt.Task[Any]] = []
        #: a completed durable task changed a row the run store must show now (an
        #: asyncComplete call answered: IN_PROGRESS with its output) though no outcome
        #: came of it: the next decision emits it
        self.rows_changed = False

    # -- helpers ---------------------------------------------------------------------------

    def _bounded(self, what: str, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload``, if it fits one orchestration message (RunLimits.max_message_bytes);
        else :class:`MessageTooLarge`, which ends the run FAILED with that reason instead
        of a message the backend refuses or hands out forever."""
        check_message(what, payload, self.max_message_bytes)
        return payload

    def _encoded(self, what: str, model: BaseModel) -> EncodedJson:
        """An activity's input, encoded once, if it fits one orchestration message (as
        :meth:`_bounded`)."""
        text = encode(model)
        check_encoded(what, text, self.max_message_bytes)
        return text

    def now(self) -> int:
        return _ms(self.ctx.current_utc_datetime)

    def _track(self, task_id: str, role: str, task: dt.Task[Any]) -> None:
        self.pending[task_id].tasks[role] = task
        self.owner[id(task)] = (task_id, role)

    def _untrack(self, task_id: str) -> None:
        entry = self.pending.pop(task_id, None)
        if entry is None:
            return
        child = entry.tasks.get("child")
        if child is not None and not child.is_complete:
            # the attempt is over but its child run still runs: terminate it now; its
            # end still arrives as this task's completion, so it is waited for as an orphan
            self.cancel_children.append(self._canceled_child(entry.action))
        resolve = entry.tasks.get("resolve")
        if resolve is not None:
            # the attempt is over before its child's orchestration was started: the
            # resolve activity wrote the child's run row, or still may; the row is ended
            # with the canceled children once the activity has returned
            self.resolving.append((resolve, self._canceled_child(entry.action)))
            self._take_resolved()
        for role, task in entry.tasks.items():
            self.owner.pop(id(task), None)
            if task.is_complete or role == "resolve":
                continue
            if isinstance(task, dt.CancellableTask):
                task.cancel()
            elif role in _ACTIVITY_ROLES or role == "child":
                self.orphans.append(task)

    @staticmethod
    def _canceled_child(action: ScheduleTask) -> CanceledChild:
        return CanceledChild(child_id=child_run_id(action.task_id, action.attempt), ref=action.ref)

    def _take_resolved(self) -> None:
        """Move the children of the resolve activities in :attr:`resolving` that have
        returned to :attr:`cancel_children` (one that refused to create its child wrote no
        row: nothing to end)."""
        waiting: list[tuple[dt.Task[Any], CanceledChild]] = []
        for task, child in self.resolving:
            if not task.is_complete:
                waiting.append((task, child))
            elif (
                task.is_failed or not ChildResolution.model_validate(task.get_result() or {}).error
            ):
                self.cancel_children.append(child)
        self.resolving = waiting

    def _take_records(self, task_id: str | None = None) -> list[TaskChange]:
        records, self.records = self.records, []
        if task_id is not None:
            self.pending[task_id].records = records
        return records

    def _arm_timer(self, task_id: str, at_ms: int | None) -> None:
        entry = self.pending[task_id]
        if at_ms is None or at_ms == entry.timer_at_ms:
            return
        old = entry.tasks.pop("timer", None)
        if old is not None:
            self.owner.pop(id(old), None)
            if isinstance(old, dt.CancellableTask) and not old.is_complete:
                old.cancel()
        entry.timer_at_ms = at_ms
        self._track(task_id, "timer", self.ctx.create_timer(_at(max(at_ms, self.now()))))

    def _wait_event(self, name: str) -> dt.Task[Any]:
        return self.ctx.wait_for_external_event(name)

    def _deadline(self, task_id: str) -> Deadline | None:
        """The earliest deadline of a wait: the Decider's, or for a WORKER attempt the run
        has not seen taken, the earliest its response timeout can fall."""
        found = [
            d
            for d in (
                self.decider.wait_deadline(self.state, task_id),
                self.decider.response_bound(
                    self.state, task_id, self.pending[task_id].untaken_since_ms
                ),
            )
            if d is not None
        ]
        return min(found, key=lambda d: d.at_ms) if found else None

    def _rearm_deadline(self, task_id: str, *, earlier_only: bool = False) -> None:
        deadline = self._deadline(task_id)
        at = deadline.at_ms if deadline is not None else None
        armed = self.pending[task_id].timer_at_ms
        if earlier_only and at is not None and armed is not None and at >= armed:
            return  # the armed timer fires first; its firing looks again
        self._arm_timer(task_id, at)

    # -- starting actions ------------------------------------------------------------------

    def start(self, action: ScheduleTask, *, alone: bool = True) -> None:
        """Start ``action``; ``alone``: the only action of its decision (a built-in step
        is done in the work item only then, so that the branches of a fork still run at
        once)."""
        task_id = action.task_id
        self.pending[task_id] = _Pending(action)
        kind = action.type
        mocks = self.run.task_mocks.get(action.ref) or self.run.task_mocks.get(action.def_ref)
        if kind == TaskType.WORKER and mocks and action.attempt <= len(mocks):
            # a workflow test: this attempt completes with its mock, nothing is queued
            entry = self.pending[task_id]
            entry.phase = "mock"
            entry.poll_input = mocks[action.attempt - 1].model_dump()
            self._arm_timer(task_id, self.now())
        elif kind == TaskType.WORKER:
            data = DispatchInput(
                workflow_id=self.ctx.instance_id,
                workflow_type=self.run.name,
                correlation_id=self.run.correlation_id,
                priority=self.run.priority,
                task_to_domain=self.run.task_to_domain,
                task=action,
                records=self._take_records(task_id),
                now_ms=self.now(),
                traceparent=self.run.traceparent,
            )
            encoded = self._encoded("the dispatch of a task", data)
            if self._done_here(ACTIVITY_DISPATCH, self.local_dispatch, data):
                self.pending[task_id].records = []
            else:
                dispatch: dt.Task[Any] = self.ctx.call_activity(
                    ACTIVITY_DISPATCH, retry_policy=BOOKKEEPING_RETRY, input=encoded
                )
                self._track(task_id, "dispatch", dispatch)
            self._track(task_id, "result", self._wait_event(result_event(task_id)))
            # a Task API that still raises it: applied, never needed
            self._track(task_id, "started", self._wait_event(started_event(task_id)))
            self.pending[task_id].untaken_since_ms = self.now()
            self._rearm_deadline(task_id)
        elif kind in (TaskType.HUMAN, TaskType.WAIT) and action.wait_until_ms is None:
            self._track(task_id, "result", self._wait_event(result_event(task_id)))
            self._rearm_deadline(task_id)
        elif kind == TaskType.WAIT:
            assert action.wait_until_ms is not None
            self._arm_timer(task_id, action.wait_until_ms)
            self.pending[task_id].phase = "wait"
            # a task update may end it before its time (Conductor's updateTask of a WAIT)
            self._track(task_id, "result", self._wait_event(result_event(task_id)))
        elif action.delay_seconds > 0:
            # a retry of an activity or child run: wait out the delay on a durable timer
            self._arm_timer(task_id, self.now() + int(action.delay_seconds * 1000))
            self.pending[task_id].phase = "delay"
        else:
            self._launch(task_id, alone=alone)

    def _here(
        self,
        activity: str,
        first: Callable[[], _T | None] | None,
        replayed: Callable[[], _T],
    ) -> _T | None:
        """What the work of ``activity`` done in this work item gave (:data:`LocalDispatch`,
        :data:`LocalRecord`, :data:`LocalBuiltin`), or None when the activity is to do
        it. The first time ``first`` does it, where the process can (None: it cannot, or
        declined); the id the activity would have had then goes to no action, so that a
        replay, whoever runs it, follows the history exactly: it takes the activity when
        the history holds one under that id, else what ``replayed`` gives (what the
        first time gave). A context that cannot tell (durabletask's own executor) always
        takes the activity."""
        ctx = self.ctx
        if not isinstance(ctx, SeesScheduledActivities):
            return None
        if ctx.is_replaying:
            if ctx.holds_next(activity):
                return None
            done: _T | None = replayed()
        else:
            done = first() if first is not None else None
            if done is None:
                return None
        ctx.pass_over_next()
        return done

    def _done_here(
        self, activity: str, local: Callable[[_Input], bool] | None, data: _Input
    ) -> bool:
        """Whether the work of the bookkeeping ``activity`` for ``data`` is (or, in a
        replay, was) done in this work item by ``local`` (:meth:`_here`); its replay
        needs nothing of it."""
        first = None if local is None else (lambda: True if local(data) else None)
        return self._here(activity, first, lambda: True) is not None

    def _builtin_here(self, data: BuiltinInput, alone: bool) -> KeptStep | None:
        """The result of the built-in step ``data`` when it is (or, in a replay, was)
        done in this work item rather than by the activity (:data:`LocalBuiltin`,
        :meth:`_here`): the first time, where the process can, the step is the only
        action of its decision and the work item has not spent
        :data:`LOCAL_BUILTIN_SECONDS` on such steps; a replay reads what that kept."""
        if data.task.type not in HERE_TYPES:
            return None
        local = self.local_builtin

        def first() -> KeptStep | None:
            if local is None or not alone or self.here_seconds >= LOCAL_BUILTIN_SECONDS:
                return None
            began = time.monotonic()
            try:
                return local(data, self.run.executions)
            finally:
                self.here_seconds += time.monotonic() - began

        return self._here(ACTIVITY_BUILTIN, first, lambda: self._kept(data))

    def _kept(self, data: BuiltinInput) -> KeptStep:
        """What the work item that did the built-in step ``data`` kept, for its replay."""
        task = data.task
        if self.builtin_result is None:
            raise DecisionDeferred(
                f"task {task.ref!r} was done in a work item of an engine of role all; "
                "its result is in the run store, which this process does not read"
            )
        kept = self.builtin_result(data.workflow_id, task.task_id, task.attempt)
        if kept is None:
            raise LookupError(
                f"the result of task {task.ref!r} (attempt {task.attempt}), done in an "
                "earlier work item, is not in the run store"
            )
        return kept

    def _take_ready(self) -> tuple[dt.Task[Any], int] | None:
        """The built-in step done in this work item whose outcome is next, as the
        completed activity it stands for (tracked under its role), with the time the
        run decides at next: when the step ended (kept with its result, so a replay
        decides at the same time), not the work item's start, so that each step's rows
        show when it ran. None if there is none."""
        if self.ready is None:
            return None
        (task_id, kept), self.ready = self.ready, None
        done: dt.CompletableTask[Any] = dt.CompletableTask()
        done.complete(kept.result)
        self._track(task_id, "activity", done)
        return done, max(kept.kept_at, self.now())

    def _launch(self, task_id: str, *, alone: bool = True) -> None:
        entry = self.pending[task_id]
        action = entry.action
        entry.phase = "run"
        if action.type == TaskType.SUB_WORKFLOW and action.resume_child:
            # its child run was retried in place with this run: its end is raised on the
            # run as an event, not returned as a sub-orchestration this execution started
            entry.phase = "child"
            self._track(task_id, "child", self._wait_event(child_end_event(task_id)))
            self._rearm_deadline(task_id)
            return
        if action.type == TaskType.SUB_WORKFLOW:
            entry.phase = "resolve"
            self._track(
                task_id,
                "resolve",
                self.ctx.call_activity(
                    ACTIVITY_RESOLVE_CHILD,
                    retry_policy=BOOKKEEPING_RETRY,
                    input=self._encoded(
                        "the start of a child run",
                        ResolveChildInput(
                            workflow_id=self.ctx.instance_id,
                            child_id=child_run_id(task_id, action.attempt),
                            run=self._run_without_state(),
                            task=action,
                            records=self._take_records(task_id),
                        ),
                    ),
                ),
            )
            return
        data = BuiltinInput(
            workflow_id=self.ctx.instance_id,
            task=action,
            records=self._take_records(task_id),
            traceparent=self.run.traceparent,
            run=self._run_without_state() if action.type == TaskType.START_WORKFLOW else None,
        )
        encoded = self._encoded("the input of a built-in task", data)
        kept = self._builtin_here(data, alone)
        if kept is not None:
            entry.records = []  # written with the step
            assert self.ready is None, "a second built-in step done before the first's outcome"
            self.ready = (task_id, kept)
            return
        self._track(task_id, "activity", self.ctx.call_activity(ACTIVITY_BUILTIN, input=encoded))

    def _again_after_outage(self, task_id: str, error: Exception) -> bool:
        """Run a built-in task's activity (or its poll) again after a durable delay when
        it failed because the run store, a task queue or the payload store was
        unavailable, so that its task does not fail for an outage that ends within the
        schedule of :data:`BOOKKEEPING_RETRY`. Running it again is safe: the records it
        carries are written first, in one transaction, before the call it makes, a
        START_WORKFLOW starts its run once however often it runs, and a payload is
        written whole under a key of its task attempt (its outage wrote nothing). A
        built-in call that went out before the payload store failed (an HTTP request
        whose response could not be stored) is made again, as a retry of its task would.
        False when the error is another, or that schedule is spent."""
        details = getattr(error, "details", None)
        if not isinstance(details, dt.FailureDetails) or not any(
            details.is_caused_by(outage) for outage in _OUTAGES
        ):
            return False
        entry = self.pending[task_id]
        entry.outages += 1
        delay_ms = _outage_delay_ms(entry.outages)
        if delay_ms is None:
            return False
        entry.phase = "poll-delay" if entry.phase == "poll" else "delay"
        self._arm_timer(task_id, self.now() + delay_ms)
        return True

    # -- handling a completed durable task -------------------------------------------------

    def handle(self, task_id: str, role: str, task: dt.Task[Any]) -> TaskOutcome | None:
        """Turn a completed durable task into an outcome for the Decider (or None)."""
        entry = self.pending[task_id]
        action = entry.action
        entry.tasks.pop(role, None)
        self.owner.pop(id(task), None)
        failed = task.is_failed
        value: Any = None if failed else task.get_result()

        def outcome(
            status: TaskStatus,
            output: Any = None,
            reason: str | None = None,
            retry_after: float | None = None,
            timeout_kind: TimeoutKind | None = None,
        ) -> TaskOutcome:
            return TaskOutcome(
                task_id=task_id,
                attempt=action.attempt,
                status=status,
                output=output
                if isinstance(output, dict)
                else ({} if output is None else {"result": output}),
                reason=reason,
                retry_after_seconds=retry_after,
                timeout_kind=timeout_kind,
            )

        if role in ("dispatch", "resolve", "activity", "check"):
            if failed:
                # the activity may not have written the rows it carried: next I/O does
                self.records[:0] = entry.records
            entry.records = []
        if failed:
            error = task.get_exception()
            if role == "activity" and self._again_after_outage(task_id, error):
                return None
            return outcome(TaskStatus.FAILED, reason=f"engine error: {error}")

        if role == "timer":
            if entry.timer_at_ms is not None and self.now() + 5 < entry.timer_at_ms:
                # a stale timer from an earlier deadline or execution: re-arm the current one
                at = entry.timer_at_ms
                entry.timer_at_ms = None
                self._arm_timer(task_id, at)
                return None
            entry.timer_at_ms = None
            if entry.phase == "wait":
                return outcome(TaskStatus.COMPLETED, {})
            if entry.phase == "mock":
                mock = entry.poll_input
                return outcome(TaskStatus(str(mock["status"])), dict(mock.get("output") or {}))
            if entry.phase == "delay":
                self._launch(task_id)
                return None
            if entry.phase == "poll-delay":
                entry.phase = "poll"
                self._track(
                    task_id,
                    "activity",
                    self.ctx.call_activity(
                        ACTIVITY_POLL,
                        input=self._encoded(
                            "the poll of a built-in task",
                            PollInput(
                                type=action.type,
                                input=entry.poll_input,
                                task=PolledTask(
                                    workflow_id=self.ctx.instance_id,
                                    task_id=task_id,
                                    attempt=action.attempt,
                                    ref=action.ref,
                                ),
                                traceparent=self.run.traceparent,
                            ),
                        ),
                    ),
                )
                return None
            deadline = self._deadline(task_id)
            if action.type == TaskType.WORKER:
                if deadline is None:
                    return None
                if deadline.at_ms > self.now() + 5:
                    self._arm_timer(task_id, deadline.at_ms)
                    return None
                if deadline.kind in ("poll", "response"):
                    # the run is not told of hand-outs: ask the run store first
                    self._check(task_id)
                    return None
            if "child" in entry.tasks:
                # the attempt's child run is terminated (see _untrack); the row names it
                child_id = child_run_id(task_id, action.attempt)
                return self._timed_out(
                    outcome(TaskStatus.TIMED_OUT, {"subWorkflowId": child_id}), deadline
                )
            return self._timed_out(outcome(TaskStatus.TIMED_OUT), deadline)

        if role == "check":
            entry.phase = "run"
            check = TaskCheck.model_validate(value or {})
            if check.attempt == action.attempt and check.status is not None:
                stored = TaskStatus(check.status)
                if stored in _POSTED:
                    # a worker's result, recorded; its event is on the way
                    return self._result(outcome, action.ref, stored, check.output, check.reason)
                if stored == TaskStatus.IN_PROGRESS and check.start_time is not None:
                    self.state = self.decider.on_started(
                        self.state,
                        task_id,
                        action.attempt,
                        check.worker_id or "",
                        check.start_time,
                        response_from=check.response_from,
                    )
                elif stored == TaskStatus.SCHEDULED:
                    entry.untaken_since_ms = self.now()
            deadline = self._deadline(task_id)
            if deadline is not None and deadline.at_ms <= self.now() + 5:
                return self._timed_out(outcome(TaskStatus.TIMED_OUT), deadline)
            self._rearm_deadline(task_id)
            return None

        if role == "dispatch":
            dispatched = DispatchResult.model_validate(value or {})
            if dispatched.error:
                status = (
                    TaskStatus.FAILED_WITH_TERMINAL_ERROR
                    if dispatched.terminal
                    else TaskStatus.FAILED
                )
                return outcome(status, reason=dispatched.error)
            return None

        if role == "started":
            started = TaskStartedEvent.model_validate(value or {})
            if started.attempt == action.attempt:
                self.state = self.decider.on_started(
                    self.state,
                    task_id,
                    action.attempt,
                    started.worker_id or "",
                    started.start_time or self.now(),
                )
                self._rearm_deadline(task_id, earlier_only=True)
            # keep listening: a callback re-sends the task and it can be handed out again
            self._track(task_id, "started", self._wait_event(started_event(task_id)))
            return None

        if role == "result":
            result = TaskResultEvent.model_validate(value or {})
            if result.attempt is not None and result.attempt != action.attempt:
                self._track(task_id, "result", self._wait_event(result_event(task_id)))
                return None
            return self._result(
                outcome, action.ref, TaskStatus(result.status), result.output, result.reason
            )

        if role == "resolve":
            child = ChildResolution.model_validate(value or {})
            if child.error:
                refused = (
                    TaskStatus.FAILED_WITH_TERMINAL_ERROR if child.terminal else TaskStatus.FAILED
                )
                return outcome(refused, reason=child.error)
            try:
                self.state = self.decider.on_child_started(
                    self.state,
                    task_id,
                    action.attempt,
                    child_run_id(task_id, action.attempt),
                    self.now(),
                )
            except Exception:
                # a defect: the run ends FAILED; the child's row the resolve activity
                # wrote is ended with it, as it has no orchestration to end it
                self.cancel_children.append(self._canceled_child(action))
                raise
            child_input = RunInput(
                name=child.name,
                version=child.version,
                input=child_run_input(action.input, dynamic=_runs_given_definition(action)),
                correlation_id=self.run.correlation_id,
                priority=child.priority if child.priority is not None else self.run.priority,
                task_to_domain=child.task_to_domain or self.run.task_to_domain,
                parent_workflow_id=self.ctx.instance_id,
                parent_task_id=task_id,
                depth=self.run.depth + 1,
                definition_ref=child.definition_ref,
                traceparent=child.traceparent or self.run.traceparent,
            )
            entry.phase = "child"
            self._track(
                task_id,
                "child",
                self.ctx.call_sub_orchestrator(
                    ORCHESTRATOR_NAME,
                    input=self._bounded("the input of a child run", child_input.wire()),
                    instance_id=child_run_id(task_id, action.attempt),
                ),
            )
            # the task's own timeouts (a taskDefinition's timeoutSeconds), as a WAIT's
            self._rearm_deadline(task_id)
            return None

        if role == "child":
            summary = RunSummary.model_validate(value or {})
            child_id = child_run_id(task_id, action.attempt)
            output = {"subWorkflowId": child_id, **summary.output}
            if summary.status == "COMPLETED":
                return outcome(TaskStatus.COMPLETED, output)
            # the child's end sets the task's status as Conductor's SubWorkflow does
            reason = f"sub workflow {child_id} {summary.status}: {summary.reason or ''}".strip()
            if summary.status == "TERMINATED":
                return outcome(TaskStatus.CANCELED, output, reason=reason)
            if summary.status == "TIMED_OUT":
                return outcome(TaskStatus.TIMED_OUT, output, reason=reason, timeout_kind="child")
            return outcome(TaskStatus.FAILED, output, reason=reason)

        # role == "activity": a built-in activity's result envelope
        envelope = ActivityResult.from_dict(value or {"status": "FAILED"})
        if envelope.pending is not None and envelope.is_pending:
            entry.poll_input = envelope.pending.poll_input()
            # Retry-After: 0 means "poll now"
            self._again_after(task_id, envelope.pending.retry_after_seconds, "poll-delay")
            return None
        if envelope.is_deferred:
            # its rate limit is used up: the call again once the limit's window ends
            # (the activity decides; no attempt is spent)
            self._again_after(task_id, envelope.retry_after_seconds or 1.0, "delay")
            return None
        status = TaskStatus(envelope.status)
        if action.async_complete and status == TaskStatus.COMPLETED:
            # asyncComplete: the call answered; a task update (raised as its result
            # event, as a HUMAN task's) ends the task, within its deadlines
            self.state = self.decider.on_called(
                self.state, task_id, action.attempt, envelope.output
            )
            entry.phase = "async"
            self.rows_changed = True
            self._track(task_id, "result", self._wait_event(result_event(task_id)))
            self._rearm_deadline(task_id)
            return None
        return outcome(status, envelope.output, envelope.reason, envelope.retry_after_seconds)

    def _again_after(self, task_id: str, seconds: float, phase: str) -> None:
        """The built-in step runs on (its poll, or its call again) after ``seconds`` on a
        durable timer, in ``phase``; unless the task's timeout comes first: that timer
        firing times the task out."""
        entry = self.pending[task_id]
        at = self.now() + int(seconds * 1000)
        deadline = self.decider.wait_deadline(self.state, task_id)
        if deadline is not None and deadline.at_ms <= at:
            entry.phase = "run"
            self._arm_timer(task_id, deadline.at_ms)
        else:
            entry.phase = phase
            self._arm_timer(task_id, at)

    @staticmethod
    def _result(
        outcome: Callable[..., TaskOutcome],
        ref: str,
        status: TaskStatus,
        output: Any,
        reason: str | None,
    ) -> TaskOutcome:
        """The outcome of a worker's result (raised as an event, or read by a check)."""
        output = output or {}
        too_deep = json_depth_problem(output, what=f"the output of task {ref!r}")
        if too_deep is not None:
            # the Task API refuses such bodies; a result raised some other way is too
            return outcome(TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason=too_deep)
        return outcome(status, output, reason)

    @staticmethod
    def _timed_out(timed_out: TaskOutcome, deadline: Deadline | None) -> TaskOutcome:
        # the Decider words the reason (Conductor's texts)
        kind = deadline.kind if deadline is not None else "task"
        return timed_out.model_copy(update={"timeout_kind": kind})

    def _check(self, task_id: str) -> None:
        entry = self.pending[task_id]
        entry.phase = "check"
        self._track(
            task_id,
            "check",
            self.ctx.call_activity(
                ACTIVITY_CHECK,
                retry_policy=BOOKKEEPING_RETRY,
                input=encode(
                    CheckInput(
                        workflow_id=self.ctx.instance_id,
                        task_id=task_id,
                        attempt=entry.action.attempt,
                        traceparent=self.run.traceparent,
                    )
                ),
            ),
        )

    # -- the loop --------------------------------------------------------------------------

    def apply(self, decision: Decision) -> None:
        self.state = decision.state
        self.records.extend(decision.records)
        for task_id in decision.cancel:
            self._untrack(task_id)

    def interpret(self, state: RunState) -> Generator[dt.Task[Any], Any, dict[str, Any]]:
        ctx = self.ctx
        self.state = state
        started_at = self.run.started_at_ms if self.run.started_at_ms is not None else self.now()
        control: dict[str, dt.Task[Any]] = {
            "terminate": ctx.wait_for_external_event(TERMINATE_EVENT),
            "skip": ctx.wait_for_external_event(SKIP_EVENT),
        }
        timeout_s = self.decider.definition.timeout_seconds
        timeout_at = started_at + timeout_s * 1000
        if timeout_s > 0 and not self.state.timeout_alerted:
            control["timeout"] = ctx.create_timer(_at(max(timeout_at, self.now())))

        decision = self.decider.decide(self.state, self.now())
        while True:
            self.apply(decision)
            if decision.finished is not None:
                return (yield from self.finish(decision.finished))
            alone = len(decision.actions) == 1
            for action in decision.actions:
                self.start(action, alone=alone)
            # a built-in step done in this work item: its outcome is handled at once
            here = self._take_ready()
            if here is not None:
                winner, now = here
            else:
                if self._unrecorded():
                    yield from self.flush_records()
                if not self.pending:
                    return (yield from self.finish(self.decider.stall(self.state, self.now())))
                race: list[dt.Task[Any]] = list(control.values())
                for entry in self.pending.values():
                    race.extend(entry.tasks.values())
                # a canceled attempt's resolve activity: once it returns, its child is ended
                race.extend(task for task, _ in self.resolving)
                winner = yield dt.when_any(race)
                self.here_seconds = 0.0
                now = self.now()
                if self.resolving:
                    self._take_resolved()

            if winner is control.get("terminate"):
                raised = control["terminate"].get_result()
                text = (
                    TerminateEvent.model_validate(raised).reason
                    if isinstance(raised, dict)
                    else raised
                )
                decision = self.decider.terminate(self.state, str(text or "terminated"), now)
                continue
            if winner is control.get("skip"):
                skip = SkipEvent.model_validate(control["skip"].get_result() or {})
                control["skip"] = ctx.wait_for_external_event(SKIP_EVENT)
                decision = self.decider.skip(
                    self.state, skip.task_reference_name, skip.task_input, skip.task_output, now
                )
                continue
            if winner is control.get("timeout"):
                if now + 5 < timeout_at:
                    control["timeout"] = ctx.create_timer(_at(timeout_at))
                    decision = Decision(state=self.state)
                    continue
                del control["timeout"]
                decision = self.decider.on_workflow_timeout(self.state, now)
                continue

            owner = self.owner.get(id(winner))
            if owner is None:
                decision = Decision(state=self.state)
                continue
            task_id, role = owner
            outcome = self.handle(task_id, role, winner)
            if outcome is None:
                if self.rows_changed:
                    self.rows_changed = False
                    decision = self.decider.decide(self.state, now)
                else:
                    decision = Decision(state=self.state)
                continue
            self.state = self.decider.on_outcome(self.state, outcome, now)
            if self.decider.is_waiting(self.state, task_id):
                # ALERT_ONLY and similar: the task keeps waiting, with its next deadline
                self._rearm_deadline(task_id)
            else:
                self._untrack(task_id)
            self.steps += 1
            self.orphans = [t for t in self.orphans if not t.is_complete]
            if (
                self.steps >= STEPS_PER_EXECUTION
                and not self.pending
                and not self.orphans
                and not self.resolving
            ):
                if self._unrecorded():
                    yield from self.flush_records()
                # only the live part of the state: a long run's state must not grow with
                # every step, or each replay (which re-reads it) costs O(steps so far)
                self.decider.compact(self.state)
                carried = self.run.model_copy(
                    update={
                        "state": self.state.model_dump(mode="json"),
                        "started_at_ms": started_at,
                        "executions": self.run.executions + 1,
                        # what is left of them is in the state now
                        "replay": [],
                        "task_inputs": {},
                    }
                )
                ctx.continue_as_new(
                    self._bounded(
                        "the run's state (carried into a new execution)",
                        carried.model_dump(mode="json", by_alias=True),
                    ),
                    save_events=True,
                )
                return {}
            decision = self.decider.decide(self.state, now)

    def _take_warnings(self) -> list[str]:
        warnings = self.state.warnings[self.warned :]
        self.warned = len(self.state.warnings)
        return warnings

    def _unrecorded(self) -> bool:
        """Whether the step left rows, warnings or child runs to end for a record."""
        return bool(self.records or len(self.state.warnings) > self.warned or self.cancel_children)

    def flush_records(self) -> Generator[dt.Task[Any], Any, None]:
        """Record the rows, warnings and child runs to end the run has not recorded yet:
        one record (activity, or this work item where it may), or, for rows that would
        not fit one orchestration message together (a step that ran thousands of inline
        tasks), one record per part that fits (:func:`_parts`)."""
        records = self._take_records()
        warnings = self._take_warnings()
        children, self.cancel_children = self.cancel_children, []
        if not (records or warnings or children):
            return
        data = RecordInput(
            workflow_id=self.ctx.instance_id,
            records=records,
            warnings=warnings,
            cancel_children=children or None,
            traceparent=self.run.traceparent,
        )
        encoded = encode(data)
        if len(records) > 1 and _too_large(encoded, self.max_message_bytes):
            yield from self._record_in_parts(data)
            return
        check_encoded("the task records of a step", encoded, self.max_message_bytes)
        yield from self._record(data, encoded)

    def _record_in_parts(self, data: RecordInput) -> Generator[dt.Task[Any], Any, None]:
        """``data`` recorded in one record per part of its rows that fits a message
        (:func:`_parts`); its warnings and child runs to end go with the first part."""
        for i, part in enumerate(_parts(data.records, self.max_message_bytes // 2)):
            update: dict[str, Any] = {"records": part}
            if i:
                update.update(warnings=[], cancel_children=None)
            yield from self._record(data.model_copy(update=update))

    def _record(
        self, data: RecordInput, encoded: EncodedJson | None = None
    ) -> Generator[dt.Task[Any], Any, None]:
        if encoded is None:
            encoded = self._encoded("the task records of a step", data)
        if self._done_here(ACTIVITY_RECORD, self.local_record, data):
            return
        yield self.ctx.call_activity(ACTIVITY_RECORD, retry_policy=BOOKKEEPING_RETRY, input=encoded)

    def finish(self, result: RunResult) -> Generator[dt.Task[Any], Any, dict[str, Any]]:
        for task_id in list(self.pending):
            self._untrack(task_id)
        while self.resolving:
            # a child's run row may still be written: the finish that ends it waits for it
            yield dt.when_any([task for task, _ in self.resolving])
            self._take_resolved()
        records = self._take_records()
        children = [child.child_id for child in self.cancel_children]
        data = finish_input(
            self.ctx,
            self.run,
            result,
            records,
            self._take_warnings(),
            children,
            self.state.variables,
        )
        finish = encode(data)
        if len(records) > 1 and _too_large(finish, self.max_message_bytes):
            # rows too many for the message that ends the run (a step that ran thousands
            # of inline tasks): recorded first, in parts that fit
            yield from self._record_in_parts(
                RecordInput(
                    workflow_id=self.ctx.instance_id,
                    records=records,
                    traceparent=self.run.traceparent,
                )
            )
            data = data.model_copy(update={"records": []})
            finish = encode(data)
        return (
            yield from end_run(
                self.ctx, result, data, finish, self.max_message_bytes, self.local_finish
            )
        )

    def fail(self, reason: str) -> Generator[dt.Task[Any], Any, dict[str, Any]]:
        """End the run FAILED with ``reason`` after a defect, as a terminated run ends:
        every task still open CANCELED, the child runs terminated, the rows and warnings
        the run had not recorded yet recorded (:meth:`Decider.fail`, :meth:`finish`)."""
        decision = self.decider.fail(self.state, reason, self.now())
        self.apply(decision)
        assert decision.finished is not None
        return (yield from self.finish(decision.finished))

    def _run_without_state(self) -> RunInput:
        return self.run.model_copy(update={"state": None})


def finish_input(
    ctx: dt.OrchestrationContext,
    run: RunInput,
    result: RunResult,
    records: list[TaskChange] | None = None,
    warnings: list[str] | None = None,
    cancel_children: list[str] | None = None,
    variables: dict[str, Any] | None = None,
) -> FinishInput:
    """The finish activity's input (:func:`end_run`)."""
    return FinishInput(
        workflow_id=ctx.instance_id,
        run=run.model_copy(update={"state": None}),
        result=result,
        records=records or [],
        warnings=warnings or [],
        cancel_children=cancel_children or [],
        variables=variables or {},
        now_ms=_ms(ctx.current_utc_datetime),
    )


def end_run(
    ctx: dt.OrchestrationContext,
    result: RunResult,
    data: FinishInput,
    finish: EncodedJson,
    max_message_bytes: int | None,
    local: LocalFinish | None,
) -> Generator[dt.Task[Any], Any, dict[str, Any]]:
    """End the run: the finish activity records it (``data``, encoded as ``finish``)
    and returns the run's summary (the orchestration's output). With
    ``max_message_bytes``, a finish too large for one message raises
    :class:`MessageTooLarge`.

    With ``local`` (a process that hosts the activities too), the end is recorded in
    this work item instead, when the run reaches its end for the first time: the work
    item that completes the orchestration records it, and the activity's two work items
    and two round trips to the backend are spared. When the end was reached in an earlier
    work item (this one replays it), that one scheduled the finish activity (a local
    finish completes the orchestration in the work item that made it), so the replay
    takes the activity's path as its history says; a work item that recorded the end but
    whose completion was lost records it again when it is handed out anew (the write is
    the finish activity's, idempotent)."""
    if max_message_bytes is not None:
        check_encoded("the end of the run", finish, max_message_bytes)
    if local is not None and not ctx.is_replaying:
        done = local(data)
        if done is not None:
            return done
    summary = yield ctx.call_activity(ACTIVITY_FINISH, retry_policy=BOOKKEEPING_RETRY, input=finish)
    return summary if isinstance(summary, dict) else result.model_dump(mode="json", by_alias=True)


def make_workflow_interpreter(
    definitions: DefinitionCache,
    local_finish: LocalFinish | None = None,
    local_dispatch: LocalDispatch | None = None,
    local_record: LocalRecord | None = None,
    local_builtin: LocalBuiltin | None = None,
    builtin_result: BuiltinResult | None = None,
) -> dt.Orchestrator[Any, Any]:
    """The ``WorkflowInterpreter`` orchestration, reading definitions from ``definitions``
    (the engine process's cache of immutable snapshots); ``local_finish``,
    ``local_dispatch``, ``local_record``, ``local_builtin`` and ``builtin_result`` where
    the process hosts the activities too (:data:`LocalFinish`, :data:`LocalDispatch`,
    :data:`LocalRecord`, :data:`LocalBuiltin`, :data:`BuiltinResult`)."""

    def workflow_interpreter(
        ctx: dt.OrchestrationContext, raw_input: Any
    ) -> Generator[dt.Task[Any], Any, dict[str, Any]]:
        """The one orchestration that runs every run of every definition."""
        run = RunInput.model_validate(raw_input or {})
        if isinstance(raw_input, dict) and "behaviour" not in raw_input:
            run.behaviour = 0  # started before runs were stamped with it
        try:
            decider = definitions.decider_for(run.name, run.version, run.definition_ref)
        except LookupError as exc:
            return (yield from _fail(ctx, run, str(exc)))
        except _UNDECIDABLE as exc:
            raise DecisionDeferred(f"the run's definition: {exc}") from exc
        except Exception as exc:  # a defect, or a snapshot that is no definition
            return (yield from _fail(ctx, run, _defect(exc)))
        runner = _Run(
            ctx,
            run,
            decider,
            definitions.limits.max_message_bytes,
            local_finish,
            local_dispatch,
            local_record,
            local_builtin,
            builtin_result,
        )
        try:
            if run.state is not None:
                state = RunState.model_validate(run.state)
                runner.warned = len(state.warnings)  # recorded before the state was carried
            else:
                state = decider.start(
                    workflow_id=ctx.instance_id,
                    input=run.input,
                    correlation_id=run.correlation_id,
                    now_ms=_ms(ctx.current_utc_datetime),
                    generation=run.generation,
                    replay=run.replay,
                    seq_base=run.seq_base,
                    task_inputs=run.task_inputs,
                    behaviour=run.behaviour,
                )
            # a definition with dynamic tasks: a Decider of this run's own (the tasks it made)
            runner.decider = decider.for_run(state)
        except _UNDECIDABLE as exc:
            raise DecisionDeferred(str(exc)) from exc
        except Exception as exc:
            # a defect before the first decision: no task was scheduled, nothing to end but
            # the run (an orchestration failed here left its run RUNNING until a read)
            return (yield from _fail(ctx, run, _defect(exc)))
        if run.started_at_ms is None:
            run.started_at_ms = _ms(ctx.current_utc_datetime)
        try:
            return (yield from runner.interpret(state))
        except (dt.TaskFailedError, DecisionDeferred):
            # the bookkeeping failed after its retries: nothing left to record with; or
            # the work item goes back undecided
            raise
        except MessageTooLarge as exc:
            return (yield from _fail(ctx, run, str(exc)))
        except _UNDECIDABLE as exc:  # not the run's failure: decided again later
            raise DecisionDeferred(str(exc)) from exc
        except Exception as exc:  # a defect or bad data: end the run FAILED, never RUNNING
            reason = _defect(exc)
        # Outside the except block, so that an error of the ending is not chained to the
        # defect. The Decider's state may be inconsistent after the defect: if ending the
        # run as a terminated one raises too (or its finish activity fails for good), the
        # run is recorded FAILED with nothing else, never left RUNNING. Every branch
        # depends only on the history, so a replay takes the same one.
        try:
            return (yield from runner.fail(reason))
        except _UNDECIDABLE as exc:  # a read for the ending: decided again later
            raise DecisionDeferred(str(exc)) from exc
        except Exception:
            children = [child.child_id for child in runner.cancel_children]
            return (yield from _fail(ctx, run, reason, children))

    return workflow_interpreter


def _defect(exc: Exception) -> str:
    """The reason of a run the interpreter ends for a defect or bad data."""
    return f"interpreter error: {type(exc).__name__}: {exc}"


def _fail(
    ctx: dt.OrchestrationContext,
    run: RunInput,
    reason: str,
    cancel_children: list[str] | None = None,
) -> Generator[dt.Task[Any], Any, dict[str, Any]]:
    """Record the run FAILED when the interpreter cannot go on (definition gone, a defect),
    ending the child runs in ``cancel_children`` with it."""
    result = RunResult(status=RunStatus.FAILED, reason=reason)
    data = finish_input(ctx, run, result, cancel_children=cancel_children)
    return (yield from end_run(ctx, result, data, encode(data), None, None))


__all__ = [
    "BOOKKEEPING_RETRY",
    "HERE_TYPES",
    "LOCAL_BUILTIN_SECONDS",
    "STEPS_PER_EXECUTION",
    "BuiltinResult",
    "DecisionDeferred",
    "LocalBuiltin",
    "LocalDispatch",
    "LocalFinish",
    "LocalRecord",
    "MessageTooLarge",
    "SeesScheduledActivities",
    "check_message",
    "end_run",
    "finish_input",
    "make_workflow_interpreter",
]


def _runs_given_definition(action: ScheduleTask) -> bool:
    """Whether a SUB_WORKFLOW's child runs a definition given in the parent."""
    child = action.sub_workflow
    given = child.workflow_definition if child is not None else None
    return isinstance(given, dict) and bool(given)
