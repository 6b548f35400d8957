"""A signal the durable backend cannot take, over real HTTP. What a client sees: an
outage of the backend (here a real durabletask client at a port nothing listens on) is
503, retryable, with ``Retry-After``, its body never carrying the backend's addresses
or debug strings."""

from __future__ import annotations

from typing import Any

import httpx

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.run_signals_durable import DurableRunSignals
from tests.unit.control_plane.conftest import Server, assert_error, free_port, taskdef

WORKFLOW = {
    "name": "wf",
    "version": 1,
    "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
}
UNREACHABLE = (
    "durable backend unavailable: the durable backend could not be reached (gRPC UNAVAILABLE)"
)


def server(make_server: Any, **options: Any) -> Server:
    srv: Server = make_server(**options)
    srv.register(taskdef("parse"))
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    return srv


def unreachable_backend() -> tuple[DurableRunSignals, int]:
    """The durable adapter over a real client of an embedded backend that is not there."""
    port = free_port()
    config = BackendConfig.from_env({"STEPWAY_BACKEND_ADDRESS": f"127.0.0.1:{port}"})
    return DurableRunSignals(make_client(config)), port


def assert_outage(r: httpx.Response, message: str, port: int) -> None:
    body = assert_error(r, 503)
    assert body["message"] == message, body
    assert body["retryable"] is True
    assert r.headers["Retry-After"] == "1"
    for internal in (str(port), "ipv4", "debug_error_string", "failed to connect"):
        assert internal not in r.text, r.text


def test_a_signal_meeting_an_unreachable_backend_answers_503(make_server: Any) -> None:
    """Pause, resume and terminate signal the orchestration: an outage of the backend is
    a 503 as for a start, and the run is left as it was."""
    srv = server(make_server, local_adapters=False)
    workflow_id = srv.client.post("/api/workflow/wf", json={"a": 1}).text
    srv.deps.signals, port = unreachable_backend()
    for r in (
        srv.client.put(f"/api/workflow/{workflow_id}/pause"),
        srv.client.delete(f"/api/workflow/{workflow_id}", params={"reason": "stop"}),
    ):
        assert_outage(r, UNREACHABLE, port)
    assert srv.client.get(f"/api/workflow/{workflow_id}").json()["status"] == "RUNNING"
