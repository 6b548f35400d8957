"""An action id with no history event is something durabletask itself makes: the
interpreter's dispatch and record done in a work item pass over the id their activity
would have had (engine/adapters/backend/sessions.py, ``HistoryContext.pass_over_next``),
which is safe only if backends take such gaps. durabletask 1.12's own orchestration
context leaves one when a timer is created and canceled in one work item (its cancel
handler drops the action), so every backend that runs durabletask orchestrations takes
them. Pinned here, against the installed durabletask, with its own executor."""

from __future__ import annotations

import logging
from collections.abc import Generator
from datetime import datetime, timedelta
from typing import Any

from durabletask import task as dt
from durabletask import worker
from durabletask.internal import helpers

from engine.runtime.encoded_json import EncodedJsonConverter

LOG = logging.getLogger("tests.action_ids")


def _cancels_a_timer(ctx: dt.OrchestrationContext, _: Any) -> Generator[dt.Task[Any], Any, None]:
    timer = ctx.create_timer(ctx.current_utc_datetime + timedelta(hours=1))
    assert isinstance(timer, dt.CancellableTask)
    timer.cancel()
    yield ctx.call_activity("work")


def test_a_timer_created_and_canceled_in_one_work_item_leaves_its_id_without_an_action() -> None:
    registry = worker._Registry()
    registry.add_named_orchestrator("cancels_a_timer", _cancels_a_timer)
    executor = worker._OrchestrationExecutor(registry, LOG, EncodedJsonConverter())
    new = [
        helpers.new_orchestrator_started_event(datetime(2030, 1, 1)),
        helpers.new_execution_started_event("cancels_a_timer", "wf-1", encoded_input=None),
    ]

    actions = list(executor.execute("wf-1", [], new).actions)

    assert [(a.id, a.WhichOneof("orchestratorActionType")) for a in actions] == [
        (2, "scheduleTask")
    ]
