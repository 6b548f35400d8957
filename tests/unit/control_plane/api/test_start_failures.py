"""A start (or a restart) whose orchestration, definition snapshot or run row cannot be
stored, and a signal the backend cannot take, over real HTTP. What a client sees, as
Conductor's ApplicationExceptionMapper answers: an outage of the backend (here a real
durabletask client at a port nothing listens on) is 503, retryable, with
``Retry-After``; any other failure is the server's error, 500 and not retryable.
Neither body carries the error's text (the backend's addresses and debug strings, a
driver's statement), and no run is left RUNNING."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.adapters.run_signals_recording import RecordingRunSignals
from engine.adapters.run_store_sql import SqlRunStore
from engine.ports.run_store import CreateRunResult, NewRun, RunStatus, RunUpdate
from tests.grpc_peers import grpc_peer, grpc_silent_peer, unreachable_address
from tests.http_peers import Failure, blob_peer
from tests.unit.control_plane.api.test_payload_store_outages import blob_store
from tests.unit.control_plane.conftest import Server, assert_error, taskdef

WORKFLOW = {
    "name": "wf",
    "version": 1,
    "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
}
#: what an internal error says that no caller may see
SECRET = "INSERT INTO runs ... at 10.20.30.40:5432 (/srv/stepway/secrets)"
UNREACHABLE = (
    "durable backend unavailable: the durable backend could not be reached (gRPC UNAVAILABLE)"
)
#: the two start routes: the name in the body, and in the path
STARTS = [("/api/workflow", {"name": "wf", "input": {"a": 1}}), ("/api/workflow/wf", {"a": 1})]


def server(make_server: Any, **options: Any) -> Server:
    srv: Server = make_server(**options)
    srv.register(taskdef("parse"))
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    return srv


def silent_backend(address: str, call_seconds: float) -> DurableRunSignals:
    """The durable adapter over a real client of a peer that never answers, each call
    ending in its deadline after ``call_seconds``."""
    env = {
        "STEPWAY_BACKEND_ADDRESS": address,
        "STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS": f"{call_seconds:g}",
    }
    return DurableRunSignals(make_client(BackendConfig.from_env(env)))


def unreachable_backend() -> tuple[DurableRunSignals, int]:
    """The durable adapter over a real client of an embedded backend that is not there."""
    address = unreachable_address()
    config = BackendConfig.from_env({"STEPWAY_BACKEND_ADDRESS": address})
    return DurableRunSignals(make_client(config)), int(address.rsplit(":", 1)[1])


def assert_outage(r: httpx.Response, message: str, port: int) -> None:
    body = assert_error(r, 503)
    assert body["message"] == message, body
    assert body["retryable"] is True
    assert r.headers["Retry-After"] == "1"
    for internal in (str(port), "ipv4", "debug_error_string", "failed to connect"):
        assert internal not in r.text, r.text


def assert_internal_error(r: httpx.Response, message: str) -> None:
    body = assert_error(r, 500)
    assert body["message"] == message, body
    assert body["retryable"] is False
    assert "Retry-After" not in r.headers
    assert "10.20.30.40" not in r.text and "INSERT" not in r.text and "/srv" not in r.text


def no_runs(srv: Server) -> bool:
    return bool(srv.client.get("/api/workflow/search").json()["totalHits"] == 0)


def test_a_start_meeting_an_unreachable_backend_answers_503_and_leaves_no_run(
    make_server: Any,
) -> None:
    srv = server(make_server, local_adapters=False)  # a start answers once scheduled
    srv.deps.signals, port = unreachable_backend()
    for route, body in STARTS:
        assert_outage(
            srv.client.post(route, json=body), f"could not start the run: {UNREACHABLE}", port
        )
    assert no_runs(srv)


def test_a_start_the_backend_fails_otherwise_answers_500_not_retryable_and_leaves_no_run(
    make_server: Any,
) -> None:
    srv = server(make_server, local_adapters=False)
    for route, body in STARTS:
        srv.signals.fail_next = RuntimeError(SECRET)
        r = srv.client.post(route, json=body)
        assert_internal_error(r, "could not start the run (internal error: RuntimeError)")
    assert no_runs(srv)
    # the backend is fine again: the same start starts the run
    assert srv.client.post("/api/workflow/wf", json={"a": 1}).status_code == 200


def test_a_start_whose_call_runs_out_of_time_keeps_its_run_and_starts_it_once(
    make_server: Any,
) -> None:
    """A backend that took the start and did not answer within the call's deadline may
    have created the orchestration: a 503 would make the client's retry a second run.
    The start answers with the run's id, the run is kept RUNNING with its start pending,
    and the start is tried until the backend has it (a start it had already counts
    once, as ``start_new_run`` does)."""
    srv = server(make_server, local_adapters=False)
    recording = srv.signals
    with grpc_silent_peer() as (address, _):
        srv.deps.signals = silent_backend(address, 0.5)
        r = srv.client.post("/api/workflow/wf", json={"a": 1})
        assert r.status_code == 200, r.text
        workflow_id = r.text
        stored = srv.deps.run_store.get_run(workflow_id)
        assert stored is not None and stored.status == RunStatus.RUNNING
        assert srv.deps.run_store.has_pending_start(workflow_id)
        srv.deps.signals = recording  # the backend answers again
    started_once(srv, recording, workflow_id)
    assert srv.client.get("/api/workflow/search").json()["totalHits"] == 1


def started_once(srv: Server, recording: RecordingRunSignals, workflow_id: str) -> None:
    """The kept start reached the backend with its input, and its pending start is gone."""
    start = recording.start_of(workflow_id, timeout=30)
    assert start.data["input"] == {"a": 1}
    deadline = time.monotonic() + 10
    while srv.deps.run_store.has_pending_start(workflow_id):
        assert time.monotonic() < deadline, "the pending start was not deleted"
        time.sleep(0.02)


def test_a_kept_start_is_not_failed_while_the_backend_answers_nothing(make_server: Any) -> None:
    """The kept start meets a backend that answers nothing past the usual number of
    refusals: asked whether it holds the run's orchestration, it answers nothing
    either, so the orchestration may exist and the run is not failed: it reads RUNNING
    with its start pending, and is started once the backend answers."""
    srv = server(
        make_server,
        local_adapters=False,
        start_retry_first_seconds=0.02,
        start_retry_max_seconds=0.05,
        start_max_attempts=2,
    )
    recording = srv.signals
    with grpc_silent_peer() as (address, calls):
        srv.deps.signals = silent_backend(address, 0.2)
        r = srv.client.post("/api/workflow/wf", json={"a": 1})
        assert r.status_code == 200, r.text
        workflow_id = r.text

        def asked_twice() -> bool:
            return sum(1 for method, _ in calls if method.endswith("/GetInstance")) >= 2

        deadline = time.monotonic() + 20
        while not asked_twice():
            assert time.monotonic() < deadline, f"the backend was not asked: {calls}"
            time.sleep(0.02)
        run = srv.client.get(f"/api/workflow/{workflow_id}").json()
        assert run["status"] == "RUNNING", run
        assert srv.deps.run_store.has_pending_start(workflow_id)
        srv.deps.signals = recording  # the backend answers again
        # (the silent one stays until then: a call to it still open ends in its deadline)
        started_once(srv, recording, workflow_id)
    assert srv.client.get(f"/api/workflow/{workflow_id}").json()["status"] == "RUNNING"


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.RESOURCE_EXHAUSTED,  # also what a message above the size limit meets
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INTERNAL,
    ],
)
def test_a_start_the_backend_refuses_is_not_an_outage(
    make_server: Any, code: grpc.StatusCode
) -> None:
    """Only UNAVAILABLE and DEADLINE_EXCEEDED are outages of the backend: any other
    answer would be given again, so a client must not be told to retry it forever."""
    srv = server(make_server, local_adapters=False)
    with grpc_peer(code, SECRET) as address:
        client = make_client(BackendConfig.from_env({"STEPWAY_BACKEND_ADDRESS": address}))
        srv.deps.signals = DurableRunSignals(client)
        r = srv.client.post("/api/workflow/wf", json={"a": 1})
    assert_internal_error(r, "could not start the run (internal error: _InactiveRpcError)")
    assert no_runs(srv)


@pytest.mark.parametrize("failure", ["outage", "error"])
def test_a_restart_the_backend_fails_answers_as_a_start_does_and_leaves_the_run_as_it_was(
    make_server: Any, failure: str
) -> None:
    srv = server(make_server, local_adapters=False)
    workflow_id = srv.client.post("/api/workflow/wf", json={"a": 1}).text
    now = srv.deps.clock()
    srv.deps.run_store.update_run(
        workflow_id, RunUpdate(status=RunStatus.COMPLETED, end_time=now), now
    )
    if failure == "outage":
        srv.deps.signals, port = unreachable_backend()
        r = srv.client.post(f"/api/workflow/{workflow_id}/restart")
        message = f"could not run the workflow again: {UNREACHABLE}"
        assert_outage(r, message, port)
    else:
        srv.signals.fail_next = RuntimeError(SECRET)
        r = srv.client.post(f"/api/workflow/{workflow_id}/restart")
        message = "could not run the workflow again (internal error: RuntimeError)"
        assert_internal_error(r, message)
    run = srv.client.get(f"/api/workflow/{workflow_id}").json()
    assert run["status"] == "COMPLETED"
    assert run["reasonForIncompletion"] == message


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


def test_a_definition_snapshot_the_payload_store_refuses_answers_500_not_retryable(
    make_server: Any,
) -> None:
    """The store answers 403 (the identity may not write): not an outage, so not a 503
    that a client would retry forever, and the store's answer stays in the log."""
    with blob_peer(always=Failure(403, "AuthorizationPermissionMismatch")) as peer:
        store = blob_store(peer.url)
        try:
            srv = server(make_server, payloads=store)
            r = srv.client.post("/api/workflow/wf", json={"a": 1})
        finally:
            store.close()
    assert_internal_error(r, "could not store the definition (internal error: PayloadStoreRefused)")
    assert "AuthorizationPermissionMismatch" not in r.text and "devstoreaccount1" not in r.text
    assert no_runs(srv) and srv.signals.calls == []


