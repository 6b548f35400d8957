"""Which work items a kept orchestration session may serve
(engine/adapters/backend/sessions.py, ``OrchestrationSessions.take``): only one whose past
events begin with exactly the events the session applied; anything else is a full replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import durabletask.internal.helpers as ph
import durabletask.internal.orchestrator_service_pb2 as pb

from engine.adapters.backend.sessions import OrchestrationSessions, _Session

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _execution(started_at: datetime) -> list[pb.HistoryEvent]:
    """An execution's first work item (started, a task scheduled) as the backend stores it."""
    return [
        ph.new_orchestrator_started_event(started_at),
        ph.new_execution_started_event("WorkflowInterpreter", "run-1", '{"n": 1}'),
        ph.new_task_scheduled_event(1, "stepway.dispatch"),
    ]


def _kept(events: list[pb.HistoryEvent], sessions: OrchestrationSessions) -> _Session:
    session = _Session(
        executor=None, ctx=None, applied=len(events), first=events[0], last=events[-1]
    )
    sessions.put("run-1", session)
    return session


def test_a_history_that_continues_the_applied_events_is_served() -> None:
    sessions = OrchestrationSessions()
    applied = _execution(T0)
    session = _kept(applied, sessions)
    later = [*applied, ph.new_orchestrator_started_event(T0 + timedelta(seconds=1))]
    assert sessions.take("run-1", later) is session
    assert (sessions.hits, sessions.misses) == (1, 0)
    assert sessions.take("run-1", later) is None  # taken: the work item owns it now


def test_another_execution_of_the_same_instance_is_not_served() -> None:
    """A rerun replaces the instance: same id, same shape of history, other first event."""
    sessions = OrchestrationSessions()
    _kept(_execution(T0), sessions)
    assert sessions.take("run-1", _execution(T0 + timedelta(minutes=5))) is None
    assert sessions.misses == 1


def test_a_history_shorter_than_or_different_from_the_applied_one_is_not_served() -> None:
    for past in (
        _execution(T0)[:2],  # the last completion never reached the backend
        [*_execution(T0)[:2], ph.new_task_scheduled_event(7, "stepway.finish")],
    ):
        sessions = OrchestrationSessions()
        _kept(_execution(T0), sessions)
        assert sessions.take("run-1", past) is None


def test_capacity_zero_keeps_nothing_and_the_least_recently_used_goes() -> None:
    none = OrchestrationSessions(capacity=0)
    _kept(_execution(T0), none)
    assert len(none) == 0
    two = OrchestrationSessions(capacity=2)
    for name in ("a", "b", "c"):
        two.put(
            name,
            _Session(
                executor=None, ctx=None, applied=1, first=pb.HistoryEvent(), last=pb.HistoryEvent()
            ),
        )
    assert len(two) == 2 and two.take("a", [pb.HistoryEvent()]) is None
