"""The durabletask features the interpreter relies on, end to end through the real gRPC
protocol against the embedded backend."""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from typing import Any

from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient

from engine.adapters.backend.embedded import EmbeddedBackend


def double(ctx: task.ActivityContext, x: int) -> int:
    return 2 * x


def child(ctx: task.OrchestrationContext, x: int) -> Any:
    y = yield ctx.call_activity("double", input=x)
    return y + 1


def parent(ctx: task.OrchestrationContext, x: int) -> Any:
    a = yield ctx.call_activity("double", input=x)
    yield ctx.create_timer(timedelta(milliseconds=300))
    b = yield ctx.call_sub_orchestrator("child", input=a)
    approval = yield ctx.wait_for_external_event("approve")
    return {"a": a, "b": b, "approval": approval}


def waiter(ctx: task.OrchestrationContext, _: Any) -> Any:
    value = yield ctx.wait_for_external_event("go")
    return value


def counter(ctx: task.OrchestrationContext, n: int) -> Any:
    n = yield ctx.call_activity("double", input=n)
    if n < 64:
        ctx.continue_as_new(n)
        return None
    return n


ORCHS = {"parent": parent, "child": child, "waiter": waiter, "counter": counter}
ACTS = {"double": double}


def _status(client: TaskHubGrpcClient, iid: str) -> OrchestrationStatus:
    state = client.get_orchestration_state(iid)
    assert state is not None
    return state.runtime_status


def _wait_status(client: TaskHubGrpcClient, iid: str, want: OrchestrationStatus) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _status(client, iid) == want:
            return
        time.sleep(0.05)
    raise AssertionError(f"{iid} never reached {want}, is {_status(client, iid)}")


def test_activity_timer_sub_orchestration_and_event(
    backend: EmbeddedBackend, client: TaskHubGrpcClient, start_worker: Any
) -> None:
    start_worker(ORCHS, ACTS)
    iid = client.schedule_new_orchestration("parent", input=5)
    client.wait_for_orchestration_start(iid, timeout=10)
    time.sleep(0.5)
    client.raise_orchestration_event(iid, "approve", data="yes")
    state = client.wait_for_orchestration_completion(iid, timeout=15)
    assert state is not None
    assert state.runtime_status == OrchestrationStatus.COMPLETED, state.failure_details
    assert state.serialized_output is not None
    assert '"b": 21' in state.serialized_output
    assert '"approval": "yes"' in state.serialized_output


def test_continue_as_new(client: TaskHubGrpcClient, start_worker: Any) -> None:
    start_worker(ORCHS, ACTS)
    iid = client.schedule_new_orchestration("counter", input=1)
    state = client.wait_for_orchestration_completion(iid, timeout=15)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    assert state.serialized_output == "64"


def test_suspend_resume(client: TaskHubGrpcClient, start_worker: Any) -> None:
    start_worker(ORCHS, ACTS)
    iid = client.schedule_new_orchestration("waiter")
    client.wait_for_orchestration_start(iid, timeout=10)
    client.suspend_orchestration(iid)
    _wait_status(client, iid, OrchestrationStatus.SUSPENDED)
    client.raise_orchestration_event(iid, "go", data=1)
    time.sleep(0.5)
    assert _status(client, iid) == OrchestrationStatus.SUSPENDED  # event held back
    client.resume_orchestration(iid)
    state = client.wait_for_orchestration_completion(iid, timeout=10)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    assert state.serialized_output == "1"


def test_terminate(client: TaskHubGrpcClient, start_worker: Any) -> None:
    start_worker(ORCHS, ACTS)
    iid = client.schedule_new_orchestration("waiter")
    client.wait_for_orchestration_start(iid, timeout=10)
    client.terminate_orchestration(iid, output="stopped")
    state = client.wait_for_orchestration_completion(iid, timeout=10)
    assert state is not None and state.runtime_status == OrchestrationStatus.TERMINATED


def test_wait_times_out_with_deadline(client: TaskHubGrpcClient, start_worker: Any) -> None:
    """A client wait with a short deadline returns DEADLINE_EXCEEDED promptly (upstream
    turned a remaining time of 0 into a 30 s wait)."""
    start_worker(ORCHS, ACTS)
    iid = client.schedule_new_orchestration("waiter")
    started = time.monotonic()
    with contextlib.suppress(TimeoutError):
        client.wait_for_orchestration_completion(iid, timeout=1)
    assert time.monotonic() - started < 5
