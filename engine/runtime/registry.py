"""What an engine process hosts: the orchestration and the activities, by name.

An engine role registers a part of these (``engine.adapters.backend.connect.register``):
``orchestrator`` the orchestration, ``activities`` the activities, ``all`` both.
"""

from __future__ import annotations

from typing import Any

from engine.runtime import activities as run_activities
from engine.runtime.interpreter import (
    ACTIVITY_BUILTIN,
    ACTIVITY_DISPATCH,
    ACTIVITY_FINISH,
    ACTIVITY_POLL,
    ACTIVITY_RECORD,
    ACTIVITY_RESOLVE_CHILD,
    workflow_interpreter,
)
from protocol.runs import ORCHESTRATOR_NAME

__all__ = ["ACTIVITIES", "ORCHESTRATORS"]

ORCHESTRATORS: dict[str, Any] = {ORCHESTRATOR_NAME: workflow_interpreter}
ACTIVITIES: dict[str, Any] = {
    ACTIVITY_RECORD: run_activities.record,
    ACTIVITY_DISPATCH: run_activities.dispatch,
    ACTIVITY_FINISH: run_activities.finish,
    ACTIVITY_RESOLVE_CHILD: run_activities.resolve_child,
    ACTIVITY_BUILTIN: run_activities.builtin,
    ACTIVITY_POLL: run_activities.poll,
}