class RunStoreFailingCreates(SqlRunStore):
    """A real SQLite run store whose ``create_run`` fails as a defect would."""

    def create_run(self, run: NewRun, start: dict[str, Any] | None = None) -> CreateRunResult:
        raise RuntimeError(SECRET)


def test_a_start_stored_with_the_run_store_failing_answers_500_not_retryable(
    make_server: Any, tmp_path: Path
) -> None:
    store = RunStoreFailingCreates(f"sqlite:///{tmp_path}/failing.db")
    srv = server(make_server, local_adapters=True, run_store=store)  # answered once stored
    assert_internal_error(
        srv.client.post("/api/workflow/wf", json={"a": 1}),
        "could not store the run (internal error: RuntimeError)",
    )
    assert srv.signals.calls == []


class SignalsFailingStarts(RecordingRunSignals):
    """Every start fails as a defect would (not an outage)."""

    def start_new_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        with self._lock:
            self.refused.append(workflow_id)
        raise RuntimeError(SECRET)


def test_a_stored_start_the_backend_keeps_failing_fails_its_run_without_the_error_text(
    make_server: Any,
) -> None:
    srv = server(
        make_server, local_adapters=True, start_retry_first_seconds=0.05, start_max_attempts=2
    )
    failing = SignalsFailingStarts()
    srv.deps.signals = failing
    r = srv.client.post("/api/workflow/wf", json={"a": 1})
    assert r.status_code == 200, r.text  # answered once stored
    workflow_id = r.text

    def run() -> dict[str, Any]:
        answer: dict[str, Any] = srv.client.get(f"/api/workflow/{workflow_id}").json()
        return answer

    deadline = time.monotonic() + 15
    while run()["status"] != "FAILED":
        assert time.monotonic() < deadline, "the run was left RUNNING"
        time.sleep(0.02)
    assert run()["reasonForIncompletion"] == (
        "its orchestration could not be scheduled (internal error: RuntimeError)"
    )
    assert failing.refused == [workflow_id] * 2
