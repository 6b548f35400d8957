"""Each known failure of durabletask.testing's in-memory backend, and proof that the
embedded host does not inherit it (the worker-death case is in test_worker_death.py)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from durabletask import task
from durabletask.client import OrchestrationState, OrchestrationStatus, TaskHubGrpcClient

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import (
    make_client,
    make_worker,
    register,
    start_worker,
    stop_worker,
)
from engine.adapters.backend.embedded import (
    HISTORY_LIMIT_ERROR_TYPE,
    MESSAGE_LIMIT_ERROR_TYPE,
    POISON_ERROR_TYPE,
    EmbeddedBackend,
)


def wait_event(ctx: task.OrchestrationContext, _: Any) -> Any:
    value = yield ctx.wait_for_external_event("go")
    return value


def test_many_blocking_waiters_do_not_starve_event_delivery(
    backend: EmbeddedBackend, config: BackendConfig, start_worker: Any
) -> None:
    """60 orchestrations wait on an event and 60 client threads sit in
    wait_for_orchestration_completion at once (upstream's 10-thread server would be
    exhausted by them, so raise/complete calls would queue behind the waiters); once the
    events are raised, all 60 complete promptly."""
    n = 60
    start_worker({"wait_event": wait_event}, {})
    client = make_client(config)
    ids = [client.schedule_new_orchestration("wait_event", input=i) for i in range(n)]
    for iid in ids:
        client.wait_for_orchestration_start(iid, timeout=20)

    waiting = threading.Barrier(n + 1)
    clients = [make_client(config) for _ in range(n)]

    def wait_one(k: int) -> OrchestrationState | None:
        waiting.wait()
        return clients[k].wait_for_orchestration_completion(ids[k], timeout=60)

    with ThreadPoolExecutor(max_workers=n) as pool:
        results = [pool.submit(wait_one, k) for k in range(n)]
        waiting.wait()
        time.sleep(1.0)  # let every waiter reach the server and block there
        assert not any(r.done() for r in results)
        raised = time.monotonic()
        for k, iid in enumerate(ids):
            client.raise_orchestration_event(iid, "go", data=k)
        states = [r.result(timeout=30) for r in results]
        elapsed = time.monotonic() - raised

    for k, state in enumerate(states):
        assert state is not None
        assert state.runtime_status == OrchestrationStatus.COMPLETED
        assert state.serialized_output == str(k)
    assert elapsed < 10, f"completion took {elapsed:.1f}s"
    for c in clients:
        c.close()
    client.close()


def long_child(ctx: task.OrchestrationContext, seconds: float) -> Any:
    yield ctx.create_timer(timedelta(seconds=seconds))
    return "child done"


def parent_of_long_child(ctx: task.OrchestrationContext, seconds: float) -> Any:
    result = yield ctx.call_sub_orchestrator("long_child", input=seconds)
    return result


@pytest.mark.slow
def test_sub_orchestration_longer_than_30s_completes_parent(
    client: TaskHubGrpcClient, start_worker: Any
) -> None:
    """Upstream's watcher gave up after 30 s; the parent must still hear of the child."""
    start_worker({"long_child": long_child, "parent_of_long_child": parent_of_long_child}, {})
    iid = client.schedule_new_orchestration("parent_of_long_child", input=35.0)
    state = client.wait_for_orchestration_completion(iid, timeout=60)
    assert state is not None
    assert state.runtime_status == OrchestrationStatus.COMPLETED, state.failure_details
    assert state.serialized_output == '"child done"'


def step(ctx: task.ActivityContext, i: int) -> int:
    return i


def many_steps(ctx: task.OrchestrationContext, n: int) -> Any:
    for i in range(n):
        yield ctx.call_activity("step", input=i)
    return n


def bounded_steps(ctx: task.OrchestrationContext, state: dict[str, int]) -> Any:
    """Runs ``total`` steps, ``per_execution`` per execution, carrying on with
    continue_as_new so that the history stays small."""
    for _ in range(state["per_execution"]):
        if state["done"] == state["total"]:
            return state["done"]
        yield ctx.call_activity("step", input=state["done"])
        state["done"] += 1
    ctx.continue_as_new(state)
    return None


