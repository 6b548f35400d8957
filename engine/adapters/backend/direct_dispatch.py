"""Work items run the moment the stream delivers them: no detour through asyncio.

durabletask's worker reads its work-item stream on a reader thread and forwards every
item to its asyncio loop: the reader puts it on a ``queue.Queue``, a thread of the loop's
default executor blocked in ``Queue.get`` wakes and hands it to the loop
(``call_soon_threadsafe``), the loop puts it on an ``asyncio.Queue``, a consumer task
takes it and runs the work item in the worker's thread pool (``run_in_executor``). Four
threads take the item in turn, each waking the next and waiting for the GIL. For a step
of a workflow that is two work items (the orchestrator's and the activity's), and on the
embedded backend this forwarding was the largest part of a built-in step's latency after
the step's own work: ``bench.trace_steps http`` measured 0.5-0.6 ms from the backend
handing a work item out to the worker's loop submitting it, each way, of a 4-5 ms step.

:class:`DirectDispatchMixin` wraps the stream the worker reads (``_response_stream``, set
by durabletask's run loop after each ``GetWorkItems`` call) so that the reader thread
itself submits orchestrator and activity work items to thread pools; every other item
(health pings, entity batches) still goes the loop's way. The loop
keeps its part: connecting, reconnecting with back-off, and noticing a silent stream,
for which the wrapper passes it a health ping when it has passed it nothing for
``keepalive_seconds`` (durabletask counts a stream that yields nothing for
``silent_disconnect_timeout_seconds`` as dead and reconnects, which would requeue the
work items in flight). A work item that raises is abandoned, and no more work items of
a kind run at once than the worker's ``ConcurrencyOptions`` allow (the rest wait without
holding a thread), as with durabletask.

Each kind has its own pool, with as many threads as its limit allows work items
(``maximum_concurrent_orchestration_work_items``,
``maximum_concurrent_activity_work_items``; a pool starts its threads as work items
come): an activity may hold its thread for minutes (an HTTP call waiting for its answer,
an INLINE waiting for an evaluator process), and the orchestrations' work items (every
step of every run, a terminate) must never wait behind them. One pool of durabletask's
``maximum_thread_pool_workers`` (CPUs + 4) for both let six slow HTTP calls stall every
run of the process.

Completions need a stub on the channel the stream came from, and durabletask keeps the
channel it creates to itself, so the mixin is used where Stepway passes the worker its
own channel: the embedded backend (:mod:`engine.adapters.backend.connect`). A worker that
owns no channel of Stepway's keeps durabletask's path unchanged.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import durabletask.internal.orchestrator_service_pb2 as pb
import durabletask.internal.orchestrator_service_pb2_grpc as stubs
import grpc

#: how long the stream may pass durabletask's loop nothing before a health ping is passed
#: instead (well under durabletask's 120 s silent-disconnect default)
KEEPALIVE_SECONDS = 10.0


class _DirectStream:
    """The work-item stream as durabletask's reader thread iterates it."""

    def __init__(
        self,
        stream: Any,
        dispatch: Callable[[pb.WorkItem], bool],
        keepalive_seconds: float,
        stopping: Callable[[], bool],
    ) -> None:
        self._stream = stream
        self._dispatch = dispatch
        self._keepalive = keepalive_seconds
        self._stopping = stopping

    def __iter__(self) -> Iterator[pb.WorkItem]:
        passed = time.monotonic()
        try:
            for item in self._stream:
                if not self._dispatch(item):
                    passed = time.monotonic()
                    yield item
                elif time.monotonic() - passed >= self._keepalive:
                    passed = time.monotonic()
                    yield pb.WorkItem(healthPing=pb.HealthPing())
        except grpc.RpcError as error:
            # the worker's stop() cancels the stream: the stream ends, which durabletask's
            # loop takes as a close (it logged the cancellation as an error in the stream)
            if self._stopping() and error.code() == grpc.StatusCode.CANCELLED:
                return
            raise

    def cancel(self) -> Any:
        return self._stream.cancel()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_Job = tuple[Callable[..., None], Callable[..., None], Any, Any]
"""A work item to run: (execute, abandon, request, completion token)."""


