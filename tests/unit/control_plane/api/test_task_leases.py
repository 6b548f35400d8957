"""Who may post a task's result, and what a poll nobody receives does, over real HTTP."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.unit.control_plane.conftest import Server, assert_error, taskdef

TOKENS = {
    "admin-token-0123456789": {"name": "admin", "roles": ["admin", "operator"]},
    "team-a-token-0123456789": {"name": "team-a", "roles": ["worker"], "taskTypes": ["lt"]},
    "team-b-token-0123456789": {"name": "team-b", "roles": ["worker"], "taskTypes": ["lt"]},
}


def _client(srv: Server, token: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


@pytest.fixture(params=[True, False], ids=["event-loop", "threads"])
def authed(make_server: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Server:
    """A server with token authentication; its Task API's storage calls on its event
    loop (local adapters) and in threads."""
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": [{"token": t, **p} for t, p in TOKENS.items()]}))
    srv: Server = make_server(auth_mode="tokens", tokens_file=path, local_adapters=request.param)
    srv.client.headers["Authorization"] = "Bearer admin-token-0123456789"
    srv.register(taskdef("lt"))
    return srv


def _poll(client: httpx.Client, worker: str, **params: Any) -> list[dict[str, Any]]:
    r = client.get("/api/tasks/poll/batch/lt", params={"workerid": worker, **params})
    assert r.status_code == 200, r.text
    tasks: list[dict[str, Any]] = r.json()
    return tasks


def test_the_lease_belongs_to_the_principal_that_polled(authed: Server) -> None:
    task_id = authed.dispatch("lt")
    with (
        _client(authed, "team-a-token-0123456789") as a,
        _client(authed, "team-b-token-0123456789") as b,
    ):
        assert [t["taskId"] for t in _poll(a, "a-1")] == [task_id]
        result = {"taskId": task_id, "status": "COMPLETED", "outputData": {"by": "a"}}
        # another principal: refused, whether it names the poller's workerId or none
        assert_error(b.post("/api/tasks", json={**result, "workerId": "a-1"}), 409)
        assert_error(b.post("/api/tasks", json=result), 409)
        row = authed.deps.run_store.get_task(task_id)
        assert row is not None and row.status == "IN_PROGRESS"
        # the same principal from another replica (another workerId): accepted
        r = a.post("/api/tasks", json={**result, "workerId": "a-2"})
        assert r.status_code == 200, r.text
    row = authed.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.worker_id == "a-2"
    assert [e.data["workerId"] for e in authed.signals.events(task_id)] == ["a-2"]


def test_the_same_principal_without_worker_id_is_accepted(authed: Server) -> None:
    task_id = authed.dispatch("lt")
    with _client(authed, "team-a-token-0123456789") as a:
        _poll(a, "a-1")
        r = a.post("/api/tasks", json={"taskId": task_id, "status": "COMPLETED"})
        assert r.status_code == 200, r.text
    row = authed.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.worker_id == "a-1"


def test_a_principal_that_held_an_earlier_attempt_is_refused(authed: Server) -> None:
    task_id = authed.dispatch("lt")
    with (
        _client(authed, "team-a-token-0123456789") as a,
        _client(authed, "team-b-token-0123456789") as b,
    ):
        _poll(a, "a-1")
        authed.dispatch("lt", task_id=task_id, attempt=2)  # attempt 1 timed out
        assert [t["attempt"] for t in _poll(b, "b-1")] == [2]
        assert_error(a.post("/api/tasks", json={"taskId": task_id, "status": "COMPLETED"}), 409)
        r = b.post("/api/tasks", json={"taskId": task_id, "status": "COMPLETED"})
        assert r.status_code == 200, r.text


def test_a_poll_whose_client_went_away_hands_nothing_out(srv: Server) -> None:
    """The first worker long-polls and disconnects; a task dispatched while its poll
    would still be waiting goes to the next worker instead of being leased to nobody
    for its whole response timeout (3600 s here)."""
    srv.register(taskdef("dc", responseTimeoutSeconds=3600))
    address = urlsplit(srv.url)
    with socket.create_connection((address.hostname, address.port)) as raw:
        raw.sendall(
            b"GET /api/tasks/poll/batch/dc?workerid=gone&timeout=5000 HTTP/1.1\r\n"
            b"Host: stepway\r\n\r\n"
        )
        time.sleep(0.3)  # the long poll is open on the server
    task_id = srv.dispatch("dc")
    time.sleep(1.0)  # the abandoned poll would have taken the task by now
    got = srv.client.get(
        "/api/tasks/poll/batch/dc", params={"workerid": "here", "timeout": 3000}
    ).json()
    assert [(t["taskId"], t["workerId"]) for t in got] == [(task_id, "here")]
    # handed out once: the abandoned poll never took it
    assert got[0]["pollCount"] == 1
    lease = srv.deps.run_store.get_lease(task_id, 1)
    assert lease is not None and lease.worker_id == "here"