def test_history_limit_fails_the_instance_instead_of_hanging() -> None:
    limit = 60
    with EmbeddedBackend(max_history_events=limit) as backend:
        cfg = BackendConfig.embedded(backend.address)
        worker = make_worker(cfg)
        register(
            worker,
            "all",
            {"many_steps": many_steps, "bounded_steps": bounded_steps},
            {"step": step},
        )
        start_worker(worker)
        client = make_client(cfg)
        try:
            over = client.schedule_new_orchestration("many_steps", input=100)
            state = client.wait_for_orchestration_completion(over, timeout=20)
            assert state is not None
            assert state.runtime_status == OrchestrationStatus.FAILED
            assert state.failure_details is not None
            assert state.failure_details.error_type == HISTORY_LIMIT_ERROR_TYPE
            assert str(limit) in state.failure_details.message
            assert "continue_as_new" in state.failure_details.message
            history = list(client.get_orchestration_history(over))
            assert len(history) <= limit + 2

            # The same amount of work, bounded with continue_as_new, is fine.
            ok = client.schedule_new_orchestration(
                "bounded_steps", input={"done": 0, "total": 100, "per_execution": 8}
            )
            state = client.wait_for_orchestration_completion(ok, timeout=30)
            assert state is not None
            assert state.runtime_status == OrchestrationStatus.COMPLETED, state.failure_details
            assert state.serialized_output == "100"
        finally:
            stop_worker(worker)
            client.close()


attempts: list[str] = []
release_first = threading.Event()


def sometimes_slow(ctx: task.ActivityContext, _: Any) -> str:
    attempt = f"attempt-{len(attempts) + 1}"
    attempts.append(attempt)
    if attempt == "attempt-1":
        release_first.wait(10)  # outlives its lease
    return attempt


def one_step(ctx: task.OrchestrationContext, _: Any) -> Any:
    result = yield ctx.call_activity("sometimes_slow")
    return result


def test_expired_lease_is_handed_out_again_and_first_result_wins() -> None:
    """Fallback for a holder that neither completes nor disconnects (half-open
    connection): after the lease expires the work item goes out again; the late result
    of the first hand-out is dropped."""
    attempts.clear()
    release_first.clear()
    with EmbeddedBackend(work_item_lease_seconds=1.0) as backend:
        cfg = BackendConfig.embedded(backend.address)
        worker = make_worker(cfg)
        register(worker, "all", {"one_step": one_step}, {"sometimes_slow": sometimes_slow})
        start_worker(worker)
        client = make_client(cfg)
        try:
            iid = client.schedule_new_orchestration("one_step")
            state = client.wait_for_orchestration_completion(iid, timeout=15)
            assert state is not None
            assert state.runtime_status == OrchestrationStatus.COMPLETED
            assert state.serialized_output == '"attempt-2"'
            release_first.set()
            time.sleep(0.5)  # the first hand-out's result arrives now and is dropped
            after = client.get_orchestration_state(iid)
            assert after is not None and after.serialized_output == '"attempt-2"'
            assert backend.servicer.leased_work_items() == {}
        finally:
            release_first.set()
            stop_worker(worker)
            client.close()


def test_idle_stream_gets_health_pings() -> None:
    """The Python worker reopens a stream that is silent for 120 s, which would requeue
    the work it is still running; an idle stream therefore carries health pings."""
    import durabletask.internal.orchestrator_service_pb2 as pb
    import durabletask.internal.orchestrator_service_pb2_grpc as stubs
    import grpc

    with (
        EmbeddedBackend(health_ping_seconds=0.2) as backend,
        grpc.insecure_channel(backend.address) as channel,
    ):
        stub = stubs.TaskHubSidecarServiceStub(channel)  # type: ignore[no-untyped-call]
        stream = stub.GetWorkItems(pb.GetWorkItemsRequest(), timeout=5)
        first = next(iter(stream))
        assert first.HasField("healthPing")
        stream.cancel()


def echo(ctx: task.ActivityContext, value: Any) -> Any:
    return value


def echo_once(ctx: task.OrchestrationContext, value: Any) -> Any:
    result = yield ctx.call_activity("echo", input=value)
    return len(result) if isinstance(result, str) else result


def test_an_oversized_orchestration_work_item_fails_the_instance_instead_of_looping() -> None:
    """A work item larger than the message limit would break the worker's stream and
    come back forever; it is never sent and the instance fails with a reason."""
    limit = 200_000
    with EmbeddedBackend(max_message_bytes=limit) as backend:
        cfg = BackendConfig.embedded(backend.address)
        worker = make_worker(cfg)
        register(worker, "all", {"echo_once": echo_once}, {"echo": echo})
        start_worker(worker)
        client = make_client(cfg)
        try:
            small = client.schedule_new_orchestration("echo_once", input="x" * 1000)
            big = client.schedule_new_orchestration("echo_once", input="x" * (limit + 1))
            state = client.wait_for_orchestration_completion(big, timeout=20)
            assert state is not None and state.runtime_status == OrchestrationStatus.FAILED
            assert state.failure_details is not None
            assert state.failure_details.error_type == MESSAGE_LIMIT_ERROR_TYPE
            assert f"more than the message limit of {limit} bytes" in state.failure_details.message
            done = client.wait_for_orchestration_completion(small, timeout=20)
            assert done is not None and done.runtime_status == OrchestrationStatus.COMPLETED
            assert done.serialized_output == "1000"
            assert backend.servicer.leased_work_items() == {}
        finally:
            stop_worker(worker)
            client.close()


