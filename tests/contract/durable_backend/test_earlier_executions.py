"""What an execution scheduled and did not wait for answers that execution only: once
the instance continued as new, a late activity result, child result or timer of the
earlier execution is dropped (a Durable Task Framework backend drops a message
addressed to an execution that is no longer current: engine/adapters/backend/executions.py).
Task ids restart with each execution, so the late answer would otherwise complete the
new execution's task of the same id."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient

from engine.adapters.backend.executions import Executions, TimerQueue


def late(ctx: task.ActivityContext, _: Any) -> str:
    time.sleep(0.3)
    return "late answer of the first execution"


def own(ctx: task.ActivityContext, _: Any) -> str:
    time.sleep(1.0)  # still running when the first execution's late answer arrives
    return "own answer"


def child(ctx: task.OrchestrationContext, _: Any) -> Any:
    yield ctx.create_timer(timedelta(seconds=0.3))
    return "late answer of the first execution"


def leaves_an_activity(ctx: task.OrchestrationContext, n: int) -> Any:
    if n == 0:
        ctx.call_activity("late")  # scheduled, never waited for
        ctx.continue_as_new(1)
        return None
    result = yield ctx.call_activity("own")  # the same task id as "late" had
    return result


def leaves_a_child(ctx: task.OrchestrationContext, n: int) -> Any:
    if n == 0:
        ctx.call_sub_orchestrator("child", instance_id=f"{ctx.instance_id}-child")
        ctx.continue_as_new(1)
        return None
    result = yield ctx.call_activity("own")
    return result


def leaves_a_timer(ctx: task.OrchestrationContext, n: int) -> Any:
    if n == 0:
        ctx.create_timer(timedelta(seconds=0.3))
        ctx.continue_as_new(1)
        return None
    result = yield ctx.call_activity("own")
    return result


def _run(client: TaskHubGrpcClient, orchestrator: str) -> Any:
    instance_id = client.schedule_new_orchestration(orchestrator, input=0)
    state = client.wait_for_orchestration_completion(instance_id, timeout=60)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED, state
    return state.serialized_output


def test_a_late_activity_result_does_not_answer_the_next_execution(
    client: TaskHubGrpcClient, start_worker: Any
) -> None:
    start_worker({"leaves_an_activity": leaves_an_activity}, {"late": late, "own": own})
    assert _run(client, "leaves_an_activity") == '"own answer"'


def test_a_late_child_result_does_not_answer_the_next_execution(
    client: TaskHubGrpcClient, start_worker: Any
) -> None:
    start_worker({"leaves_a_child": leaves_a_child, "child": child}, {"own": own})
    assert _run(client, "leaves_a_child") == '"own answer"'


def test_a_late_timer_does_not_answer_the_next_execution(
    client: TaskHubGrpcClient, start_worker: Any
) -> None:
    start_worker({"leaves_a_timer": leaves_a_timer}, {"own": own})
    assert _run(client, "leaves_a_timer") == '"own answer"'


# -- the helpers, directly ---------------------------------------------------------------


def test_timers_run_in_due_order_on_one_thread() -> None:
    timers = TimerQueue("test-timers")
    ran: list[str] = []
    now = time.time()
    try:
        timers.schedule(now + 0.2, lambda: ran.append("second"))
        timers.schedule(now + 0.1, lambda: ran.append("first"))
        timers.schedule(now - 1, lambda: ran.append("overdue"))
        deadline = time.monotonic() + 10
        while len(ran) < 3:
            assert time.monotonic() < deadline, ran
            time.sleep(0.01)
        assert ran == ["overdue", "first", "second"]
        timers.schedule(now + 3600, lambda: ran.append("never"))
        assert len(timers) == 1
    finally:
        timers.stop()
    assert len(timers) == 0


def test_an_execution_changes_with_continue_as_new_and_with_a_new_instance() -> None:
    from durabletask.testing.in_memory_backend import OrchestrationInstance

    executions = Executions()
    first = OrchestrationInstance(instance_id="i", name="o", status=0)
    number = executions.current(first)
    assert executions.current(first) == number  # stable while nothing changes
    renewed = executions.renew(first)  # continued as new
    assert renewed != number and executions.current(first) == renewed
    again = OrchestrationInstance(instance_id="i", name="o", status=0)  # the id reused
    assert executions.current(again) not in (number, renewed)
