"""Starting a new run through DurableRunSignals.start_new_run, against the real backend:
a start made again (a pending start scheduled a second time, after a restart of the
control plane or by a signal that needed the orchestration) leaves the instance as it
is, running or finished, instead of failing or running the run again."""

from __future__ import annotations

from typing import Any

import pytest
from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.ports.run_signals import RunSignalsUnavailable
from protocol.runs import ORCHESTRATOR_NAME
from tests.grpc_peers import unreachable_address

from .conftest import StartWorker


def run(ctx: task.OrchestrationContext, run_input: Any) -> Any:
    """Stands in for the interpreter: waits for ``go`` when asked to."""
    if run_input.get("wait"):
        value = yield ctx.wait_for_external_event("go")
        return {"waited": value, "n": run_input["n"]}
    return {"n": run_input["n"]}


def test_a_new_run_starts(client: TaskHubGrpcClient, start_worker: StartWorker) -> None:
    start_worker({ORCHESTRATOR_NAME: run})
    DurableRunSignals(client).start_new_run("new-1", {"n": 1})
    state = client.wait_for_orchestration_completion("new-1", timeout=20)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    assert state.serialized_output == '{"n": 1}'


def test_a_second_start_leaves_a_running_instance_running(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    start_worker({ORCHESTRATOR_NAME: run})
    signals = DurableRunSignals(client)
    signals.start_new_run("new-2", {"wait": True, "n": 1})
    client.wait_for_orchestration_start("new-2", timeout=20)
    signals.start_new_run("new-2", {"n": 2})  # no error, and no second run
    client.raise_orchestration_event("new-2", "go", data=7)
    state = client.wait_for_orchestration_completion("new-2", timeout=20)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    assert state.serialized_output == '{"waited": 7, "n": 1}'


def test_a_second_start_does_not_run_a_finished_run_again(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    start_worker({ORCHESTRATOR_NAME: run})
    signals = DurableRunSignals(client)
    signals.start_new_run("new-3", {"n": 1})
    client.wait_for_orchestration_completion("new-3", timeout=20)
    signals.start_new_run("new-3", {"n": 2})
    state = client.get_orchestration_state("new-3")
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    assert state.serialized_output == '{"n": 1}'


def test_the_backend_tells_whether_it_holds_a_run(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    """What a start whose answer was lost asks before its run may be failed."""
    start_worker({ORCHESTRATOR_NAME: run})
    signals = DurableRunSignals(client)
    assert signals.has_orchestration("held-1") is False
    signals.start_new_run("held-1", {"n": 1})
    assert signals.has_orchestration("held-1") is True
    client.wait_for_orchestration_completion("held-1", timeout=20)
    assert signals.has_orchestration("held-1") is True  # ended, still held


def test_an_unreachable_backend_cannot_tell() -> None:
    config = BackendConfig.from_env({"STEPWAY_BACKEND_ADDRESS": unreachable_address()})
    with pytest.raises(RunSignalsUnavailable):
        DurableRunSignals(make_client(config)).has_orchestration("held-2")