def test_a_work_item_that_never_completes_is_failed_after_the_delivery_limit() -> None:
    """A work item whose every hand-out ends without a completion (here: the stream that
    received it closes each time, as when the engine process crashes on it) is handed out
    max_deliveries times, then the instance fails instead of looping forever."""
    import durabletask.internal.orchestrator_service_pb2 as pb
    import durabletask.internal.orchestrator_service_pb2_grpc as stubs
    import grpc

    with (
        EmbeddedBackend(max_deliveries=3) as backend,
        grpc.insecure_channel(backend.address) as channel,
    ):
        client = make_client(BackendConfig.embedded(backend.address))
        iid = client.schedule_new_orchestration("never_completed", input=1)
        stub = stubs.TaskHubSidecarServiceStub(channel)  # type: ignore[no-untyped-call]
        handed_out = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = client.get_orchestration_state(iid)
            if state is not None and state.runtime_status == OrchestrationStatus.FAILED:
                break
            stream = stub.GetWorkItems(pb.GetWorkItemsRequest(), timeout=2)
            try:
                for item in stream:
                    if item.HasField("orchestratorRequest"):
                        handed_out += 1
                        break
            except grpc.RpcError:
                pass
            stream.cancel()  # the holder goes away without completing it
        state = client.get_orchestration_state(iid)
        assert state is not None and state.runtime_status == OrchestrationStatus.FAILED
        assert state.failure_details is not None
        assert state.failure_details.error_type == POISON_ERROR_TYPE
        assert "handed out 3 times without a completion" in state.failure_details.message
        assert handed_out == 3
        client.close()


def test_clients_workers_and_server_share_one_message_limit() -> None:
    from engine.adapters.backend.config import GRPC_MAX_MESSAGE_BYTES
    from engine.adapters.backend.connect import channel_options
    from engine.adapters.backend.embedded import _SERVER_OPTIONS

    server = dict(_SERVER_OPTIONS)
    client = dict(channel_options(BackendConfig.embedded("127.0.0.1:1")).to_grpc_options())
    for name in ("grpc.max_receive_message_length", "grpc.max_send_message_length"):
        assert server[name] == client[name] == GRPC_MAX_MESSAGE_BYTES


def test_finished_orchestrations_are_kept_up_to_a_bound_and_running_ones_always() -> None:
    """Upstream keeps every finished instance forever (a long-lived ``stepway dev`` grows
    with every run); here the oldest finished ones beyond ``max_finished_instances`` are
    purged, the newest stay readable, and a running one is never purged."""
    with EmbeddedBackend(max_finished_instances=3) as backend:
        cfg = BackendConfig.embedded(backend.address)
        worker = make_worker(cfg)
        register(worker, "all", {"echo_once": echo_once, "wait_event": wait_event}, {"echo": echo})
        start_worker(worker)
        client = make_client(cfg)
        try:
            waiting = client.schedule_new_orchestration("wait_event", instance_id="waiting")
            client.wait_for_orchestration_start(waiting, timeout=20)
            done = []
            for i in range(6):
                iid = client.schedule_new_orchestration("echo_once", input=i, instance_id=f"r{i}")
                state = client.wait_for_orchestration_completion(iid, timeout=20)
                assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
                done.append(iid)
            kept = [i for i in done if client.get_orchestration_state(i) is not None]
            assert kept == ["r3", "r4", "r5"]
            history = list(client.get_orchestration_history("r5"))
            assert type(history[-1]).__name__ == "ExecutionCompletedEvent"
            # the running one was never counted: it is there, and finishes when told
            client.raise_orchestration_event(waiting, "go", data="now")
            state = client.wait_for_orchestration_completion(waiting, timeout=20)
            assert state is not None and state.serialized_output == '"now"'
            # it finished last: the oldest of the others goes
            assert client.get_orchestration_state("r3") is None
            assert client.get_orchestration_state("r4") is not None
            # an id purged can be used again
            again = client.schedule_new_orchestration("echo_once", input=9, instance_id="r0")
            state = client.wait_for_orchestration_completion(again, timeout=20)
            assert state is not None and state.serialized_output == "9"
            # what the backend keeps per instance beyond upstream's goes with it, also
            # when a client purges one
            servicer = backend.servicer
            # (an execution number exists for each instance that scheduled something)
            assert len(servicer._instances) == 3 and len(servicer._executions) <= 3
            client.purge_orchestration("r0")
            assert client.get_orchestration_state("r0") is None
            assert len(servicer._instances) == 2 and len(servicer._executions) <= 2
        finally:
            stop_worker(worker)
            client.close()
