"""The payload store's adapters when the store cannot be used: a Blob endpoint nothing
listens on, a real HTTP peer in front of the service that answers 503, 429 or 500 (or
hangs up, or never answers), one that refuses (403), Azurite itself with a container
that does not exist, and a directory whose process has run out of file handles. An
outage raises ``PayloadStoreUnavailable`` naming the store and the cause, never a key;
a refusal ``PayloadStoreRefused``; a missing payload stays ``PayloadNotFound``. The Blob
client's retries and timeouts are Stepway's, from the configuration, not the SDK's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import (
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)

from engine.adapters.blob_client_settings import BlobClientSettings
from engine.adapters.payload_blob import BlobPayloadStore
from engine.adapters.payload_local import LocalPayloadStore
from engine.app.azure_services import build_payload_store
from engine.app.config import DataConfig, EnvReader
from engine.ports.payload_store import (
    PayloadError,
    PayloadNotFound,
    PayloadStoreRefused,
    PayloadStoreUnavailable,
)
from tests.contract.test_payload_store_contract import AZURITE_ACCOUNT, AZURITE_KEY, AZURITE_URL
from tests.http_peers import Failure, blob_peer
from tests.unit.control_plane.conftest import free_port

CONTAINER = "payloads"
STORE = f"Azure Blob container {CONTAINER!r} of account {AZURITE_ACCOUNT!r}"
REF = "payloads/wf-1/input.json"

needs_azurite = pytest.mark.skipif(
    not AZURITE_URL, reason="needs STEPWAY_TEST_AZURITE_BLOB_URL with azurite-blob running"
)


def blob_store(base_url: str, container: str = CONTAINER, **kwargs: Any) -> BlobPayloadStore:
    """The adapter on ``base_url`` (path-style, as Azurite), the SDK's retries off."""
    return BlobPayloadStore(
        f"{base_url}/{AZURITE_ACCOUNT}",
        container,
        AzureNamedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY),
        retry_total=0,
        connection_timeout=2,
        read_timeout=2,
        **kwargs,
    )


#: each operation of the port, on one payload
OPERATIONS: dict[str, Callable[[BlobPayloadStore | LocalPayloadStore], Any]] = {
    "put": lambda store: store.put(REF, b'{"a":1}'),
    "get": lambda store: store.get(REF),
    "exists": lambda store: store.exists(REF),
    "delete": lambda store: store.delete(REF),
}


def assert_outage(exc: PayloadStoreUnavailable, *phrases: str) -> None:
    message = str(exc)
    assert message.startswith(f"payload store unavailable: {STORE} "), message
    for phrase in phrases:
        assert phrase in message, message
    assert AZURITE_KEY not in message and "sig=" not in message
    assert not isinstance(exc, PayloadError)  # code that handles a missing payload goes on


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_blob_endpoint_nothing_listens_on_is_an_outage(operation: str) -> None:
    store = blob_store(f"http://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(PayloadStoreUnavailable) as err:
            OPERATIONS[operation](store)
    finally:
        store.close()
    assert_outage(err.value, "could not be reached (ServiceRequestError)")
    assert isinstance(err.value.__cause__, ServiceRequestError)
    assert "ServiceRequestError" in err.value.detail


@pytest.mark.parametrize(
    ("status", "code", "says"),
    [
        (503, "ServerBusy", "is unavailable: it answered HTTP 503 ServerBusy"),
        (500, "InternalError", "is unavailable: it answered HTTP 500 InternalError"),
        (429, "TooManyRequests", "is throttling requests: it answered HTTP 429"),
    ],
)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_blob_service_that_is_busy_or_failing_is_an_outage(
    operation: str, status: int, code: str, says: str
) -> None:
    with blob_peer(always=Failure(status, code)) as peer:
        store = blob_store(peer.url)
        try:
            with pytest.raises(PayloadStoreUnavailable) as err:
                OPERATIONS[operation](store)
        finally:
            store.close()
    assert_outage(err.value, says, "(HttpResponseError)")
    assert isinstance(err.value.__cause__, HttpResponseError)
    assert err.value.__cause__.status_code == status
    assert peer.failed  # the request reached the peer: an answer of the service


def test_a_blob_service_that_hangs_up_without_answering_is_an_outage() -> None:
    with blob_peer(always=Failure(None)) as peer:
        store = blob_store(peer.url)
        try:
            with pytest.raises(PayloadStoreUnavailable) as err:
                store.get(REF)
        finally:
            store.close()
    assert_outage(err.value, "did not answer in full (ServiceResponseError)")
    assert isinstance(err.value.__cause__, ServiceResponseError)


def configured_blob_store(base_url: str, **env: str) -> BlobPayloadStore:
    """The Blob store ``build_payload_store`` makes of a configuration with ``env`` (the
    ``STEPWAY_BLOB_*`` variables), its endpoint ``base_url`` (path-style, as Azurite)
    instead of the account's https one."""
    data = DataConfig.read(
        EnvReader(
            {
                "STEPWAY_RUN_STORE_URL": "sqlite:///runs.db",  # read, never opened
                "STEPWAY_PAYLOAD_STORE": "https://stx.blob.core.windows.net/payloads",
                **env,
            }
        ),
        need_queue=False,
    )
    assert data is not None and data.payload_store is not None
    endpoint = {"account_url": f"{base_url}/{AZURITE_ACCOUNT}", "container": CONTAINER}
    data = data.model_copy(update={"payload_store": data.payload_store.model_copy(update=endpoint)})
    store = build_payload_store(data, AzureNamedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY))
    assert isinstance(store, BlobPayloadStore)
    return store


