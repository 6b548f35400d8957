"""Counting a run's durable history: events by type and the actions the Azure Durable
Task Scheduler bills.

History events are ``durabletask.history`` dataclasses, one class per protobuf
``HistoryEvent`` case (``TaskScheduledEvent``, ``EventRaisedEvent``, ...), as
``TaskHubGrpcClient.get_orchestration_history`` returns them.

The scheduler bills *actions*: a message it dispatches to the app that triggers an
orchestrator, activity or entity execution: starting an orchestration or
sub-orchestration, starting an activity, completing a timer, triggering an external
event, an entity operation, suspending, resuming or terminating, and processing the
result of an activity, entity call or sub-orchestration (so an activity costs two).
In a history that is one action per event below; the bookends (``OrchestratorStarted``
/ ``OrchestratorCompleted``), ``TimerCreated``, ``EventSent``, ``ExecutionCompleted``
and ``SubOrchestrationInstanceCreated`` (the child's ``ExecutionStarted`` is the
action) are not billed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

BILLABLE = frozenset(
    {
        "ExecutionStartedEvent",
        "TaskScheduledEvent",
        "TaskCompletedEvent",
        "TaskFailedEvent",
        "TimerFiredEvent",
        "EventRaisedEvent",
        "SubOrchestrationInstanceCompletedEvent",
        "SubOrchestrationInstanceFailedEvent",
        "ExecutionSuspendedEvent",
        "ExecutionResumedEvent",
        "ExecutionTerminatedEvent",
        "EntityOperationSignaledEvent",
        "EntityOperationCalledEvent",
        "EntityOperationCompletedEvent",
        "EntityOperationFailedEvent",
        "EntityLockGrantedEvent",
    }
)


def count(events: Iterable[Any]) -> Counter[str]:
    """Events by type name (``TaskScheduled``, ``EventRaised``, ...)."""
    return Counter(type(e).__name__.removesuffix("Event") for e in events)


BOOKENDS = frozenset({"OrchestratorStarted", "OrchestratorCompleted"})
"""The events that open and close each orchestrator work item (each replay), not a step's
own: the hand-written floor's activity step is 2 events without them, 4 with them."""


def without_bookends(by_type: Counter[str]) -> int:
    return sum(n for name, n in by_type.items() if name not in BOOKENDS)


def actions(by_type: Counter[str]) -> int:
    return sum(n for name, n in by_type.items() if name + "Event" in BILLABLE)


def children(events: Iterable[Any]) -> list[str]:
    """Instance ids of the sub-orchestrations the history created."""
    return [
        e.instance_id for e in events if type(e).__name__ == "SubOrchestrationInstanceCreatedEvent"
    ]


def continued(events: Iterable[Any]) -> bool:
    """True when this history is not the first execution of its instance (the
    interpreter counts its continue-as-new executions in its input)."""
    for e in events:
        if type(e).__name__ == "ExecutionStartedEvent" and e.input:
            try:
                data = json.loads(e.input)
            except ValueError:
                return False
            return bool(isinstance(data, dict) and data.get("executions"))
    return False
