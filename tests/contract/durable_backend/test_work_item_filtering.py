"""register(): an engine process hosts only its role's functions, and with work item
filtering (honoured by the embedded backend, as by DTS) it receives only their work."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient
from durabletask.worker import TaskHubGrpcWorker

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_worker, register, start_worker, stop_worker


def add_one(ctx: task.ActivityContext, x: int) -> int:
    return x + 1


def add_two(ctx: task.OrchestrationContext, x: int) -> Any:
    x = yield ctx.call_activity("add_one", input=x)
    x = yield ctx.call_activity("plus_one", input=x)  # registered under another name
    return x


ORCHS = {"add_two": add_two}
ACTS = {"add_one": add_one, "plus_one": add_one}


def _record_kinds(worker: TaskHubGrpcWorker, seen: list[str]) -> None:
    """Wraps the worker's dispatch so the test sees which kinds of work item it got."""
    lock = threading.Lock()
    run_orch, run_act = worker._execute_orchestrator, worker._execute_activity

    def orch(*args: Any) -> Any:
        with lock:
            seen.append("orchestration")
        return run_orch(*args)

    def act(*args: Any) -> Any:
        with lock:
            seen.append("activity")
        return run_act(*args)

    worker._execute_orchestrator = orch  # type: ignore[method-assign,assignment]
    worker._execute_activity = act  # type: ignore[method-assign,assignment]


def test_register_adds_only_the_role_and_opts_into_filters(config: BackendConfig) -> None:
    for role, orchs, acts in [
        ("orchestrator", {"add_two"}, set()),
        ("activities", set(), {"add_one", "plus_one"}),
        ("all", {"add_two"}, {"add_one", "plus_one"}),
    ]:
        worker = make_worker(config)
        added = register(worker, role, ORCHS, ACTS)  # type: ignore[arg-type]
        assert set(added) == orchs | acts
        assert set(worker._registry.orchestrators) == orchs
        assert set(worker._registry.activities) == acts
        assert worker._auto_generate_work_item_filters
    with pytest.raises(ValueError, match="role"):
        register(make_worker(config), "everything", ORCHS, ACTS)  # type: ignore[arg-type]


def test_split_roles_receive_only_their_work_items(
    config: BackendConfig, client: TaskHubGrpcClient
) -> None:
    orch_seen: list[str] = []
    act_seen: list[str] = []
    orch_worker = make_worker(config)
    register(orch_worker, "orchestrator", ORCHS, ACTS)
    _record_kinds(orch_worker, orch_seen)
    act_worker = make_worker(config)
    register(act_worker, "activities", ORCHS, ACTS)
    _record_kinds(act_worker, act_seen)

    start_worker(orch_worker)
    try:
        # Strict routing: with no activity host connected, the run waits (no fallback).
        first = client.schedule_new_orchestration("add_two", input=0)
        time.sleep(1.0)
        state = client.get_orchestration_state(first)
        assert state is not None and state.runtime_status == OrchestrationStatus.RUNNING
        assert orch_seen == ["orchestration"]

        start_worker(act_worker)
        ids = [first] + [client.schedule_new_orchestration("add_two", input=i) for i in range(5)]
        for i, iid in enumerate(ids):
            state = client.wait_for_orchestration_completion(iid, timeout=20)
            assert state is not None
            assert state.runtime_status == OrchestrationStatus.COMPLETED, state.failure_details
            assert state.serialized_output == str(max(i - 1, 0) + 2)
    finally:
        stop_worker(act_worker)
        stop_worker(orch_worker)

    assert set(orch_seen) == {"orchestration"}
    assert set(act_seen) == {"activity"}
    assert act_seen.count("activity") == 2 * len(ids)
