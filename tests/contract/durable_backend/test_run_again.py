"""Running a run again (restart, retry, rerun) through DurableRunSignals while its old
orchestration has not completed yet at the backend: the start waits for the completion
and replaces the instance, instead of failing with ALREADY_EXISTS."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from durabletask import task
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient

from engine.adapters.run_signals_durable import DurableRunSignals
from engine.ports.run_signals import RunSignalsUnavailable
from protocol.runs import ORCHESTRATOR_NAME

from .conftest import StartWorker


def run(ctx: task.OrchestrationContext, run_input: Any) -> Any:
    """Stands in for the interpreter: the first execution waits for ``go``."""
    if run_input.get("wait"):
        value = yield ctx.wait_for_external_event("go")
        return {"first": value}
    return {"again": run_input["n"]}


def test_a_start_while_the_old_instance_finishes_replaces_it(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    start_worker({ORCHESTRATOR_NAME: run})
    signals = DurableRunSignals(client, finish_wait_seconds=20)
    signals.start_run("wf-1", {"wait": True})
    client.wait_for_orchestration_start("wf-1", timeout=20)

    errors: list[BaseException] = []

    def again() -> None:
        try:
            signals.start_run("wf-1", {"n": 2})
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=again)
    t.start()
    t.join(0.5)
    assert t.is_alive(), "the start did not wait for the running instance"
    client.raise_orchestration_event("wf-1", "go", data=1)
    t.join(20)
    assert not t.is_alive() and errors == []
    state = client.wait_for_orchestration_completion("wf-1", timeout=20)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED
    assert state.serialized_output == '{"again": 2}'


def test_a_start_over_an_instance_that_does_not_finish_fails(
    client: TaskHubGrpcClient, start_worker: StartWorker
) -> None:
    start_worker({ORCHESTRATOR_NAME: run})
    signals = DurableRunSignals(client, finish_wait_seconds=0.5)
    signals.start_run("wf-2", {"wait": True})
    client.wait_for_orchestration_start("wf-2", timeout=20)
    with pytest.raises(RunSignalsUnavailable) as err:  # 503 and Retry-After on the API
        signals.start_run("wf-2", {"n": 2})
    assert str(err.value) == (
        "durable backend unavailable: the run's previous execution did not end at the "
        "durable backend within 0.5 s"
    )
    # the old execution goes on, untouched
    client.raise_orchestration_event("wf-2", "go", data=3)
    state = client.wait_for_orchestration_completion("wf-2", timeout=20)
    assert state is not None and state.serialized_output == '{"first": 3}'