class _KindLimit:
    """At most ``limit`` work items of one kind run at once (durabletask's
    ``maximum_concurrent_*_work_items``); the rest wait in arrival order without holding
    a thread."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiting: deque[_Job] = deque()
        self._lock = threading.Lock()

    def enter(self, job: _Job) -> bool:
        """True: run ``job`` now; False: it waits for a running one to leave."""
        with self._lock:
            if self._free > 0:
                self._free -= 1
                return True
            self._waiting.append(job)
            return False

    def leave(self) -> _Job | None:
        """The next waiting job, to run in the place of the one that left, or None."""
        with self._lock:
            if self._waiting:
                return self._waiting.popleft()
            self._free += 1
            return None


class DirectDispatchMixin:
    """Mixed into a ``TaskHubGrpcWorker`` (before it) that is given ``channel``:
    orchestrator and activity work items run on the reader thread's hand-off to their
    kind's thread pool (see the module docstring)."""

    def __init__(
        self,
        *args: Any,
        channel: grpc.Channel | None = None,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, channel=channel, **kwargs)  # type: ignore[call-arg]
        self._direct_channel = channel
        self._direct_stub: Any = (
            None if channel is None else stubs.TaskHubSidecarServiceStub(channel)  # type: ignore[no-untyped-call]
        )
        self._direct_keepalive = keepalive_seconds
        self._direct_stream: Any = None
        worker: Any = self
        options = worker._concurrency_options
        orchestrations = options.maximum_concurrent_orchestration_work_items
        activities = options.maximum_concurrent_activity_work_items
        # a pool per kind, a thread for each work item its limit lets run (threads start
        # as work items come): activities never hold the orchestrations' threads
        self._direct_pools = {
            "orchestratorRequest": ThreadPoolExecutor(
                max_workers=orchestrations, thread_name_prefix="DurableTaskDirect-orchestration"
            ),
            "activityRequest": ThreadPoolExecutor(
                max_workers=activities, thread_name_prefix="DurableTaskDirect-activity"
            ),
        }
        #: the work items run directly: request field -> the worker's execute and abandon
        #: methods (looked up per item), the kind's limit and its pool
        self._direct_kinds = {
            "orchestratorRequest": (
                "_execute_orchestrator",
                "_cancel_orchestrator",
                _KindLimit(orchestrations),
                self._direct_pools["orchestratorRequest"],
            ),
            "activityRequest": (
                "_execute_activity",
                "_cancel_activity",
                _KindLimit(activities),
                self._direct_pools["activityRequest"],
            ),
        }

    @property
    def _response_stream(self) -> Any:
        return self._direct_stream

    @_response_stream.setter
    def _response_stream(self, stream: Any) -> None:
        if stream is not None and self._direct_stub is not None:
            worker: Any = self
            stream = _DirectStream(
                stream,
                self._dispatch_directly,
                self._direct_keepalive,
                worker._shutdown.is_set,
            )
        self._direct_stream = stream

    def _dispatch_directly(self, item: pb.WorkItem) -> bool:
        """Submits an orchestrator or activity work item to its kind's pool (or queues
        it behind its kind's limit); False for any other item (the loop takes it). An item
        that arrives once the worker is stopping is left: the backend hands a stream's
        unfinished items out again when the stream ends."""
        worker: Any = self
        if worker._shutdown.is_set():
            return True
        kind = item.WhichOneof("request") or ""
        handling = self._direct_kinds.get(kind)
        if handling is None:
            return False
        execute, abandon, limit, pool = handling
        job: _Job = (
            getattr(self, execute),
            getattr(self, abandon),
            getattr(item, kind),
            item.completionToken,
        )
        if limit.enter(job):
            pool.submit(self._run, limit, job)
        return True

    def _run(self, limit: _KindLimit, job: _Job | None) -> None:
        """Runs ``job``, then the jobs of its kind that waited for it, on this thread."""
        while job is not None:
            self._run_one(*job)
            job = limit.leave()

    def _run_one(
        self,
        run: Callable[..., None],
        abandon: Callable[..., None],
        request: Any,
        token: Any,
    ) -> None:
        stub = self._direct_stub
        try:
            run(request, stub, token)
        except Exception as ex:
            worker: Any = self
            worker._logger.error(
                f"Uncaught error while processing work item, item will be abandoned: {ex}"
            )
            try:
                abandon(request, stub, token)
            except Exception as abandon_error:
                worker._logger.warning(f"Could not abandon the work item: {abandon_error}")

    def stop(self) -> None:
        super().stop()  # type: ignore[misc]
        # an item the reader submits in the last moment is refused by the shut-down pool
        for pool in self._direct_pools.values():
            pool.shutdown(wait=True)
        if self._direct_channel is not None:
            self._direct_channel.close()  # the worker was given it by make_worker