def test_a_blob_service_that_stays_busy_is_an_outage_after_a_few_seconds() -> None:
    """Stepway's defaults, not the Azure SDK's (4 requests and about 84 s of back-off):
    ``1 + retry_total`` requests, then the outage, seconds later, so that a worker
    waiting on the Task API gets its 503 before its own timeout."""
    with blob_peer(always=Failure(503, "ServerBusy")) as peer:
        store = configured_blob_store(peer.url)
        began = time.monotonic()
        try:
            with pytest.raises(PayloadStoreUnavailable) as err:
                store.put(REF, b'{"a":1}')
        finally:
            store.close()
        took = time.monotonic() - began
    assert_outage(err.value, "is unavailable: it answered HTTP 503 ServerBusy")
    assert len(peer.failed) == 1 + BlobClientSettings().retry_total == 3
    assert took < 20, took  # a guard: about 7 s of back-off


def test_a_blob_service_that_never_answers_is_cut_off_by_the_configured_read_timeout() -> None:
    with blob_peer(always=Failure(None, hold=True)) as peer:
        store = configured_blob_store(
            peer.url,
            STEPWAY_BLOB_READ_TIMEOUT_SECONDS="0.5",
            STEPWAY_BLOB_RETRY_TOTAL="1",
            STEPWAY_BLOB_INITIAL_BACKOFF_SECONDS="0",
            STEPWAY_BLOB_INCREMENT_BASE="0",
        )
        began = time.monotonic()
        try:
            with pytest.raises(PayloadStoreUnavailable) as err:
                store.get(REF)
        finally:
            store.close()
        took = time.monotonic() - began
    assert_outage(err.value, "did not answer within the read timeout (ServiceResponseTimeoutError)")
    assert isinstance(err.value.__cause__, ServiceResponseTimeoutError)
    assert len(peer.failed) == 2  # the request and its one retry, each held unanswered
    assert took < 10, took  # 2 x 0.5 s and a back-off of at most 0.5 s


def test_a_blob_service_that_refuses_is_a_refusal_naming_its_error() -> None:
    with blob_peer(always=Failure(403, "AuthorizationPermissionMismatch")) as peer:
        store = blob_store(peer.url)
        try:
            with pytest.raises(PayloadStoreRefused) as err:
                store.put(REF, b"{}")
        finally:
            store.close()
    message = str(err.value)
    assert message == (
        f"{STORE} refused to write {REF}: it answered HTTP 403 "
        "AuthorizationPermissionMismatch (HttpResponseError)"
    )
    assert isinstance(err.value.__cause__, HttpResponseError)


