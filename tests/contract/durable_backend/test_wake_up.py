"""The embedded backend hands an orchestration out again as soon as it has new events:
a work item stream never sleeps through work that is ready (a lost wake-up)."""

from __future__ import annotations

import threading
import time
from typing import Any

from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient

from engine.adapters.backend.embedded import EmbeddedBackend, StepwayInMemoryBackend


class _IdleWaitProbe(threading.Event):
    """Stands in for the servicer's work-available signal (it is the real signal, with a
    count): counts the idle waits of a work item stream that ended by timing out while an
    orchestration was queued, ready to hand out, and nobody had signalled it."""

    def __init__(self, servicer: StepwayInMemoryBackend) -> None:
        super().__init__()
        self.servicer = servicer
        self.waits = 0
        self.slept_through_work = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        woke = super().wait(timeout)
        if not woke:
            with self.servicer._lock:
                if not self.is_set() and self._ready_orchestrations():
                    self.slept_through_work += 1
        return woke

    def _ready_orchestrations(self) -> list[str]:
        s = self.servicer
        return [
            iid
            for iid in s._orchestration_queue_set
            if iid not in s._orchestration_in_flight
            and iid in s._instances
            and s._instances[iid].pending_events
        ]


def _wait_until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_event_raised_during_a_replay_is_handed_out_without_an_idle_wait(
    backend: EmbeddedBackend, client: TaskHubGrpcClient, start_worker: Any
) -> None:
    """An event that arrives while the orchestration's work item is being executed (the
    usual case of a worker task's ``.started`` event) is handed out as soon as that work
    item completes: the stream is woken, it does not sleep out its idle wait."""
    probe = _IdleWaitProbe(backend.servicer)
    backend.servicer._work_available = probe
    entered, gate = threading.Event(), threading.Event()

    def gated(ctx: task.OrchestrationContext, _: Any) -> Any:
        if not ctx.is_replaying:
            entered.set()
            gate.wait(20)  # the first work item stays in flight until the test says
        value = yield ctx.wait_for_external_event("go")
        return value

    start_worker({"gated": gated}, {})
    instance_id = client.schedule_new_orchestration("gated")
    assert entered.wait(20)
    client.raise_orchestration_event(instance_id, "go", data=7)
    # The stream has looked at the queue since the event arrived (and put the instance
    # back, because its work item is still in flight).
    seen = probe.waits
    _wait_until(lambda: probe.waits >= seen + 2)
    gate.set()

    state = client.wait_for_orchestration_completion(instance_id, timeout=30)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    assert state.serialized_output == "7"
    assert probe.slept_through_work == 0


def test_orchestrations_in_flight_do_not_hold_back_one_ready_behind_them(
    backend: EmbeddedBackend, client: TaskHubGrpcClient, start_worker: Any
) -> None:
    """Two orchestrations whose work items are in flight get events meanwhile; a third
    started after them is handed out at once. Upstream kept an instance with new events
    in the queue while its work item was in flight, and a stream that met it at the head
    put it back and stopped looking: with two of them ahead, the ready one waited out
    the stream's idle wait (or the next signal)."""
    probe = _IdleWaitProbe(backend.servicer)
    backend.servicer._work_available = probe
    gates = {"a": threading.Event(), "b": threading.Event()}
    entered = {"a": threading.Event(), "b": threading.Event()}
    handed_out: dict[str, float] = {}

    def gated(ctx: task.OrchestrationContext, name: str) -> Any:
        if not ctx.is_replaying:
            entered[name].set()
            gates[name].wait(20)  # in flight until the test says
        value = yield ctx.wait_for_external_event("go")
        return value

    def ready(ctx: task.OrchestrationContext, _: Any) -> Any:
        handed_out.setdefault("c", time.monotonic())
        return "c"

    start_worker({"gated": gated, "ready": ready}, {})
    a = client.schedule_new_orchestration("gated", input="a")
    b = client.schedule_new_orchestration("gated", input="b")
    assert entered["a"].wait(20) and entered["b"].wait(20)
    client.raise_orchestration_event(a, "go", data=1)
    client.raise_orchestration_event(b, "go", data=2)
    seen = probe.waits
    _wait_until(lambda: probe.waits >= seen + 3)  # the stream has looked and gone idle
    started = time.monotonic()
    c = client.schedule_new_orchestration("ready")
    done = client.wait_for_orchestration_completion(c, timeout=30)
    assert done is not None and done.runtime_status == OrchestrationStatus.COMPLETED
    assert probe.slept_through_work == 0
    assert handed_out["c"] - started < 0.09  # not after an idle wait of 0.1 s
    for name in gates:
        gates[name].set()
    for instance_id, value in ((a, "1"), (b, "2")):
        state = client.wait_for_orchestration_completion(instance_id, timeout=30)
        assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
        assert state.serialized_output == value
    assert probe.slept_through_work == 0
