"""A payload store that cannot be reached, over real HTTP: the Blob adapter pointed at a
port of 127.0.0.1 nothing listens on. What a client sees: 503 with ``Retry-After`` and a
retryable Conductor error body naming the payload store (its account and container,
never its key), for a start, a worker's result carrying a large output and a read of a
run whose input is offloaded; the result is not recorded, so its retry is the one that
counts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.core.credentials import AzureNamedKeyCredential

from engine.adapters.payload_blob import BlobPayloadStore
from engine.adapters.payload_local import LocalPayloadStore
from engine.ports.payload_store import PayloadLimits
from engine.ports.run_store import NewRun
from tests.http_peers import Failure, blob_peer
from tests.unit.control_plane.api.test_store_outages import poll, polled_result
from tests.unit.control_plane.conftest import Server, assert_error, free_port, taskdef

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
UNREACHABLE = (
    "payload store unavailable: Azure Blob container 'payloads' of account "
    "'devstoreaccount1' could not be reached (ServiceRequestError)"
)
WORKFLOW = {
    "name": "wf",
    "version": 1,
    "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
}


def blob_store(base_url: str) -> BlobPayloadStore:
    """The Blob store of account devstoreaccount1 at ``base_url``, no SDK retries."""
    return BlobPayloadStore(
        f"{base_url}/devstoreaccount1",
        "payloads",
        AzureNamedKeyCredential("devstoreaccount1", KEY),
        limits=PayloadLimits(task_output_threshold=1024),
        retry_total=0,
        connection_timeout=2,
    )


@pytest.fixture
def unreachable_blob() -> Iterator[BlobPayloadStore]:
    store = blob_store(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    try:
        yield store
    finally:
        store.close()


def assert_payload_outage(r: httpx.Response) -> dict[str, Any]:
    body = assert_error(r, 503)
    assert UNREACHABLE in body["message"], body
    assert body["retryable"] is True, body
    assert body["validationErrors"] == [], body
    assert r.headers["Retry-After"] == "1"
    assert KEY not in r.text and "sig=" not in r.text
    return body


def test_a_start_meeting_an_unreachable_payload_store_answers_503(
    make_server: Any, unreachable_blob: BlobPayloadStore
) -> None:
    srv: Server = make_server(payloads=unreachable_blob)
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    big = {"text": "x" * 20_000}  # above the workflow input threshold: offloaded
    for r in (
        srv.client.post("/api/workflow", json={"name": "wf", "input": big}),
        srv.client.post("/api/workflow/wf", json=big),
    ):
        assert_payload_outage(r)
    assert srv.signals.calls == []  # no run was started


def test_a_read_of_a_run_whose_input_is_offloaded_answers_503(
    make_server: Any, unreachable_blob: BlobPayloadStore
) -> None:
    srv: Server = make_server(payloads=unreachable_blob)
    srv.deps.run_store.create_run(
        NewRun(
            workflow_id="wf-1",
            name="wf",
            version=1,
            input_ref="payloads/wf-1/input.json",
            create_time=srv.deps.clock(),
        )
    )
    assert_payload_outage(srv.client.get("/api/workflow/wf-1"))


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi"])
@pytest.mark.parametrize("route", ["/api/tasks", "/api/tasks/update-v2"])
def test_a_large_result_meeting_an_unreachable_payload_store_answers_503_and_is_not_recorded(
    make_server: Any, unreachable_blob: BlobPayloadStore, fast_path: bool, route: str
) -> None:
    srv: Server = make_server(fast_path=fast_path, payloads=unreachable_blob)
    # an output above the task output threshold: offloaded
    task_id, result = polled_result(srv, "parse", {"text": "x" * 5_000})
    assert_payload_outage(srv.client.post(route, json=result))
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "IN_PROGRESS"
    assert srv.signals.events(task_id) == []


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi"])
def test_a_poll_meeting_an_unreachable_payload_store_gives_the_task_back(
    make_server: Any, unreachable_blob: BlobPayloadStore, tmp_path: Path, fast_path: bool
) -> None:
    """A task whose input is offloaded cannot be handed out while its input cannot be
    read: the poll answers 503 and undoes the hand-out, so that once the store is back
    the next poll hands the task out at once, rather than after its response timeout."""
    srv: Server = make_server(fast_path=fast_path, payloads=unreachable_blob)
    srv.register(taskdef("parse"))
    task_id = srv.dispatch("parse")
    reference = f"payloads/{task_id}/input.json"
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None
    offloaded = row.model_copy(update={"input_data": None, "input_ref": reference})
    srv.deps.run_store.upsert_task(offloaded, srv.deps.clock())

    assert_payload_outage(poll(srv, "parse"))
    lease = srv.deps.run_store.get_lease(task_id, 1)
    assert lease is None or lease.released

    # the store is back (here: another one holding the same payload)
    back = LocalPayloadStore(tmp_path / "back", secret="test-secret-0123456789")
    back.put(reference, json.dumps({"pages": 3}).encode())
    srv.deps.payloads = back
    [task] = poll(srv, "parse").json()
    assert task["taskId"] == task_id and task["inputData"] == {"pages": 3}


def test_a_payload_store_refusal_is_a_500_that_is_not_retryable(make_server: Any) -> None:
    """A refusal the store will repeat (here 403: the identity may not write) is the
    server's error, not an outage: 500, ``retryable: false`` as Conductor answers an
    error that is not transient, the store's error class named and nothing else."""
    refused = Failure(403, "AuthorizationPermissionMismatch")
    with blob_peer(always=refused) as peer:
        store = blob_store(peer.url)
        try:
            srv: Server = make_server(payloads=store)
            # an output above the task output threshold: offloaded
            _, result = polled_result(srv, "parse", {"text": "x" * 5_000})
            body = assert_error(srv.client.post("/api/tasks", json=result), 500)
        finally:
            store.close()
    assert body["retryable"] is False, body
    assert body["message"] == "internal error: PayloadStoreRefused", body
    assert KEY not in str(body)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi"])
def test_a_task_whose_offloaded_input_is_gone_fails_at_once(
    make_server: Any, fast_path: bool
) -> None:
    """The store answers that the input is not there, which it will answer again: the
    attempt fails naming the payload and the run is told (its retry policy decides),
    instead of the poll answering 502 with the task held until its response timeout.
    The poll goes on: another task of the type is handed out."""
    srv: Server = make_server(fast_path=fast_path)
    srv.register(taskdef("parse"))
    lost = srv.dispatch("parse")
    row = srv.deps.run_store.get_task(lost)
    assert row is not None
    gone = f"payloads/{lost}/input.json"  # never written
    srv.deps.run_store.upsert_task(
        row.model_copy(update={"input_data": None, "input_ref": gone}), srv.deps.clock()
    )
    fine = srv.dispatch("parse", workflow_id=row.workflow_id, ref="t2")

    tasks = poll(srv, "parse", count=2).json()
    assert [t["taskId"] for t in tasks] == [fine]
    failed = srv.deps.run_store.get_task(lost)
    assert failed is not None and failed.status == "FAILED"
    assert gone in (failed.reason_for_incompletion or "")
    lease = srv.deps.run_store.get_lease(lost, 1)
    assert lease is not None and lease.released
    [event] = srv.signals.events(lost)
    assert event.data["status"] == "FAILED" and event.data["attempt"] == 1
    assert gone in event.data["reason"]
