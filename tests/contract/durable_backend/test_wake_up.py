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
