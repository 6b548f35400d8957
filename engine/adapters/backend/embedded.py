"""The embedded durable backend: the in-memory gRPC backend of ``durabletask.testing``,
hosted by Stepway in a gRPC server of its own.

Workers and clients talk to it over the real Durable Task gRPC protocol, exactly as they
talk to the Azure Durable Task Scheduler, so the interpreter runs unchanged on both.

The servicer is a subclass of
:class:`durabletask.testing.in_memory_backend.InMemoryOrchestrationBackend` (durabletask
1.12). The upstream class is built for unit tests and has known failures; each override
below fixes one of them, and ``tests/contract/durable_backend`` proves each fix:

* **Thread starvation.** Upstream hosts the servicer on a 10-thread gRPC server; every
  ``GetWorkItems`` stream and every blocking ``WaitForInstance*`` call holds a thread, so
  a few dozen waiting clients starve event delivery. :class:`EmbeddedBackend` hosts the
  servicer on a server with ``max_workers`` threads (created on demand), and a waiter
  whose client went away gives its thread back within a second.
* **Sub-orchestrations longer than 30 s.** Upstream's watcher thread calls
  ``_wait_for_state(timeout=None)``, which silently means 30 s, then gives up, so the
  parent never hears of the child's completion. :meth:`_wait_for_state` here waits
  without a deadline when none is given.
* **History limit.** Upstream aborts ``CompleteOrchestratorTask`` with RESOURCE_EXHAUSTED
  when the history would exceed ``max_history_size``, dropping the dispatched events:
  the instance stays RUNNING forever. Here the instance ends FAILED with a
  ``HistorySizeLimitExceeded`` failure that names the limit; a step that completes or
  continues-as-new is always accepted (that is how long runs bound their history).
* **Lost work items.** Upstream has no leases: ``AbandonTaskActivityWorkItem`` is a no-op
  and a work item handed to an engine process that dies is never handed out again.
  Here every work item handed out is leased to the stream that received it. When the
  stream closes (the engine process died, disconnected or stopped) its unfinished work
  items go back to the queue for the next connected worker; a lease that outlives
  ``work_item_lease_seconds`` (a half-open connection) is requeued too. Abandon
  requeues. Activities are delivered at least once: the first result for an activity
  wins and later ones are dropped; a late result for a requeued orchestration work
  item is stale (its completion token was renewed) and is dropped.
* **Lost wake-ups.** Upstream signals new work only when an instance is newly queued.
  An event that arrives while the instance's work item is in flight (usually a worker
  task's ``.started`` event) leaves the instance in the queue, so the re-enqueue when
  that work item completes signals nothing and the stream sleeps out its 0.1 s idle
  wait. :meth:`_enqueue_orchestration` and :meth:`_enqueue_entity` here signal on every
  enqueue.
* **Ready work behind work in flight.** Upstream queues an instance that gets an event
  while its work item is in flight; a stream that finds it at the head of the queue puts
  it back and stops looking, so with two such instances ahead one that is ready waits
  out the idle wait. Here such an instance is not queued until its work item ends.
* **Idle streams.** The Python worker drops and reopens a stream that has been silent
  for 120 s, which would requeue the work it is still running; the stream here sends a
  health ping every ``health_ping_seconds`` while idle.
* **Oversized work items.** Upstream hands out whatever it builds; a work item larger
  than the worker can receive breaks the worker's stream (every work item leased to it
  is requeued, every other run stalls) and comes back forever. Here a work item larger
  than ``max_message_bytes`` (:data:`~engine.adapters.backend.config.GRPC_MAX_MESSAGE_BYTES`, the
  limit the server and every Stepway client share) is never sent: an orchestration is
  failed with a ``MessageSizeLimitExceeded`` failure naming the size and the limit, an
  activity fails (its orchestration sees a failed activity).
* **Poison work items.** A work item handed out ``max_deliveries`` times without a
  completion (each hand-out ended in a crash, a dropped stream or an expired lease) is
  not handed out again: the orchestration is failed (``PoisonWorkItem``), or the activity
  fails, with a reason that says so. Nothing is redelivered forever.

* **Events of an earlier execution.** Upstream addresses completions by instance id
  alone, and task ids restart when an orchestration continues as new: an activity
  result, a child's end or a timer that the earlier execution left behind landed in the
  new execution and completed (or, for a timer, removed) whichever of its tasks had the
  same id, so the run took a wrong answer or waited forever. Here each is delivered only
  to the execution that scheduled it, as a Durable Task Framework backend drops a message
  for an execution that is no longer current
  (:class:`~engine.adapters.backend.executions.Executions`).
* **A thread per timer.** Upstream sleeps a thread per durable timer until it is due;
  here one thread serves every timer from a heap
  (:class:`~engine.adapters.backend.executions.TimerQueue`).

* **Every finished orchestration kept forever.** Upstream keeps each instance, its input,
  output and history, until it is purged, and nothing purges in ``stepway dev``: the
  process grows with every run it ever ran. Here at most ``max_finished_instances``
  finished orchestrations are kept; past that the one that finished longest ago is
  purged (as ``PurgeInstances`` would), so reads, waits and restarts of recent runs
  find them and memory stays bounded. A running orchestration is never purged.

Not fixed: there is no persistence. Runs in flight do not survive a restart of the
backend process; they are gone, not paused.

Run it in its own process with ``python -m engine.adapters.backend.embedded --port N``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import queue
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

import durabletask.internal.helpers as helpers
import durabletask.internal.orchestrator_service_pb2 as pb
import durabletask.internal.orchestrator_service_pb2_grpc as stubs
import grpc
from durabletask.testing.in_memory_backend import (
    ActivityWorkItem,
    InMemoryOrchestrationBackend,
    OrchestrationInstance,
    StateWaiter,
)

from engine.adapters.backend.config import GRPC_MAX_MESSAGE_BYTES
from engine.adapters.backend.executions import EXECUTION_EVENTS, Executions, TimerQueue

__all__ = [
    "DEFAULT_HEALTH_PING_SECONDS",
    "DEFAULT_MAX_DELIVERIES",
    "DEFAULT_MAX_HISTORY_EVENTS",
    "DEFAULT_MAX_WORKERS",
    "DEFAULT_WORK_ITEM_LEASE_SECONDS",
    "HISTORY_LIMIT_ERROR_TYPE",
    "MESSAGE_LIMIT_ERROR_TYPE",
    "POISON_ERROR_TYPE",
    "EmbeddedBackend",
    "StepwayInMemoryBackend",
    "main",
]

_log = logging.getLogger(__name__)

DEFAULT_MAX_WORKERS = 512
"""gRPC server threads (created on demand). Each worker stream, each blocking wait and
each in-progress call holds one."""

DEFAULT_MAX_HISTORY_EVENTS = 10_000
"""History events one orchestration execution may hold before it is failed."""

DEFAULT_WORK_ITEM_LEASE_SECONDS = 600.0
"""A work item not completed this long after hand-out is handed out again, even if the
stream that received it still looks open (half-open connection)."""

DEFAULT_HEALTH_PING_SECONDS = 10.0

DEFAULT_MAX_DELIVERIES = 5
"""Hand-outs of one work item without a completion before it is failed instead."""

DEFAULT_MAX_FINISHED_INSTANCES = 10_000
"""Finished orchestrations (their state and history) the backend keeps; past it the one
that finished longest ago is purged. A finished 20-step run holds about 24 KB here
(measured: 256 such runs grew a ``stepway dev`` process by 6 MiB), so the bound is about
a quarter of a GiB of them."""

HISTORY_LIMIT_ERROR_TYPE = "HistorySizeLimitExceeded"
MESSAGE_LIMIT_ERROR_TYPE = "MessageSizeLimitExceeded"
POISON_ERROR_TYPE = "PoisonWorkItem"

_WAIT_SLICE_SECONDS = 1.0
_LEASE_SWEEP_SECONDS = 1.0

_WorkKind = Literal["orchestration", "activity", "entity"]


@dataclass
class _Stream:
    """One open GetWorkItems stream: one connected engine process (or one reconnect)."""

    stream_id: int
    closed: bool = False
    tokens: set[str] = field(default_factory=set)


@dataclass
class _Lease:
    token: str
    kind: _WorkKind
    stream_id: int
    expires_at: float
    target_id: str
    """The orchestration instance id or entity id the work item is for."""
    activity_key: tuple[str, int, int] | None = None


@dataclass
class _ActivityTicket:
    """An activity scheduled by an orchestration, from scheduling to its first result."""

    item: ActivityWorkItem
    #: the execution of the instance that scheduled it (:class:`Executions`)
    execution: int
    tokens: set[str] = field(default_factory=set)
    queued: bool = True
    deliveries: int = 0


def _activity_key(item: ActivityWorkItem) -> tuple[str, int, int]:
    # The orchestration's completion token at scheduling time changes with every
    # orchestration step, so with the task id it identifies one scheduling even across
    # continue-as-new (which restarts task ids).
    return (item.instance_id, item.task_id, item.completion_token)


class StepwayInMemoryBackend(InMemoryOrchestrationBackend):
    """The upstream in-memory servicer with leases, unbounded sub-orchestration waits and
    a history limit that fails the instance. Host it with :class:`EmbeddedBackend`."""

    def __init__(
        self,
        *,
        max_history_events: int = DEFAULT_MAX_HISTORY_EVENTS,
        work_item_lease_seconds: float = DEFAULT_WORK_ITEM_LEASE_SECONDS,
        health_ping_seconds: float = DEFAULT_HEALTH_PING_SECONDS,
        max_message_bytes: int = GRPC_MAX_MESSAGE_BYTES,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
        max_finished_instances: int = DEFAULT_MAX_FINISHED_INSTANCES,
    ) -> None:
        if max_finished_instances < 1:
            raise ValueError("max_finished_instances must be at least 1")
        # Upstream's own history check aborts the RPC and strands the instance; disable
        # it and enforce our limit in CompleteOrchestratorTask instead.
        super().__init__(max_history_size=sys.maxsize, port=0)
        self.max_history_events = max_history_events
        self.max_message_bytes = max_message_bytes
        self.max_deliveries = max_deliveries
        #: hand-outs of an orchestration's current work item not yet completed
        self._orchestration_deliveries: dict[str, int] = {}
        self.work_item_lease_seconds = work_item_lease_seconds
        self.health_ping_seconds = health_ping_seconds
        self._stream_ids = itertools.count(1)
        self._activity_token_ids = itertools.count(1)
        self._streams: dict[int, _Stream] = {}
        self._leases: dict[str, _Lease] = {}
        self._activity_tickets: dict[tuple[str, int, int], _ActivityTicket] = {}
        self._activity_ticket_by_token: dict[str, _ActivityTicket] = {}
        self._sweeper: threading.Thread | None = None
        self._executions = Executions()
        self._timers = TimerQueue("stepway-backend-timers")
        self.max_finished_instances = max_finished_instances
        #: finished instances, the one that finished longest ago first
        self._finished: OrderedDict[str, None] = OrderedDict()

    # ------------------------------------------------------------------ lifecycle

    def start_lease_sweeper(self) -> None:
        """Start the thread that requeues work items whose lease expired."""
        if self._sweeper is not None and self._sweeper.is_alive():
            return
        self._sweeper = threading.Thread(
            target=self._sweep_leases, name="stepway-backend-leases", daemon=True
        )
        self._sweeper.start()

    def shutdown(self) -> None:
        """Ends every work item stream and waiter (the gRPC server is stopped by the host)."""
        self._shutdown_event.set()
        self._work_available.set()
        self._generation += 1
        self._timers.stop()

    def _sweep_leases(self) -> None:
        while not self._shutdown_event.wait(_LEASE_SWEEP_SECONDS):
            now = time.monotonic()
            with self._lock:
                expired = [t for t, lease in self._leases.items() if lease.expires_at <= now]
                for token in expired:
                    _log.warning("work item lease %s expired; handing it out again", token)
                    self._requeue(token)

    # ------------------------------------------------------------------ work items

    def GetWorkItems(
        self, request: pb.GetWorkItemsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.WorkItem]:
        """Streams work items, leasing each to this stream, with health pings when idle.

        The upstream generator runs on a pump thread that leases each item as it comes
        out; this generator forwards them and sends a ping when nothing came for
        ``health_ping_seconds``. When the RPC ends for any reason the stream's leases
        are requeued (``context.add_callback``)."""
        stream = _Stream(next(self._stream_ids))
        with self._lock:
            self._streams[stream.stream_id] = stream
        if not context.add_callback(lambda: self._close_stream(stream)):
            self._close_stream(stream)
            return
        out: queue.Queue[pb.WorkItem | None] = queue.Queue()
        upstream = super().GetWorkItems(request, context)

        def pump() -> None:
            try:
                for item in upstream:
                    with self._lock:
                        if stream.closed:
                            self._requeue_unleased(item)
                            break
                        if self._refuse(item):
                            continue
                        self._lease(stream, item)
                    out.put(item)
            finally:
                out.put(None)

        threading.Thread(
            target=pump, name=f"stepway-backend-stream-{stream.stream_id}", daemon=True
        ).start()
        try:
            while True:
                try:
                    next_item = out.get(timeout=self.health_ping_seconds)
                except queue.Empty:
                    if not context.is_active() or self._shutdown_event.is_set():
                        break
                    yield pb.WorkItem(healthPing=pb.HealthPing())
                    continue
                if next_item is None:
                    break
                yield next_item
        finally:
            self._close_stream(stream)

    def _refuse(self, item: pb.WorkItem) -> bool:
        """Fails, instead of handing out, a work item that is too large to send or that
        was handed out ``max_deliveries`` times without a completion (caller holds the
        lock). True when the item was refused."""
        kind = item.WhichOneof("request")
        size = item.ByteSize()
        if kind == "orchestratorRequest":
            instance_id = item.orchestratorRequest.instanceId
            instance = self._instances.get(instance_id)
            if instance is None:
                return False
            count = self._orchestration_deliveries.get(instance_id, 0) + 1
            self._orchestration_deliveries[instance_id] = count
            if size > self.max_message_bytes:
                message = (
                    f"Orchestration '{instance_id}' needs a work item of {size} bytes, more "
                    f"than the message limit of {self.max_message_bytes} bytes; it was failed "
                    "rather than handed out."
                )
                self._fail_instance(instance, MESSAGE_LIMIT_ERROR_TYPE, message)
                return True
            if count > self.max_deliveries:
                message = (
                    f"Orchestration '{instance_id}': its work item was handed out "
                    f"{count - 1} times without a completion (a crash, a dropped stream or "
                    "an expired lease each time); it was failed rather than handed out again."
                )
                self._fail_instance(instance, POISON_ERROR_TYPE, message)
                return True
            return False
        if kind != "activityRequest":
            return False
        req = item.activityRequest
        key = (req.orchestrationInstance.instanceId, req.taskId, int(item.completionToken))
        ticket = self._activity_tickets.get(key)
        deliveries = 1
        if ticket is not None:
            ticket.deliveries += 1
            deliveries = ticket.deliveries
        if size > self.max_message_bytes:
            reason = (
                f"activity {req.name!r} needs a work item of {size} bytes, more than the "
                f"message limit of {self.max_message_bytes} bytes"
            )
            self._fail_activity(key, req, MESSAGE_LIMIT_ERROR_TYPE, reason)
            return True
        if deliveries > self.max_deliveries:
            reason = (
                f"activity {req.name!r} was handed out {deliveries - 1} times without a completion"
            )
            self._fail_activity(key, req, POISON_ERROR_TYPE, reason)
            return True
        return False

    def _fail_activity(
        self, key: tuple[str, int, int], req: pb.ActivityRequest, error_type: str, reason: str
    ) -> None:
        """Completes a refused activity as failed (caller holds the lock)."""
        _log.error("%s of orchestration %r: failed rather than handed out", reason, key[0])
        ticket = self._activity_tickets.pop(key, None)
        if ticket is not None:
            for token in ticket.tokens:
                self._activity_ticket_by_token.pop(token, None)
                self._release(token)
        instance = self._instances.get(key[0])
        if instance is None or self._is_terminal_status(instance.status):
            return
        details = pb.TaskFailureDetails(
            errorType=error_type, errorMessage=reason, isNonRetriable=True
        )
        InMemoryOrchestrationBackend.CompleteActivityTask(
            self,
            pb.ActivityResponse(instanceId=key[0], taskId=key[1], failureDetails=details),
            cast(grpc.ServicerContext, None),
        )

    def _lease(self, stream: _Stream, item: pb.WorkItem) -> None:
        """Records that ``stream`` holds ``item`` (caller holds the lock). Activity work
        items get a completion token of their own so that a result can be matched to
        its hand-out."""
        expires_at = time.monotonic() + self.work_item_lease_seconds
        kind = item.WhichOneof("request")
        if kind == "orchestratorRequest":
            token = item.completionToken
            lease = _Lease(
                token, "orchestration", stream.stream_id, expires_at,
                item.orchestratorRequest.instanceId,
            )  # fmt: skip
        elif kind == "activityRequest":
            req = item.activityRequest
            key = (req.orchestrationInstance.instanceId, req.taskId, int(item.completionToken))
            ticket = self._activity_tickets.get(key)
            if ticket is None:
                # Not recorded at scheduling time (should not happen); rebuild it.
                owner = self._instances.get(key[0])
                ticket = _ActivityTicket(
                    ActivityWorkItem(
                        instance_id=key[0],
                        name=req.name,
                        task_id=key[1],
                        input=req.input.value if req.HasField("input") else None,
                        completion_token=key[2],
                    ),
                    self._executions.current(owner) if owner is not None else 0,
                )
                self._activity_tickets[key] = ticket
            ticket.queued = False
            token = f"act-{next(self._activity_token_ids)}"
            ticket.tokens.add(token)
            self._activity_ticket_by_token[token] = ticket
            item.completionToken = token
            lease = _Lease(token, "activity", stream.stream_id, expires_at, key[0], key)
        elif kind in ("entityRequestV2", "entityRequest"):
            target = (
                item.entityRequestV2.instanceId
                if kind == "entityRequestV2"
                else item.entityRequest.instanceId
            )
            token = item.completionToken
            lease = _Lease(token, "entity", stream.stream_id, expires_at, target)
        else:
            return
        self._leases[token] = lease
        stream.tokens.add(token)

    def _close_stream(self, stream: _Stream) -> None:
        with self._lock:
            if stream.closed:
                return
            stream.closed = True
            self._streams.pop(stream.stream_id, None)
            tokens = list(stream.tokens)
            if tokens:
                _log.warning(
                    "work item stream %s closed with %d unfinished work item(s); "
                    "handing them to the next worker",
                    stream.stream_id,
                    len(tokens),
                )
            for token in tokens:
                self._requeue(token)

    def _release(self, token: str) -> _Lease | None:
        """Forgets the lease of ``token`` (caller holds the lock)."""
        lease = self._leases.pop(token, None)
        if lease is not None:
            stream = self._streams.get(lease.stream_id)
            if stream is not None:
                stream.tokens.discard(token)
        return lease

    def _requeue(self, token: str) -> None:
        """Puts the work item leased under ``token`` back in its queue (caller holds the
        lock). Does nothing if it was completed meanwhile."""
        lease = self._release(token)
        if lease is None:
            return
        if lease.kind == "orchestration":
            self._requeue_orchestration(lease.target_id, token)
        elif lease.kind == "activity":
            ticket = self._activity_ticket_by_token.get(token)
            if ticket is not None and not ticket.queued:
                ticket.queued = True
                self._activity_queue.appendleft(ticket.item)
                self._work_available.set()
        else:
            self._requeue_entity(lease.target_id, token)

    def _requeue_unleased(self, item: pb.WorkItem) -> None:
        """Requeues a work item that came out for a stream that had already closed."""
        stream = _Stream(-1)
        self._lease(stream, item)
        for token in list(stream.tokens):
            self._requeue(token)

    def _requeue_orchestration(self, instance_id: str, token: str) -> None:
        instance = self._instances.get(instance_id)
        if (
            instance is None
            or str(instance.completion_token) != token
            or instance_id not in self._orchestration_in_flight
        ):
            return
        # As upstream's AbandonTaskOrchestratorWorkItem, plus a new completion token so
        # that a late completion from the previous holder is recognised as stale.
        instance.pending_events = list(instance.dispatched_events) + list(instance.pending_events)
        instance.dispatched_events.clear()
        instance.completion_token = self._next_completion_token
        self._next_completion_token += 1
        self._orchestration_in_flight.discard(instance_id)
        if not self._is_terminal_status(instance.status):
            self._enqueue_orchestration(instance_id)

    def _requeue_entity(self, entity_id: str, token: str) -> None:
        entity = self._entities.get(entity_id)
        if entity is None or str(entity.completion_token) != token:
            return
        entity.pending_operations = list(entity.dispatched_operations) + list(
            entity.pending_operations
        )
        entity.dispatched_operations.clear()
        entity.completion_token = self._next_completion_token
        self._next_completion_token += 1
        self._entity_in_flight.discard(entity_id)
        self._enqueue_entity(entity_id)

    def _enqueue_orchestration(self, instance_id: str) -> None:
        # An instance whose work item is in flight is not queued: its new events wait in
        # ``pending_events`` and the work item's end queues it (upstream's completion
        # when events are pending, or :meth:`_requeue_orchestration`, abandon, rewind).
        # Upstream queues it, and a stream that finds it at the head puts it back and
        # stops looking, so the instances behind it wait for the next signal or the
        # idle wait.
        if instance_id in self._orchestration_in_flight:
            return
        # Upstream signals only when the instance was not queued yet.
        super()._enqueue_orchestration(instance_id)
        self._work_available.set()

    def _enqueue_entity(self, entity_id: str) -> None:
        super()._enqueue_entity(entity_id)
        self._work_available.set()

    def _process_schedule_task_action(
        self, instance: OrchestrationInstance, action: pb.OrchestratorAction
    ) -> None:
        super()._process_schedule_task_action(instance, action)
        # Upstream just appended the work item; remember it so it can be requeued as is.
        item = self._activity_queue[-1]
        self._activity_tickets[_activity_key(item)] = _ActivityTicket(
            item, self._executions.current(instance)
        )

    def _process_create_timer_action(
        self, instance: OrchestrationInstance, action: pb.OrchestratorAction
    ) -> None:
        """As upstream (a TimerCreated event; a TimerFired event when due), on the shared
        timer thread, and only into the execution that created the timer."""
        timer_id = action.id
        fire_at = action.createTimer.fireAt.ToDatetime(tzinfo=UTC)
        instance.history.append(helpers.new_timer_created_event(timer_id, fire_at))
        if instance.status == pb.ORCHESTRATION_STATUS_PENDING:
            instance.status = pb.ORCHESTRATION_STATUS_RUNNING
        instance_id, execution = instance.instance_id, self._executions.current(instance)

        def fire() -> None:
            with self._lock:
                current = self._current_execution(instance_id, execution)
                if current is None:
                    return
                current.pending_events.append(helpers.new_timer_fired_event(timer_id, fire_at))
                current.last_updated_at = datetime.now(UTC)
                self._enqueue_orchestration(instance_id)

        self._timers.schedule(fire_at.timestamp(), fire)

    def _watch_sub_orchestration(
        self, parent_instance_id: str, sub_instance_id: str, task_id: int
    ) -> None:
        """As upstream (the child's end becomes the parent's SubOrchestrationInstance-
        Completed or -Failed event), delivered only to the parent's execution that
        created the child."""
        parent = self._instances.get(parent_instance_id)
        if parent is None:
            return
        execution = self._executions.current(parent)

        def watch() -> None:
            sub = self._wait_for_state(sub_instance_id, self._is_terminal_status_check, None)
            with self._lock:
                current = self._current_execution(parent_instance_id, execution)
                if sub is None or current is None:
                    return
                if sub.status == pb.ORCHESTRATION_STATUS_COMPLETED:
                    event = helpers.new_sub_orchestration_completed_event(task_id, sub.output)
                else:
                    message = (
                        sub.failure_details.errorMessage
                        if sub.failure_details
                        else "Sub-orchestration failed"
                    )
                    event = helpers.new_sub_orchestration_failed_event(task_id, Exception(message))
                current.pending_events.append(event)
                current.last_updated_at = datetime.now(UTC)
                self._enqueue_orchestration(parent_instance_id)

        threading.Thread(target=watch, name="stepway-backend-child", daemon=True).start()

    def _current_execution(self, instance_id: str, execution: int) -> OrchestrationInstance | None:
        """The instance, if ``execution`` is still its current one and it has not ended
        (the caller holds the lock). An event for an earlier execution is dropped, as the
        Durable Task Framework's backends drop it (executions.py)."""
        current = self._instances.get(instance_id)
        if current is None or self._is_terminal_status(current.status):
            return None
        if self._executions.current(current) != execution:
            _log.info("dropping an event of an earlier execution of %r", instance_id)
            return None
        return current

    def _process_complete_orchestration_action(
        self, instance: OrchestrationInstance, complete_action: pb.CompleteOrchestrationAction
    ) -> None:
        if complete_action.orchestrationStatus != pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW:
            super()._process_complete_orchestration_action(instance, complete_action)
            return
        # What arrived while this work item ran and answers something this execution
        # scheduled is carried into the next one by upstream; it belongs to this one.
        kept = [
            e for e in instance.pending_events if e.WhichOneof("eventType") not in EXECUTION_EVENTS
        ]
        if len(kept) != len(instance.pending_events):
            _log.info(
                "dropping %d event(s) of the execution of %r that continued as new",
                len(instance.pending_events) - len(kept),
                instance.instance_id,
            )
            instance.pending_events[:] = kept
        self._executions.renew(instance)
        super()._process_complete_orchestration_action(instance, complete_action)

    # ------------------------------------------------------------------ retention

    def _notify_waiters(self, instance_id: str) -> None:
        """Upstream's, called (under the lock) whenever an instance's state changed; a
        finished instance is counted against ``max_finished_instances`` here."""
        super()._notify_waiters(instance_id)
        instance = self._instances.get(instance_id)
        if instance is None or not self._is_terminal_status(instance.status):
            return
        finished = self._finished
        finished[instance_id] = None
        finished.move_to_end(instance_id)
        while len(finished) > self.max_finished_instances:
            oldest, _ = finished.popitem(last=False)
            kept = self._instances.get(oldest)
            if kept is None or not self._is_terminal_status(kept.status):
                continue  # purged already, or running again (a restart, a rerun)
            if oldest in self._orchestration_in_flight or oldest in self._orchestration_queue_set:
                finished[oldest] = None  # still being handed out: purged on a later turn
                break
            del self._instances[oldest]
            self._state_waiters.pop(oldest, None)
            self._forget(oldest)

    def PurgeInstances(
        self, request: pb.PurgeInstancesRequest, context: grpc.ServicerContext
    ) -> pb.PurgeInstancesResponse:
        """Upstream's, and what this class keeps of each purged instance goes too."""
        with self._lock:
            before = set(self._instances)
            response = super().PurgeInstances(request, context)
            for instance_id in before.difference(self._instances):
                self._finished.pop(instance_id, None)
                self._forget(instance_id)
            return response

    def _forget(self, instance_id: str) -> None:
        """Drop this class's own bookkeeping of a purged instance (caller holds the lock)."""
        self._orchestration_deliveries.pop(instance_id, None)
        self._executions.forget(instance_id)

    # ------------------------------------------------------------------ completions

    def CompleteOrchestratorTask(
        self, request: pb.OrchestratorResponse, context: grpc.ServicerContext
    ) -> pb.CompleteTaskResponse:
        with self._lock:
            self._release(request.completionToken)
            instance = self._instances.get(request.instanceId)
            if instance is None or str(instance.completion_token) != request.completionToken:
                # Upstream would also clear the in-flight mark, which belongs to whoever
                # holds the current hand-out; leave it alone.
                _log.warning("dropping stale orchestration completion for %r", request.instanceId)
                return pb.CompleteTaskResponse()
            ends_execution = any(a.HasField("completeOrchestration") for a in request.actions)
            # +2: the orchestratorCompleted bookend and, at most, executionCompleted.
            projected = (
                len(instance.history) + len(instance.dispatched_events) + len(request.actions) + 2
            )
            self._orchestration_deliveries.pop(request.instanceId, None)
            if projected > self.max_history_events and not ends_execution:
                self._fail_instance(
                    instance,
                    HISTORY_LIMIT_ERROR_TYPE,
                    f"Orchestration '{instance.instance_id}' would grow to {projected} history "
                    f"events, more than the embedded backend's limit of "
                    f"{self.max_history_events}; it was failed rather than left running. "
                    "Bound the history with continue_as_new or sub-orchestrations.",
                )
                return pb.CompleteTaskResponse()
            response = super().CompleteOrchestratorTask(request, context)
            # Events pending now came while the work item was in flight (its hand-out took
            # every earlier one). Upstream queues them on completion unless the instance
            # is suspended (or over); they are queued then too, as upstream had queued
            # them when they came (a suspended orchestration is handed its events, a
            # termination among them)
            if instance.pending_events and not self._is_terminal_status(instance.status):
                self._enqueue_orchestration(request.instanceId)
            return response

    def _fail_instance(
        self, instance: OrchestrationInstance, error_type: str, message: str
    ) -> None:
        """Ends ``instance`` FAILED with ``message`` (caller holds the lock). The events
        dispatched to it are kept in its history; the step's actions are not applied."""
        now = datetime.now(UTC)
        self._orchestration_deliveries.pop(instance.instance_id, None)
        instance.history.extend(instance.dispatched_events)
        instance.dispatched_events.clear()
        instance.pending_events.clear()
        instance.status = pb.ORCHESTRATION_STATUS_FAILED
        instance.failure_details = pb.TaskFailureDetails(
            errorType=error_type, errorMessage=message, isNonRetriable=True
        )
        instance.completed_at = now
        instance.last_updated_at = now
        instance.completion_token = self._next_completion_token
        self._next_completion_token += 1
        instance.history.append(helpers.new_orchestrator_completed_event())
        instance.history.append(
            helpers.new_execution_completed_event(
                instance.status, instance.output, instance.failure_details
            )
        )
        self._orchestration_queue_set.discard(instance.instance_id)
        self._orchestration_in_flight.discard(instance.instance_id)
        _log.error("%s", instance.failure_details.errorMessage)
        self._notify_waiters(instance.instance_id)

    def CompleteActivityTask(
        self, request: pb.ActivityResponse, context: grpc.ServicerContext
    ) -> pb.CompleteTaskResponse:
        with self._lock:
            self._release(request.completionToken)
            ticket = self._activity_ticket_by_token.get(request.completionToken)
            if ticket is None:
                _log.info(
                    "dropping result for activity %s of %r: already completed or unknown",
                    request.taskId,
                    request.instanceId,
                )
                return pb.CompleteTaskResponse()
            # First result wins: forget every hand-out of this activity.
            self._activity_tickets.pop(_activity_key(ticket.item), None)
            for token in ticket.tokens:
                self._activity_ticket_by_token.pop(token, None)
                self._release(token)
            if ticket.queued:
                with contextlib.suppress(ValueError):
                    self._activity_queue.remove(ticket.item)
            instance = self._instances.get(request.instanceId)
            if instance is not None and self._is_terminal_status(instance.status):
                # Upstream would queue a terminal instance for another replay.
                return pb.CompleteTaskResponse()
            if instance is not None and self._executions.current(instance) != ticket.execution:
                _log.info(
                    "dropping result for activity %s of an earlier execution of %r",
                    request.taskId,
                    request.instanceId,
                )
                return pb.CompleteTaskResponse()
            return super().CompleteActivityTask(request, context)

    def CompleteEntityTask(
        self, request: pb.EntityBatchResult, context: grpc.ServicerContext
    ) -> pb.CompleteTaskResponse:
        with self._lock:
            self._release(request.completionToken)
            return super().CompleteEntityTask(request, context)

    def AbandonTaskActivityWorkItem(
        self, request: pb.AbandonActivityTaskRequest, context: grpc.ServicerContext
    ) -> pb.AbandonActivityTaskResponse:
        with self._lock:
            self._requeue(request.completionToken)
        return pb.AbandonActivityTaskResponse()

    def AbandonTaskOrchestratorWorkItem(
        self, request: pb.AbandonOrchestrationTaskRequest, context: grpc.ServicerContext
    ) -> pb.AbandonOrchestrationTaskResponse:
        with self._lock:
            self._requeue(request.completionToken)
        return pb.AbandonOrchestrationTaskResponse()

    def AbandonTaskEntityWorkItem(
        self, request: pb.AbandonEntityTaskRequest, context: grpc.ServicerContext
    ) -> pb.AbandonEntityTaskResponse:
        with self._lock:
            self._requeue(request.completionToken)
        return pb.AbandonEntityTaskResponse()

    # ------------------------------------------------------------------ waits

    def _await_state(
        self,
        instance_id: str,
        predicate: Callable[[OrchestrationInstance], bool],
        timeout: float | None,
        context: grpc.ServicerContext | None = None,
    ) -> OrchestrationInstance | None:
        """Waits until ``predicate`` holds for the instance. ``timeout=None`` waits without
        a deadline. Gives up when the backend shuts down or the caller's RPC ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            instance = self._instances.get(instance_id)
            if instance is not None and predicate(instance):
                return instance
            waiter = StateWaiter(predicate=predicate)
            self._state_waiters.setdefault(instance_id, []).append(waiter)
        try:
            while True:
                wait = _WAIT_SLICE_SECONDS
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        return None
                if waiter.event.wait(wait):
                    return waiter.result
                if self._shutdown_event.is_set():
                    return None
                if context is not None and not context.is_active():
                    return None
        finally:
            if not waiter.event.is_set():
                with self._lock:
                    waiters = self._state_waiters.get(instance_id)
                    if waiters and waiter in waiters:
                        waiters.remove(waiter)
                        if not waiters:
                            self._state_waiters.pop(instance_id, None)

    def _wait_for_state(
        self,
        instance_id: str,
        predicate: Callable[[OrchestrationInstance], bool],
        timeout: float | None,
    ) -> OrchestrationInstance | None:
        # Upstream turns timeout=None into 30 s; its sub-orchestration watcher passes
        # None and then never completes the parent of a longer child.
        return self._await_state(instance_id, predicate, timeout)

    def _wait_rpc(
        self,
        request: pb.GetInstanceRequest,
        context: grpc.ServicerContext,
        predicate: Callable[[OrchestrationInstance], bool],
        what: str,
    ) -> pb.GetInstanceResponse:
        remaining = context.time_remaining()
        instance = self._await_state(request.instanceId, predicate, remaining, context)
        if instance is None:
            with self._lock:
                exists = request.instanceId in self._instances
            if exists and context.is_active():
                context.abort(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"Timed out waiting for instance '{request.instanceId}' to {what}",
                )
            return pb.GetInstanceResponse(exists=False)
        with self._lock:
            return self._build_instance_response(instance, request.getInputsAndOutputs)

    def WaitForInstanceStart(
        self, request: pb.GetInstanceRequest, context: grpc.ServicerContext
    ) -> pb.GetInstanceResponse:
        return self._wait_rpc(
            request, context, lambda i: i.status != pb.ORCHESTRATION_STATUS_PENDING, "start"
        )

    def WaitForInstanceCompletion(
        self, request: pb.GetInstanceRequest, context: grpc.ServicerContext
    ) -> pb.GetInstanceResponse:
        return self._wait_rpc(request, context, self._is_terminal_status_check, "complete")

    # ------------------------------------------------------------------ introspection

    def leased_work_items(self) -> dict[str, str]:
        """Token -> kind of every work item currently handed out (for tests and ops)."""
        with self._lock:
            return {token: lease.kind for token, lease in self._leases.items()}


_SERVER_OPTIONS: list[tuple[str, Any]] = [
    # Find dead peers on half-open connections so their streams close and their work
    # items are requeued; tolerate clients that ping often.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    # the same limits as every Stepway client and worker (engine.adapters.backend.connect)
    ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_BYTES),
]


class EmbeddedBackend:
    """Hosts :class:`StepwayInMemoryBackend` on a gRPC server that Stepway creates.

    ``port=0`` picks a free port; :attr:`address` is ``host:port`` once started. State is
    in memory only: runs in flight do not survive :meth:`stop` or a process restart.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        max_workers: int = DEFAULT_MAX_WORKERS,
        *,
        max_history_events: int = DEFAULT_MAX_HISTORY_EVENTS,
        work_item_lease_seconds: float = DEFAULT_WORK_ITEM_LEASE_SECONDS,
        health_ping_seconds: float = DEFAULT_HEALTH_PING_SECONDS,
        max_message_bytes: int = GRPC_MAX_MESSAGE_BYTES,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
        max_finished_instances: int = DEFAULT_MAX_FINISHED_INSTANCES,
    ) -> None:
        if max_workers < 16:
            raise ValueError("max_workers must be at least 16")
        self.host = host
        self.port = port
        self.max_workers = max_workers
        self.servicer = StepwayInMemoryBackend(
            max_history_events=max_history_events,
            work_item_lease_seconds=work_item_lease_seconds,
            health_ping_seconds=health_ping_seconds,
            max_message_bytes=max_message_bytes,
            max_deliveries=max_deliveries,
            max_finished_instances=max_finished_instances,
        )
        self._server: grpc.Server | None = None
        self._bound_port: int | None = None

    @property
    def address(self) -> str:
        """``host:port`` to give workers and clients; only valid after :meth:`start`."""
        if self._bound_port is None:
            raise RuntimeError("the embedded backend is not started")
        return f"{self.host}:{self._bound_port}"

    @property
    def started(self) -> bool:
        return self._server is not None

    def start(self) -> str:
        """Starts serving and returns :attr:`address`."""
        if self._server is not None:
            return self.address
        server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=self.max_workers, thread_name_prefix="stepway-backend-rpc"
            ),
            options=_SERVER_OPTIONS,
        )
        add_servicer = cast(
            Callable[[StepwayInMemoryBackend, grpc.Server], None],
            stubs.add_TaskHubSidecarServiceServicer_to_server,
        )
        add_servicer(self.servicer, server)
        bound = server.add_insecure_port(f"{self.host}:{self.port}")
        if bound == 0:
            raise OSError(f"cannot listen on {self.host}:{self.port}")
        self.servicer._shutdown_event.clear()
        server.start()
        self.servicer.start_lease_sweeper()
        self._server = server
        self._bound_port = bound
        _log.info("embedded durable backend listening on %s", self.address)
        return self.address

    def stop(self, grace: float | None = 1.0) -> None:
        """Stops serving. All state is lost."""
        server, self._server = self._server, None
        self.servicer.shutdown()
        if server is not None:
            server.stop(grace).wait()

    def wait_for_termination(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()

    def __enter__(self) -> EmbeddedBackend:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.adapters.backend.embedded``: run the backend in its own process."""
    parser = argparse.ArgumentParser(
        prog="python -m engine.adapters.backend.embedded",
        description="Run Stepway's embedded durable backend (in memory; runs in flight "
        "do not survive a restart of this process).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4001, help="0 picks a free port")
    parser.add_argument("--max-workers", type=int, default=DEFAULT_MAX_WORKERS)
    parser.add_argument("--max-history-events", type=int, default=DEFAULT_MAX_HISTORY_EVENTS)
    parser.add_argument("--lease-seconds", type=float, default=DEFAULT_WORK_ITEM_LEASE_SECONDS)
    parser.add_argument(
        "--max-finished-instances",
        type=int,
        default=DEFAULT_MAX_FINISHED_INSTANCES,
        help="finished orchestrations kept; the oldest beyond it are purged",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    backend = EmbeddedBackend(
        args.host,
        args.port,
        args.max_workers,
        max_history_events=args.max_history_events,
        work_item_lease_seconds=args.lease_seconds,
        max_finished_instances=args.max_finished_instances,
    )
    address = backend.start()
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # The first stdout line is the contract with whoever started us (tests, `stepway dev`).
    print(f"listening on {address}", flush=True)
    print(
        "note: the embedded backend keeps runs in memory; runs in flight do not survive "
        "a restart of this process",
        file=sys.stderr,
        flush=True,
    )
    while not stopping.wait(0.5):
        pass
    backend.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
