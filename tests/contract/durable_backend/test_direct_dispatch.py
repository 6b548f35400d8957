"""Direct dispatch (engine/adapters/backend/direct_dispatch.py): the embedded backend's
worker runs work items as its stream delivers them, and durabletask's run loop still
sees a live stream, abandons nothing it should not and hands back what fails."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient
from durabletask.grpc_options import GrpcWorkerResiliencyOptions
from durabletask.internal.shared import get_grpc_channel
from durabletask.worker import ConcurrencyOptions
from google.protobuf import empty_pb2

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import (
    EmbeddedWorker,
    channel_options,
    make_worker,
    register,
    start_worker,
    stop_worker,
)
from engine.adapters.backend.embedded import EmbeddedBackend

_CALLS: dict[str, int] = {}
_LOCK = threading.Lock()


def count(_: task.ActivityContext, key: str) -> str:
    with _LOCK:
        _CALLS[key] = _CALLS.get(key, 0) + 1
    return key


def many(ctx: task.OrchestrationContext, n: int) -> Generator[task.Task[Any], Any, int]:
    for i in range(n):
        yield ctx.call_activity(count, input=f"{ctx.instance_id}-{i}")
    return n


@pytest.fixture
def quiet_backend() -> Iterator[EmbeddedBackend]:
    """A backend that pings an idle stream only after a minute: a busy worker's stream
    is never pinged by it."""
    b = EmbeddedBackend(health_ping_seconds=60)
    b.start()
    yield b
    b.stop(grace=0)


def test_a_busy_stream_is_not_taken_for_a_silent_one(quiet_backend: EmbeddedBackend) -> None:
    # durabletask's loop counts a stream that passed it nothing for 0.5 s as dead and
    # reconnects; every work item here goes around the loop, so without the worker's own
    # keep-alive the loop would reconnect (and the backend requeue the work in flight)
    config = BackendConfig.embedded(quiet_backend.address)
    worker = EmbeddedWorker(
        host_address=config.address,
        channel=get_grpc_channel(config.address, False, None, channel_options(config)),
        channel_options=channel_options(config),
        resiliency_options=GrpcWorkerResiliencyOptions(silent_disconnect_timeout_seconds=0.5),
        keepalive_seconds=0.1,
    )
    register(worker, "all", {"many": many}, {"count": count})
    client = TaskHubGrpcClient(host_address=config.address)
    start_worker(worker)
    try:
        ids = [
            client.schedule_new_orchestration(many, input=150, instance_id=f"busy-{i}")
            for i in range(2)
        ]
        for instance_id in ids:
            state = client.wait_for_orchestration_completion(instance_id, timeout=60)
            assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
        # one stream for the whole time: no reconnect, so no work item ran twice
        assert next(quiet_backend.servicer._stream_ids) == 2
        assert all(_CALLS[f"{i}-{k}"] == 1 for i in ids for k in range(150))
    finally:
        stop_worker(worker)
        client.close()


def test_a_work_item_that_raises_is_abandoned_and_runs_again(
    backend: EmbeddedBackend, config: BackendConfig, client: TaskHubGrpcClient
) -> None:
    worker = make_worker(config)
    assert isinstance(worker, EmbeddedWorker)
    register(worker, "all", {"many": many}, {"count": count})
    execute = worker._execute_activity
    failed: list[str] = []

    def flaky(req: Any, stub: Any, token: Any) -> None:
        if not failed:  # the first activity work item fails outside the activity
            failed.append(req.orchestrationInstance.instanceId)
            raise RuntimeError("the worker broke before it could run the activity")
        execute(req, stub, token)

    worker._execute_activity = flaky  # type: ignore[method-assign]
    start_worker(worker)
    try:
        client.schedule_new_orchestration(many, input=3, instance_id="flaky")
        state = client.wait_for_orchestration_completion("flaky", timeout=30)
        assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
        assert state.serialized_output == "3"
        assert failed == ["flaky"]
        # abandoned, handed out again, run once
        assert [_CALLS[f"flaky-{k}"] for k in range(3)] == [1, 1, 1]
    finally:
        stop_worker(worker)


def test_stop_waits_for_the_work_in_flight_and_closes_the_worker_channel(
    backend: EmbeddedBackend, config: BackendConfig, client: TaskHubGrpcClient
) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(_: task.ActivityContext, value: int) -> int:
        entered.set()
        release.wait(10)
        return value

    def one(ctx: task.OrchestrationContext, _: Any) -> Generator[task.Task[Any], Any, int]:
        return (yield ctx.call_activity(slow, input=5))

    worker = make_worker(config)
    register(worker, "all", {"one": one}, {"slow": slow})
    start_worker(worker)
    client.schedule_new_orchestration(one, instance_id="in-flight")
    assert entered.wait(10)
    stopped = threading.Event()
    stopper = threading.Thread(target=lambda: (stop_worker(worker), stopped.set()))
    stopper.start()
    assert not stopped.wait(0.5)  # the activity is still running
    release.set()
    stopper.join(30)
    assert stopped.is_set()
    with pytest.raises(ValueError, match="closed channel"):
        worker._direct_stub.Hello(empty_pb2.Empty())  # type: ignore[attr-defined]


def test_no_more_activities_run_at_once_than_the_worker_allows(
    backend: EmbeddedBackend, config: BackendConfig, client: TaskHubGrpcClient
) -> None:
    running, most = [0], [0]
    lock = threading.Lock()

    def overlapping(_: task.ActivityContext, value: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)  # long enough for the others to start, were they allowed to
        with lock:
            running[0] -= 1
        return value

    def fan_out(ctx: task.OrchestrationContext, n: int) -> Generator[task.Task[Any], Any, int]:
        results = yield task.when_all([ctx.call_activity(overlapping, input=i) for i in range(n)])
        return sum(results)

    for limit in (2, 8):  # the worker's pool has more threads than 2
        running[0] = most[0] = 0
        worker = make_worker(
            config,
            concurrency_options=ConcurrencyOptions(
                maximum_concurrent_activity_work_items=limit,
                maximum_thread_pool_workers=8,
            ),
        )
        register(worker, "all", {"fan_out": fan_out}, {"overlapping": overlapping})
        start_worker(worker)
        try:
            instance = client.schedule_new_orchestration(fan_out, input=8)
            state = client.wait_for_orchestration_completion(instance, timeout=30)
            assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
            assert state.serialized_output == str(sum(range(8)))
        finally:
            stop_worker(worker)
        if limit == 2:
            assert most[0] == 2
        else:
            assert most[0] > 2  # the same fan-out overlaps more when allowed


def test_work_items_run_on_the_direct_pool_not_through_durabletasks_loop(
    backend: EmbeddedBackend, config: BackendConfig, client: TaskHubGrpcClient
) -> None:
    # guards the fast path against a durabletask upgrade that stops reading the stream
    # through the worker's _response_stream (the wrapper would then silently not apply)
    threads: list[str] = []
    orchestration_threads: list[str] = []

    def where(_: task.ActivityContext, value: int) -> int:
        threads.append(threading.current_thread().name)
        return value

    def twice(ctx: task.OrchestrationContext, _: Any) -> Generator[task.Task[Any], Any, int]:
        orchestration_threads.append(threading.current_thread().name)
        yield ctx.call_activity(where, input=1)
        return (yield ctx.call_activity(where, input=2))

    worker = make_worker(config)
    register(worker, "all", {"twice": twice}, {"where": where})
    start_worker(worker)
    try:
        instance = client.schedule_new_orchestration(twice)
        state = client.wait_for_orchestration_completion(instance, timeout=30)
        assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    finally:
        stop_worker(worker)
    # each kind on its own pool (activities never hold the orchestrations' threads)
    assert threads and all(name.startswith("DurableTaskDirect-activity") for name in threads), (
        threads
    )
    assert orchestration_threads and all(
        name.startswith("DurableTaskDirect-orchestration") for name in orchestration_threads
    ), orchestration_threads


def test_stopping_the_worker_logs_no_stream_error(
    backend: EmbeddedBackend,
    config: BackendConfig,
    client: TaskHubGrpcClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Ctrl-C on `stepway dev`: the stream the worker cancels itself is not an error
    worker = make_worker(config, logger=logging.getLogger("tests.direct_dispatch.worker"))
    register(worker, "all", {"many": many}, {"count": count})
    start_worker(worker)
    instance = client.schedule_new_orchestration(many, input=2, instance_id="stops-clean")
    state = client.wait_for_orchestration_completion(instance, timeout=30)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    with caplog.at_level(logging.WARNING):
        stop_worker(worker)
    assert not [r for r in caplog.records if "work item stream" in r.getMessage()]


def test_orchestrations_run_while_every_activity_thread_waits(
    backend: EmbeddedBackend, config: BackendConfig, client: TaskHubGrpcClient
) -> None:
    # activities that hold all their threads (slow HTTP calls, INLINEs waiting for an
    # evaluator process) leave the orchestrations' work items their own threads: another
    # orchestration runs to its end, and the blocked activities' queued fellows wait
    # without a thread
    release = threading.Event()
    holding = threading.Semaphore(0)

    def hold(_: task.ActivityContext, value: int) -> int:
        holding.release()
        release.wait(30)
        return value

    def fan_out(ctx: task.OrchestrationContext, n: int) -> Generator[task.Task[Any], Any, int]:
        results = yield task.when_all([ctx.call_activity(hold, input=i) for i in range(n)])
        return sum(results)

    def alone(ctx: task.OrchestrationContext, _: Any) -> str:
        return "done"

    worker = make_worker(
        config,
        concurrency_options=ConcurrencyOptions(
            maximum_concurrent_activity_work_items=2,
            maximum_concurrent_orchestration_work_items=2,
            # the pool the kinds shared before each had its own: the activities filled it
            maximum_thread_pool_workers=2,
        ),
    )
    register(worker, "all", {"fan_out": fan_out, "alone": alone}, {"hold": hold})
    start_worker(worker)
    try:
        fan = client.schedule_new_orchestration(fan_out, input=4)
        for _ in range(2):  # both activity threads hold
            assert holding.acquire(timeout=10)
        instance = client.schedule_new_orchestration(alone)
        state = client.wait_for_orchestration_completion(instance, timeout=10)
        assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
        assert not holding.acquire(timeout=0.2)  # the limit kept the others waiting
        release.set()
        state = client.wait_for_orchestration_completion(fan, timeout=30)
        assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
        assert state.serialized_output == str(sum(range(4)))
    finally:
        release.set()
        stop_worker(worker)
