"""Orchestration sessions: an orchestration's live state kept in the worker between its
work items, so that a work item replays only the history events it has not seen.

durabletask replays an orchestration's whole history on every work item: a fresh
generator is driven through every past event (``_OrchestrationExecutor.execute``) before
the new ones. For the interpreter that means re-deciding every earlier step of the
execution on each work item. A session keeps the generator, its orchestration context and
its executor alive after a work item completes, keyed by instance id. When the next work
item of that instance arrives and its past events start with exactly the events the
session has applied (the first and the last of them compared, so a new execution or a
history the session did not produce is a miss), only the rest is applied: the events the
backend recorded for the actions of the last work item (replayed, as a full replay would
replay them) and then the new events. Anything else is a full replay, as without
sessions; a session is only ever a cache of what a replay would rebuild, so an evicted,
missed or dropped session costs time, never correctness. This is what Durable Functions
calls extended sessions and Temporal a sticky cache.

A session is dropped when its orchestration completes (or continues as new), when a work
item fails or its completion cannot be delivered, when the orchestration gives its work
item back undecided (``AbandonOrchestrationError``: the interpreter's ``DecisionDeferred``,
given back after ``ABANDON_PAUSE_SECONDS``), and when it is the least recently used one
past ``capacity``. It is stored before the completion is sent, since the backend
hands out the instance's next work item only once it has taken this one's completion.

The context a session keeps is a :class:`HistoryContext`: besides replaying, it knows
which activities the history holds by action id, which the interpreter needs to replay a
WORKER task queued, a step's rows recorded, or a built-in step done, in a work item
rather than by an activity.

durabletask 1.12 has no hook for this; :class:`SessionWorkerMixin` overrides the
worker's ``_execute_orchestrator`` and drives durabletask's executor and context the way
``_OrchestrationExecutor.execute`` does (replayed events with ``_is_replaying`` set, new
events without). The pinned version is checked in ``tests/contract/durable_backend/``.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import durabletask.internal.exceptions as pe
import durabletask.internal.helpers as ph
import durabletask.internal.orchestrator_service_pb2 as pb
from durabletask import worker as dtw
from durabletask.azuremanaged.worker import DurableTaskSchedulerWorker

#: live orchestrations kept per worker by default (each holds a suspended generator and
#: its run state; a miss costs one full replay). Temporal's Python SDK keeps 1,000 by
#: default (``max_cached_workflows`` of its Worker, temporalio 1.35).
DEFAULT_SESSION_CAPACITY = 1000
#: the pause before a work item not decided now goes back to the backend
ABANDON_PAUSE_SECONDS = 1.0


@dataclass
class _Session:
    executor: Any  # durabletask.worker._OrchestrationExecutor
    ctx: HistoryContext
    #: events applied so far (past + new of every work item)
    applied: int
    first: pb.HistoryEvent
    last: pb.HistoryEvent


class HistoryContext(dtw._RuntimeOrchestrationContext):
    """durabletask's orchestration context, told which activities the execution's history
    holds as scheduled (``TaskScheduled``, by action id), so that a replay can tell an
    action the first run of a work item took from one it did without: where the process
    hosts the activities, the interpreter does an activity's work (queue a WORKER task,
    record a step's rows, do a built-in step) in the work item itself and gives the id
    the activity would have had to no action (``pass_over_next``;
    ``engine.runtime.interpreter._Run._here``), and a replay schedules the activity
    exactly when the history holds one under that id (``holds_next``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scheduled: dict[int, str] = {}

    def note_history(self, events: Sequence[pb.HistoryEvent]) -> None:
        """Remember the activities ``events`` (the part of the history about to be
        replayed) hold as scheduled, by id."""
        for event in events:
            if event.HasField("taskScheduled"):
                self._scheduled[event.eventId] = event.taskScheduled.name

    def forget_replayed(self) -> None:
        """Drop what the replay has passed (ids the execution has given out already):
        only the next id is ever asked about."""
        if self._scheduled:
            passed = self._sequence_number
            self._scheduled = {i: n for i, n in self._scheduled.items() if i > passed}

    def holds_next(self, name: str) -> bool:
        """Whether the history holds the activity ``name`` as scheduled under the id the
        next action of this execution would get."""
        return self._scheduled.get(self._sequence_number + 1) == name

    def pass_over_next(self) -> None:
        """Give the next action id to no action: the action's work was done in the work
        item. (Ids with no event are nothing new: durabletask's own context leaves one
        for a timer created and canceled in one work item.)"""
        self.next_sequence_number()


def _same(a: pb.HistoryEvent, b: pb.HistoryEvent) -> bool:
    """Whether two history events are the same event: its kind, payload and timestamp
    (the event id may be assigned when the backend stores it)."""
    if a.eventId == b.eventId or a.eventId < 0 or b.eventId < 0:
        if a.eventId != b.eventId:
            a, b = _without_id(a), _without_id(b)
        return bool(a == b)
    return False


def _without_id(event: pb.HistoryEvent) -> pb.HistoryEvent:
    copy = pb.HistoryEvent()
    copy.CopyFrom(event)
    copy.eventId = -1
    return copy


class OrchestrationSessions:
    """The live orchestrations of one worker, least recently used first."""

    def __init__(self, capacity: int = DEFAULT_SESSION_CAPACITY) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()
        #: work items served from a session / by a full replay (for tests and the bench)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def take(self, instance_id: str, past: Sequence[pb.HistoryEvent]) -> _Session | None:
        """The session of ``instance_id`` if ``past`` continues what it applied (it is
        removed: a work item owns its session until it puts it back)."""
        with self._lock:
            session = self._sessions.pop(instance_id, None)
        if (
            session is not None
            and len(past) >= session.applied
            and _same(past[session.applied - 1], session.last)
            and _same(past[0], session.first)
        ):
            self.hits += 1
            return session
        self.misses += 1
        return None

    def put(self, instance_id: str, session: _Session) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._sessions[instance_id] = session
            self._sessions.move_to_end(instance_id)
            while len(self._sessions) > self.capacity:
                self._sessions.popitem(last=False)

    def drop(self, instance_id: str) -> None:
        with self._lock:
            self._sessions.pop(instance_id, None)


class _MootTimersQuiet(logging.LoggerAdapter):  # type: ignore[type-arg]
    """durabletask's logger for the orchestrations' executors and contexts, with one
    warning demoted to DEBUG: a timer firing that no task waits for. The interpreter
    cancels a deadline timer once its step has ended, but the backend still fires it
    when it falls due, and durabletask calls each such firing unexpected. (A timer of an
    earlier execution never gets here: the embedded backend drops it, and the Durable Task
    Scheduler is assumed to, engine/adapters/backend/executions.py.) A firing that lands on
    a task that is not a timer keeps its warning."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if (
            level == logging.WARNING
            and isinstance(msg, str)
            and "Ignoring unexpected timerFired event" in msg
        ):
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


class SessionWorkerMixin:
    """Mixed into a ``TaskHubGrpcWorker`` (before it): orchestration work items run
    against :class:`OrchestrationSessions`. Workers configured with durabletask's payload
    store or its own trace spans, and rewinds, keep durabletask's path (Stepway uses none
    of them)."""

    sessions: OrchestrationSessions

    def __init__(
        self, *args: Any, session_capacity: int = DEFAULT_SESSION_CAPACITY, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        # durabletask's own spans go to the global tracer provider, which Stepway never
        # sets (its spans are engine/runtime/tracing.py's); the Scheduler's worker takes
        # no such argument, so the attribute is set here
        self._emit_trace_spans = False
        self.sessions = OrchestrationSessions(session_capacity)
        self._orchestration_logger = _MootTimersQuiet(self._logger, None)  # type: ignore[attr-defined]

    def _execute_orchestrator(
        self, req: pb.OrchestratorRequest, stub: Any, completionToken: Any
    ) -> None:
        worker: Any = self
        if (
            worker._payload_store is not None
            or worker._emit_trace_spans
            or any(e.HasField("executionRewound") for e in req.newEvents)
        ):
            super()._execute_orchestrator(req, stub, completionToken)  # type: ignore[misc]
            return
        instance_id = req.instanceId
        past, new = req.pastEvents, req.newEvents
        session = self.sessions.take(instance_id, past) if len(past) else None
        replay: Sequence[pb.HistoryEvent]
        try:
            if session is None:
                session = self._fresh(instance_id, worker, req)
                replay = past
            else:
                replay = past[session.applied :]
            result = self._apply(session, replay, new)
            actions = session.ctx.get_actions()
            response = pb.OrchestratorResponse(
                instanceId=instance_id,
                actions=actions,
                customStatus=ph.get_string_value(result),
                completionToken=completionToken,
                orchestrationTraceContext=req.orchestrationTraceContext,
            )
        except pe.AbandonOrchestrationError as ex:
            # the session (taken above) is dropped: it applied part of this work item.
            # A pause before giving the work item back: the backend hands it out again
            # at once, and what stopped it (a store's outage) rarely passes sooner
            worker._logger.warning(
                f"instance '{instance_id}' not decided now, its work item goes back: {ex}"
            )
            time.sleep(ABANDON_PAUSE_SECONDS)
            stub.AbandonTaskOrchestratorWorkItem(
                pb.AbandonOrchestrationTaskRequest(completionToken=completionToken)
            )
            return
        except Exception as ex:
            worker._logger.exception(
                f"An error occurred while trying to execute instance '{instance_id}': {ex}"
            )
            failure = ph.new_failure_details(
                ex, worker._exception_properties_provider, worker._logger
            )
            response = pb.OrchestratorResponse(
                instanceId=instance_id,
                actions=[
                    ph.new_complete_orchestration_action(
                        -1, pb.ORCHESTRATION_STATUS_FAILED, "", failure
                    )
                ],
                completionToken=completionToken,
            )
            session = None
        # kept before the completion is sent: the backend hands out the instance's next
        # work item only after it took this completion, so that item finds the session
        keep = session is not None and not session.ctx._is_complete
        if keep:
            assert session is not None
            self.sessions.put(instance_id, session)
        try:
            stub.CompleteOrchestratorTask(response)
        except Exception as ex:
            if keep:
                self.sessions.drop(instance_id)  # the history may not have these events
            worker._logger.exception(
                f"Failed to deliver orchestrator response for '{instance_id}' to sidecar: {ex}"
            )

    @staticmethod
    def _fresh(instance_id: str, worker: Any, req: pb.OrchestratorRequest) -> _Session:
        persisted = None
        if (
            req.HasField("orchestrationTraceContext")
            and req.orchestrationTraceContext.HasField("spanID")
            and req.orchestrationTraceContext.spanID.value
        ):
            persisted = req.orchestrationTraceContext.spanID.value
        executor = dtw._OrchestrationExecutor(
            worker._registry,
            worker._orchestration_logger,
            persisted_orch_span_id=persisted,
            maximum_timer_interval=worker.maximum_timer_interval,
            data_converter=worker._data_converter,
            exception_properties_provider=worker._exception_properties_provider,
        )
        ctx = HistoryContext(
            instance_id,
            worker._registry,
            maximum_timer_interval=worker.maximum_timer_interval,
            data_converter=worker._data_converter,
            exception_properties_provider=worker._exception_properties_provider,
            logger=worker._orchestration_logger,
        )
        first = req.pastEvents[0] if len(req.pastEvents) else req.newEvents[0]
        executor._orchestration_name = next(
            (
                e.executionStarted.name
                for e in itertools.chain(req.pastEvents, req.newEvents)
                if e.HasField("executionStarted")
            ),
            "<unknown>",
        )
        return _Session(executor=executor, ctx=ctx, applied=0, first=first, last=first)

    @staticmethod
    def _apply(
        session: _Session,
        replay: Sequence[pb.HistoryEvent],
        new: Sequence[pb.HistoryEvent],
    ) -> Any:
        """Apply ``replay`` (replaying) and ``new`` to the session, as durabletask's
        executor applies a work item's past and new events; returns the custom status."""
        if not new:
            raise ValueError("a work item must carry at least one new event")
        executor, ctx = session.executor, session.ctx
        ctx.note_history(replay)
        try:
            ctx._is_replaying = True
            for event in replay:
                executor.process_event(ctx, event)
            ctx._is_replaying = False
            for event in new:
                executor.process_event(ctx, event)
        except pe.AbandonOrchestrationError:
            raise  # not decided now: the work item goes back (the session with it)
        except Exception as ex:  # the orchestration failed, as durabletask's executor has it
            ctx.set_failed(ex)
        ctx.forget_replayed()
        session.applied += len(replay) + len(new)
        session.last = new[-1]
        return ctx._encoded_custom_status


class SessionWorker(SessionWorkerMixin, dtw.TaskHubGrpcWorker):
    """durabletask's worker with orchestration sessions (the embedded backend)."""


class SchedulerSessionWorker(SessionWorkerMixin, DurableTaskSchedulerWorker):
    """The Durable Task Scheduler's worker with orchestration sessions."""


__all__ = [
    "DEFAULT_SESSION_CAPACITY",
    "HistoryContext",
    "OrchestrationSessions",
    "SchedulerSessionWorker",
    "SessionWorker",
    "SessionWorkerMixin",
]
