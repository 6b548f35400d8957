"""An event meant for an earlier execution of a run never reaches a later one.

A run continues as new every few steps (engine/runtime/interpreter.py, "History stays
bounded"); task ids restart with each execution. A WORKER step arms a deadline timer
that the step's result makes moot, but the backend still fires it when it falls due,
possibly long after the run continued as new. As a Durable Task Framework backend drops
a message addressed to an execution that is no longer the instance's current one, the
embedded backend (engine/adapters/backend/executions.py) drops it: otherwise a stale
timer lands on whatever task of the current execution has its id (durabletask takes it
out of the pending tasks: that task's own completion is then ignored, and the run waits
forever), or fires a current deadline early."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from durabletask import history

from engine.language.definitions import RunStatus, TaskStatus
from engine.runtime.interpreter import STEPS_PER_EXECUTION

STEPS = 2 * STEPS_PER_EXECUTION + 2
TIMEOUT_SECONDS = 1


def test_a_stale_timer_of_an_earlier_execution_is_dropped(
    platform: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="durabletask-worker")
    # each step arms a deadline TIMEOUT_SECONDS ahead, made moot by its quick result
    platform.register_task_def(
        {
            "name": "tick",
            "retryCount": 0,
            "timeoutSeconds": TIMEOUT_SECONDS,
            "responseTimeoutSeconds": TIMEOUT_SECONDS,
        }
    )
    platform.register_task_def({"name": "gate", "retryCount": 0, "timeoutSeconds": 600})
    platform.register(
        {
            "name": "ticks_then_gate",
            "version": 1,
            "tasks": [
                *(
                    {
                        "name": "tick",
                        "taskReferenceName": f"t{i}",
                        "type": "WORKER",
                        "inputParameters": {"i": i},
                    }
                    for i in range(STEPS)
                ),
                {"name": "gate", "taskReferenceName": "gate", "type": "WORKER"},
            ],
            "outputParameters": {"gate": "${gate.output.opened}"},
        }
    )
    workflow_id = platform.start("ticks_then_gate")
    for _ in range(STEPS):
        platform.work("tick", lambda task_input: {"i": task_input["i"]})
    # the run waits at the gate, in a later execution, while the ticks' deadlines fall due
    deadline = time.monotonic() + 30
    while platform.tasks(workflow_id).get("gate") is None:
        assert time.monotonic() < deadline, "the gate was never scheduled"
        time.sleep(0.05)
    time.sleep(TIMEOUT_SECONDS + 2)
    platform.work("gate", lambda task_input: {"opened": True})
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"gate": True}
    rows = platform.tasks(workflow_id)
    assert all(rows[f"t{i}"].status == TaskStatus.COMPLETED for i in range(STEPS))
    assert rows["gate"].status == TaskStatus.COMPLETED
    # A timer whose step ended is still fired by the backend; durabletask ignores it
    # (logged at DEBUG: engine/adapters/backend/sessions.py). Only the timers of the
    # execution the run ended in may come back that way: the earlier executions' (two
    # timers a step, one per deadline kind, for 20 steps) not.
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in warnings if "Ignoring" in m], warnings
    ignored = [r.getMessage() for r in caplog.records if "Ignoring" in r.getMessage()]
    events = platform.client.get_orchestration_history(workflow_id)
    [started] = [e for e in events if isinstance(e, history.ExecutionStartedEvent)]
    assert started.input is not None and json.loads(started.input)["executions"] >= 2
    timers = [e for e in events if isinstance(e, history.TimerCreatedEvent)]
    assert all("timerFired" in m for m in ignored), ignored
    assert len(ignored) <= len(timers), (ignored, len(timers))
