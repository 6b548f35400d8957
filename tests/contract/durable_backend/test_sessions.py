"""Orchestration sessions (engine/adapters/backend/sessions.py): a work item applies only
the events its instance's live session has not seen, and the outcome is what a full
replay gives, whether the session is kept, evicted or never there."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient

from engine.adapters.backend.sessions import OrchestrationSessions, SessionWorker
from tests.contract.durable_backend.conftest import StartWorker

#: how often each instance's orchestration generator ran from its start (replays included)
_STARTS: dict[str, int] = {}


def add_one(_: task.ActivityContext, value: int) -> int:
    return value + 1


def chain(ctx: task.OrchestrationContext, steps: int) -> Generator[task.Task[Any], Any, int]:
    _STARTS[ctx.instance_id] = _STARTS.get(ctx.instance_id, 0) + 1
    value = 0
    for _ in range(steps):
        value = yield ctx.call_activity(add_one, input=value)
    approval = yield ctx.wait_for_external_event("approve")
    timer_done = yield ctx.create_timer(ctx.current_utc_datetime)
    del timer_done
    return value * 100 + int(approval)


def _run(
    client: TaskHubGrpcClient, worker: Any, instance: str, steps: int = 6
) -> tuple[OrchestrationStatus, str | None]:
    client.schedule_new_orchestration(chain, input=steps, instance_id=instance)
    # the event arrives while the activities run or after: either way it is applied once
    client.raise_orchestration_event(instance, "approve", data=7)
    state = client.wait_for_orchestration_completion(instance, timeout=30)
    assert state is not None
    return state.runtime_status, state.serialized_output


def test_a_session_applies_only_new_events_and_gives_the_replay_result(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    worker = start_worker({"chain": chain}, {"add_one": add_one})
    assert isinstance(worker, SessionWorker)
    status, output = _run(client, worker, "sessions-kept")
    assert status == OrchestrationStatus.COMPLETED
    assert output == "607"
    # every work item after the first continued the live session: no full replays
    assert worker.sessions.hits >= 6
    assert worker.sessions.misses == 0
    assert _STARTS["sessions-kept"] == 1  # the generator ran once, never replayed
    assert len(worker.sessions) == 0  # a completed orchestration keeps no session


def test_without_sessions_every_work_item_replays_and_the_result_is_the_same(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    worker = start_worker({"chain": chain}, {"add_one": add_one})
    worker.sessions = OrchestrationSessions(capacity=0)  # nothing kept: full replays
    status, output = _run(client, worker, "sessions-none")
    assert status == OrchestrationStatus.COMPLETED
    assert output == "607"
    assert worker.sessions.hits == 0
    assert worker.sessions.misses >= 6
    assert _STARTS["sessions-none"] >= 6  # replayed from its start on each work item


def test_an_evicted_session_falls_back_to_a_full_replay(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    worker = start_worker({"chain": chain}, {"add_one": add_one})
    worker.sessions = OrchestrationSessions(capacity=1)
    client.schedule_new_orchestration(chain, input=4, instance_id="evict-a")
    client.schedule_new_orchestration(chain, input=4, instance_id="evict-b")
    for instance in ("evict-a", "evict-b"):
        client.raise_orchestration_event(instance, "approve", data=1)
    for instance in ("evict-a", "evict-b"):
        state = client.wait_for_orchestration_completion(instance, timeout=30)
        assert state is not None
        assert state.runtime_status == OrchestrationStatus.COMPLETED
        assert state.serialized_output == "401"
    # two interleaved instances, one session: some work items replayed in full
    assert worker.sessions.misses > 0


def test_a_new_execution_of_the_same_instance_is_not_served_by_the_old_session(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    worker = start_worker({"chain": chain}, {"add_one": add_one})
    client.schedule_new_orchestration(chain, input=2, instance_id="again")
    state = client.wait_for_orchestration_start(
        "again", timeout=30
    )  # waiting on "approve" with a live session
    assert state is not None
    client.terminate_orchestration("again")
    client.wait_for_orchestration_completion("again", timeout=30)
    client.purge_orchestration("again")
    _STARTS.pop("again", None)
    status, output = _run(client, worker, "again", steps=3)
    assert status == OrchestrationStatus.COMPLETED
    assert output == "307"
