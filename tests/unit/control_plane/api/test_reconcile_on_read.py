"""Reconcile on read (control_plane/services/reconciling.py), over real HTTP and a real
SQLite run store; the durable backend is the recording one, told which orchestrations
ended outside the interpreter.

What a user sees: a run whose orchestration ended in the backend reads FAILED with the
backend's reason once a read asks; a client that follows a running run costs the
backend one call per run per interval, not one per read."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.control_plane.conftest import Server

ENDED = "its orchestration was terminated in the durable backend"
ROUTES = ["/api/workflow/{}", "/api/workflow/{}/status", "/api/workflow/{}/tasks"]


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _status(srv: Server, workflow_id: str, route: str = ROUTES[0]) -> dict[str, Any]:
    r = srv.client.get(route.format(workflow_id))
    assert r.status_code == 200, r.text
    if route == ROUTES[2]:  # the task page: the run's status is read from the run
        return dict(srv.client.get(ROUTES[1].format(workflow_id)).json())
    return dict(r.json())


@pytest.mark.parametrize("route", ROUTES)
def test_reads_within_the_interval_ask_the_backend_once(
    make_server: Any, clock: Clock, route: str
) -> None:
    srv: Server = make_server(clock=clock, reconcile_interval_ms=2_000)
    workflow_id = srv.run()
    for _ in range(5):
        srv.client.get(route.format(workflow_id))
        clock.now += 300
    assert srv.signals.asked_outside == [workflow_id]
    clock.now += 600  # 2.1 s after the first ask
    srv.client.get(route.format(workflow_id))
    assert srv.signals.asked_outside == [workflow_id, workflow_id]


def test_a_run_ended_outside_reads_failed_by_the_first_read_after_the_interval(
    make_server: Any, clock: Clock
) -> None:
    srv: Server = make_server(clock=clock, reconcile_interval_ms=2_000)
    workflow_id = srv.run()
    assert _status(srv, workflow_id)["status"] == "RUNNING"
    srv.signals.ended[workflow_id] = ENDED  # terminated behind the interpreter's back
    clock.now += 1_999
    assert _status(srv, workflow_id)["status"] == "RUNNING"  # the store's word, as asked
    clock.now += 1
    body = _status(srv, workflow_id)
    assert body["status"] == "FAILED" and body["reasonForIncompletion"] == ENDED
    stored = srv.deps.run_store.get_run(workflow_id)
    assert stored is not None and stored.status.value == "FAILED"
    asked = len(srv.signals.asked_outside)
    clock.now += 10_000
    assert _status(srv, workflow_id)["status"] == "FAILED"
    assert len(srv.signals.asked_outside) == asked  # an ended run is not asked about


def test_a_run_never_asked_about_is_asked_at_once(make_server: Any, clock: Clock) -> None:
    srv: Server = make_server(clock=clock, reconcile_interval_ms=60_000)
    going, ended = srv.run(), srv.run()
    assert _status(srv, going)["status"] == "RUNNING"
    srv.signals.ended[ended] = ENDED
    # one run's answer says nothing of another's
    assert _status(srv, ended)["status"] == "FAILED"


def test_interval_zero_asks_on_every_read(make_server: Any, clock: Clock) -> None:
    srv: Server = make_server(clock=clock, reconcile_interval_ms=0)
    workflow_id = srv.run()
    for _ in range(3):
        assert _status(srv, workflow_id)["status"] == "RUNNING"
    assert srv.signals.asked_outside == [workflow_id] * 3
    srv.signals.ended[workflow_id] = ENDED
    assert _status(srv, workflow_id)["status"] == "FAILED"


def test_an_unreachable_backend_is_asked_again_by_the_next_read(
    make_server: Any, clock: Clock
) -> None:
    srv: Server = make_server(clock=clock, reconcile_interval_ms=2_000)
    workflow_id = srv.run()
    failures = [RuntimeError("backend away")]
    original = srv.signals.ended_outside

    def away(run: str) -> str | None:
        if failures:
            srv.signals.asked_outside.append(run)
            raise failures.pop()
        return original(run)

    srv.signals.ended_outside = away  # type: ignore[method-assign]
    assert _status(srv, workflow_id)["status"] == "RUNNING"  # what the store says
    srv.signals.ended[workflow_id] = ENDED
    # no answer was had: not taken as "going", the next read asks
    assert _status(srv, workflow_id)["status"] == "FAILED"
    assert srv.signals.asked_outside == [workflow_id, workflow_id]