@needs_azurite
def test_azurite_answers_a_missing_container_with_a_refusal_and_a_missing_blob_not_found() -> None:
    assert AZURITE_URL
    base = AZURITE_URL.rsplit("/", 1)[0]
    container = f"none-{uuid.uuid4().hex[:12]}"
    store = blob_store(base, container)
    try:
        with pytest.raises(PayloadStoreRefused) as err:
            store.put(REF, b"{}")
        assert "HTTP 404 ContainerNotFound" in str(err.value)
        assert f"container {container!r}" in str(err.value)
        with pytest.raises(PayloadNotFound):
            store.get(REF)
        assert store.exists(REF) is False
    finally:
        store.close()


@pytest.fixture
def azurite_behind_a_peer() -> Iterator[tuple[BlobPayloadStore, Any]]:
    """The adapter on a new container of Azurite, reached through a peer that fails the
    requests it is told to."""
    if not AZURITE_URL:
        pytest.skip("needs STEPWAY_TEST_AZURITE_BLOB_URL with azurite-blob running")
    with blob_peer(upstream=AZURITE_URL.rsplit("/", 1)[0]) as peer:
        store = blob_store(peer.url, f"t-{uuid.uuid4().hex[:20]}", create_container=True)
        try:
            yield store, peer
        finally:
            store._container.delete_container()
            store.close()


@needs_azurite
def test_a_call_that_met_an_outage_wrote_nothing_and_succeeds_when_tried_again(
    azurite_behind_a_peer: tuple[BlobPayloadStore, Any],
) -> None:
    store, peer = azurite_behind_a_peer
    store.put(REF, b'{"v":1}')
    peer.fail(Failure(503, "ServerBusy"), lambda method, _: method == "PUT")
    with pytest.raises(PayloadStoreUnavailable):
        store.put(REF, b'{"v":2}')
    assert store.get(REF) == b'{"v":1}'  # the failed write wrote nothing
    peer.fail(Failure(500, "OperationTimedOut"), lambda method, _: method == "GET")
    with pytest.raises(PayloadStoreUnavailable, match="HTTP 500 OperationTimedOut"):
        store.get(REF)
    assert store.put(REF, b'{"v":2}') == REF  # the outage is over: the same calls succeed
    assert store.get(REF) == b'{"v":2}'
    assert [status for *_, status in peer.failed] == [503, 500]


# --- the local directory ---------------------------------------------------------------

#: a child process whose file handles run out (its own limit, not this process's)
_OUT_OF_FILE_HANDLES = textwrap.dedent(
    """
    import resource, sys
    from engine.adapters.payload_local import LocalPayloadStore
    from engine.ports.payload_store import PayloadNotFound, PayloadStoreUnavailable

    store = LocalPayloadStore(sys.argv[1], secret="test-secret-0123456789")
    store.put("payloads/wf/kept.json", b"1")
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    held = []
    try:
        while True:
            held.append(open("/dev/null", "rb"))
    except OSError:
        pass
    for name, call in (
        ("put", lambda: store.put("payloads/wf/new.json", b"2")),
        ("get", lambda: store.get("payloads/wf/kept.json")),
    ):
        try:
            call()
        except PayloadStoreUnavailable as exc:
            print(name, "unavailable", exc, "|", exc.detail, "|", type(exc.__cause__).__name__)
    for f in held:
        f.close()
    try:
        store.get("payloads/wf/new.json")
    except PayloadNotFound:
        print("new not found")
    print("kept", store.get("payloads/wf/kept.json").decode())
    """
)


def test_a_directory_the_process_cannot_open_files_in_is_an_outage(tmp_path: Path) -> None:
    root = tmp_path / "payloads"
    done = subprocess.run(
        [sys.executable, "-c", _OUT_OF_FILE_HANDLES, str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    where = f"the payload directory {str(root.resolve())!r}"
    assert lines == [
        f"put unavailable payload store unavailable: {where} cannot be used to write "
        "payloads/wf/new.json: Too many open files (EMFILE) | OSError EMFILE | OSError",
        f"get unavailable payload store unavailable: {where} cannot be used to read "
        "payloads/wf/kept.json: Too many open files (EMFILE) | OSError EMFILE | OSError",
        "new not found",  # the failed write left nothing behind
        "kept 1",
    ]


def test_a_missing_local_payload_is_still_not_found(tmp_path: Path) -> None:
    store = LocalPayloadStore(tmp_path / "payloads", secret="test-secret-0123456789")
    with pytest.raises(PayloadNotFound):
        store.get(REF)
    assert store.exists(REF) is False
    assert store.delete(REF) is False
