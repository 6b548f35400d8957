"""A run does not continue as new while an activity of its execution is still running.

A WORKER task's result can reach the run before its dispatch activity has returned (a
fast worker takes the message the moment it is queued). The backend routes an
activity's completion by instance and task id, so a dispatch that returns after the run
continued as new would land in the next execution, where that task id is another task's
(engine/runtime/interpreter.py, "History stays bounded")."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from durabletask import history

from engine.language.definitions import RunStatus, TaskStatus
from engine.runtime.activities import RunActivities
from engine.runtime.activity_io import DispatchInput
from engine.runtime.interpreter import STEPS_PER_EXECUTION

STEPS = 4 * STEPS_PER_EXECUTION


@pytest.fixture
def slow_dispatch(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The dispatch of the step whose result is the execution's last outcome before a
    continue-as-new is due returns 0.1 s after it queued its message, so the test's
    worker answers first. Set before the platform registers its activities."""
    queued = threading.Event()
    dispatch = RunActivities.dispatch

    def slow(self: RunActivities, ctx: Any, raw: Any) -> dict[str, Any]:
        result = dispatch(self, ctx, raw)
        data = DispatchInput.model_validate_json(raw) if isinstance(raw, str) else raw
        step = DispatchInput.model_validate(data).task.input.get("i")
        if step == STEPS_PER_EXECUTION - 1:
            queued.set()
            time.sleep(0.1)
        return result

    monkeypatch.setattr(RunActivities, "dispatch", slow)
    # every task goes to the dispatch activity, as from an orchestrator-only process (the
    # platform's engine hosts the activities too, and would queue it in the work item)
    monkeypatch.setattr(RunActivities, "dispatch_here", lambda self, data: False)
    yield queued


def test_no_completion_of_an_earlier_execution_lands_in_the_next(
    slow_dispatch: threading.Event, platform: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="durabletask-worker")
    platform.register_task_def({"name": "quick", "retryCount": 0, "responseTimeoutSeconds": 60})
    platform.register(
        {
            "name": "quick_steps",
            "version": 1,
            "tasks": [
                {
                    "name": "quick",
                    "taskReferenceName": f"q{i}",
                    "type": "WORKER",
                    "inputParameters": {"i": i},
                }
                for i in range(STEPS)
            ],
            "outputParameters": {"last": f"${{q{STEPS - 1}.output.i}}"},
        }
    )
    workflow_id = platform.start("quick_steps")
    for _ in range(STEPS):
        # each result is raised while that task's dispatch activity is still running
        platform.work("quick", lambda task_input: {"i": task_input["i"]})
    run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED
    assert run.output == {"last": STEPS - 1}
    rows = platform.tasks(workflow_id)
    assert all(rows[f"q{i}"].status == TaskStatus.COMPLETED for i in range(STEPS))
    # every activity completion in the last execution's history answers an activity that
    # execution scheduled (a stale one would carry an id scheduled only in the one before);
    # the last execution may hold none at all (the results it needed carried into it, the
    # end recorded in the work item that reaches it): the log below covers every execution
    events = platform.client.get_orchestration_history(workflow_id)
    scheduled = {e.event_id for e in events if isinstance(e, history.TaskScheduledEvent)}
    completed = [
        e.task_scheduled_id
        for e in events
        if isinstance(e, history.TaskCompletedEvent | history.TaskFailedEvent)
    ]
    assert set(completed) <= scheduled, (completed, scheduled)
    # and the run did continue as new (this is not the execution it started with)
    [started] = [e for e in events if isinstance(e, history.ExecutionStartedEvent)]
    assert started.input is not None and json.loads(started.input)["executions"] >= 1
    assert slow_dispatch.is_set()
    # durabletask logs a completion that matches no task of the execution it lands in
    stale = [r.getMessage() for r in caplog.records if "Ignoring unexpected" in r.getMessage()]
    assert stale == []
