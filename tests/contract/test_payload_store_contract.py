"""Contract suite of the payload store port, run against every adapter.

Local directory always; Azure Blob against Azurite when
STEPWAY_TEST_AZURITE_BLOB_URL is set (e.g. http://127.0.0.1:10000/devstoreaccount1).
Signed URLs are exercised over real HTTP with httpx. The local adapter's URLs are
served by the control plane, whose route is not written yet; the fixture serves
them with a minimal stand-in built on ``verify_url``, the adapter's check.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from azure.core.credentials import AzureNamedKeyCredential

from engine.adapters.payload_blob import BlobPayloadStore
from engine.adapters.payload_local import LocalPayloadStore
from engine.ports.payload_store import (
    InvalidReference,
    PayloadKind,
    PayloadLimits,
    PayloadNotFound,
    PayloadStore,
    PayloadTooLarge,
    check_size,
    offload_if_large,
    payload_key,
    resolve,
)

AZURITE_URL = os.environ.get("STEPWAY_TEST_AZURITE_BLOB_URL")
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
SECRET = "test-secret-0123456789abcdef"


# --- a stand-in for the control plane's /api/payloads route ----------------------


def _serve_local(store_ref: dict[str, LocalPayloadStore]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: bytes = b"") -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            store = store_ref["store"]
            reference = store.verify_url(self.path, "read")
            if reference is None:
                self._reply(403)
                return
            try:
                self._reply(200, store.get(reference))
            except PayloadNotFound:
                self._reply(404)

        def do_PUT(self) -> None:
            store = store_ref["store"]
            reference = store.verify_url(self.path, "write")
            if reference is None:
                self._reply(403)
                return
            length = int(self.headers.get("Content-Length", "0"))
            check_size(reference, length, store.limits)
            store.put(reference, self.rfile.read(length), self.headers.get("Content-Type", ""))
            self._reply(201)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def local_server() -> Iterator[tuple[str, dict[str, LocalPayloadStore]]]:
    holder: dict[str, LocalPayloadStore] = {}
    server = _serve_local(holder)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", holder
    finally:
        server.shutdown()
        server.server_close()


# --- adapter fixture ------------------------------------------------------------------


@dataclass
class Adapter:
    kind: str
    store: PayloadStore


def _azurite_param() -> Any:
    return pytest.param(
        "azurite",
        marks=[
            pytest.mark.azurite,
            pytest.mark.skipif(
                not AZURITE_URL,
                reason="Blob adapter not tested: set STEPWAY_TEST_AZURITE_BLOB_URL "
                "(e.g. http://127.0.0.1:10000/devstoreaccount1) with azurite-blob running",
            ),
        ],
    )


def make_store(
    kind: str,
    tmp_path: Path,
    local_server: tuple[str, dict[str, LocalPayloadStore]],
    limits: PayloadLimits | None = None,
) -> Iterator[Adapter]:
    if kind == "local":
        base_url, holder = local_server
        store = LocalPayloadStore(
            tmp_path / "payloads", secret=SECRET, base_url=base_url, limits=limits
        )
        holder["store"] = store
        yield Adapter("local", store)
        return
    assert AZURITE_URL
    blob = BlobPayloadStore(
        AZURITE_URL,
        f"t-{uuid.uuid4().hex[:20]}",
        AzureNamedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY),
        limits=limits,
        create_container=True,
    )
    try:
        yield Adapter("azurite", blob)
    finally:
        blob._container.delete_container()
        blob.close()


@pytest.fixture(params=["local", _azurite_param()])
def adapter(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    local_server: tuple[str, dict[str, LocalPayloadStore]],
) -> Iterator[Adapter]:
    yield from make_store(request.param, tmp_path, local_server)


@pytest.fixture
def store(adapter: Adapter) -> PayloadStore:
    return adapter.store


# --- basic operations ------------------------------------------------------------------


def test_adapter_satisfies_port(store: PayloadStore) -> None:
    assert isinstance(store, PayloadStore)


def test_put_get_roundtrip(store: PayloadStore) -> None:
    ref = store.put("payloads/wf-1/input.json", b'{"a":1}', "application/json")
    assert ref == "payloads/wf-1/input.json"
    assert store.get(ref) == b'{"a":1}'
    binary = bytes(range(256)) * 100
    ref2 = store.put("payloads/wf-1/task/out.bin", binary, "application/octet-stream")
    assert store.get(ref2) == binary
    store.put(ref, b"[2]")  # overwrite
    assert store.get(ref) == b"[2]"


def test_exists_and_delete(store: PayloadStore) -> None:
    ref = store.put("payloads/w/x.json", b"1")
    assert store.exists(ref)
    assert store.delete(ref)
    assert not store.exists(ref)
    assert not store.delete(ref)


def test_missing_payload_is_a_clear_error(store: PayloadStore) -> None:
    with pytest.raises(PayloadNotFound) as err:
        store.get("payloads/nope/missing.json")
    assert "payloads/nope/missing.json" in str(err.value)
    assert err.value.reference == "payloads/nope/missing.json"
    assert not store.exists("payloads/nope/missing.json")


@pytest.mark.parametrize("bad", ["", "../etc/passwd", "/abs/x.json", "a//b", "a/../b", "a/b\\c"])
def test_invalid_references_are_refused(store: PayloadStore, bad: str) -> None:
    with pytest.raises(InvalidReference):
        store.put(bad, b"x")
    with pytest.raises(InvalidReference):
        store.get(bad)


def test_payload_key() -> None:
    assert payload_key("wf-1", "input") == "payloads/wf-1/input.json"
    assert payload_key("wf-1", "t1/output.json") == "payloads/wf-1/t1/output.json"
    with pytest.raises(InvalidReference):
        payload_key("..", "x")


# --- signed URLs over HTTP -------------------------------------------------------------


def test_signed_read_url_downloads(store: PayloadStore) -> None:
    ref = store.put("payloads/wf/big.json", b'{"big":true}')
    url = store.signed_url(ref, "read", 300)
    r = httpx.get(url)
    assert r.status_code == 200 and r.content == b'{"big":true}'


def test_signed_write_url_uploads(store: PayloadStore) -> None:
    ref = "payloads/wf/t1/output.json"
    url = store.signed_url(ref, "write", 300)
    r = httpx.put(
        url,
        content=b'{"uploaded":1}',
        headers={"x-ms-blob-type": "BlockBlob", "Content-Type": "application/json"},
    )
    assert r.status_code in (200, 201), r.text
    assert store.get(ref) == b'{"uploaded":1}'


def test_signed_url_grants_only_its_operation_and_path(store: PayloadStore) -> None:
    ref = store.put("payloads/wf/a.json", b"1")
    store.put("payloads/wf/b.json", b"2")
    read_url = store.signed_url(ref, "read", 300)
    put = httpx.put(read_url, content=b"x", headers={"x-ms-blob-type": "BlockBlob"})
    assert put.status_code == 403
    write_url = store.signed_url(ref, "write", 300)
    assert httpx.get(write_url).status_code == 403
    other = read_url.replace("/a.json", "/b.json")
    assert httpx.get(other).status_code == 403
    tampered = _tamper_signature(read_url)
    assert httpx.get(tampered).status_code == 403
    assert store.get(ref) == b"1"


def test_signed_url_expires(store: PayloadStore) -> None:
    ref = store.put("payloads/wf/short.json", b"1")
    url = store.signed_url(ref, "read", 2)  # expiries have whole-second precision
    assert httpx.get(url).status_code == 200
    time.sleep(3.1)
    assert httpx.get(url).status_code == 403


def _tamper_signature(url: str) -> str:
    # Rebuild the query rather than search-and-replace: a SAS signature may contain
    # '/' or '+', which a URL can carry encoded or not.
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    sig = query["sig"][0]
    query["sig"] = [("A" if sig[0] != "A" else "B") + sig[1:]]
    tampered = urlunsplit(parts._replace(query=urlencode(query, doseq=True)))
    assert tampered != url
    return tampered


# --- the local adapter's signature check ----------------------------------------------


def test_local_verify_signature(tmp_path: Path) -> None:
    now = 1_700_000_000.0
    store = LocalPayloadStore(tmp_path, secret=SECRET, base_url="https://cp", clock=lambda: now)
    url = store.signed_url("payloads/w/x.json", "write", 60)
    assert url.startswith("https://cp/api/payloads/payloads/w/x.json?exp=")
    q = parse_qs(urlsplit(url).query)
    exp, sig = q["exp"][0], q["sig"][0]
    assert int(exp) == int(now) + 60  # now is a whole second
    assert store.verify_signature("payloads/w/x.json", "write", exp, sig, now=now)
    assert store.verify_url(url, "write", now=now) == "payloads/w/x.json"
    # tampered signature, path, operation, expiry
    assert not store.verify_signature("payloads/w/x.json", "write", exp, sig[:-1] + "A", now=now)
    assert not store.verify_signature("payloads/w/y.json", "write", exp, sig, now=now)
    assert not store.verify_signature("payloads/w/x.json", "read", exp, sig, now=now)
    assert not store.verify_signature("payloads/w/x.json", "write", int(exp) + 1, sig, now=now)
    assert not store.verify_signature("payloads/w/x.json", "write", "soon", sig, now=now)
    assert not store.verify_url(url.replace("x.json", "../x.json"), "write", now=now)
    # expired
    assert not store.verify_signature("payloads/w/x.json", "write", exp, sig, now=now + 60)
    assert store.verify_url(url, "write", now=now + 61) is None
    # another secret
    other = LocalPayloadStore(tmp_path, secret="another-secret-0123456789", clock=lambda: now)
    assert not other.verify_signature("payloads/w/x.json", "write", exp, sig, now=now)


def test_local_secret_must_be_long_enough(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        LocalPayloadStore(tmp_path, secret="short")


# --- thresholds and the maximum --------------------------------------------------------


def test_default_limits() -> None:
    limits = PayloadLimits()
    for kind in PayloadKind:
        assert limits.threshold(kind) == 10 * 1024
    assert limits.max_size == 10 * 1024 * 1024


def _value_of_size(size: int) -> str:
    """A JSON string whose compact encoding is exactly ``size`` bytes."""
    return "x" * (size - 2)


def test_small_values_stay_inline(store: PayloadStore) -> None:
    value = {"a": 1}
    assert offload_if_large(store, PayloadKind.TASK_INPUT, "payloads/w/in.json", value) == (
        value,
        None,
    )
    at_threshold = _value_of_size(10 * 1024)
    inline, ref = offload_if_large(
        store, PayloadKind.TASK_OUTPUT, "payloads/w/o.json", at_threshold
    )
    assert (inline, ref) == (at_threshold, None)
    assert not store.exists("payloads/w/o.json")
    assert resolve(store, inline, ref) == at_threshold


def test_large_values_are_offloaded_and_resolved(store: PayloadStore) -> None:
    value = {"rows": [{"i": i, "text": "é" * 20} for i in range(400)]}
    inline, ref = offload_if_large(store, PayloadKind.WORKFLOW_OUTPUT, "payloads/w/out.json", value)
    assert inline is None and ref == "payloads/w/out.json"
    assert json.loads(store.get(ref)) == value
    assert resolve(store, inline, ref) == value
    just_over = _value_of_size(10 * 1024 + 1)
    inline, ref = offload_if_large(store, PayloadKind.TASK_INPUT, "payloads/w/in.json", just_over)
    assert inline is None and ref is not None
    assert resolve(store, None, ref) == just_over


def test_thresholds_per_kind(adapter: Adapter, tmp_path: Path, local_server: Any) -> None:
    limits = PayloadLimits(
        workflow_input_threshold=10,
        workflow_output_threshold=20,
        task_input_threshold=30,
        task_output_threshold=40,
        max_size=100,
    )
    for sized in make_store(adapter.kind, tmp_path / "limits", local_server, limits):
        s = sized.store
        value = _value_of_size(25)
        expected_offloaded = {
            PayloadKind.WORKFLOW_INPUT: True,
            PayloadKind.WORKFLOW_OUTPUT: True,
            PayloadKind.TASK_INPUT: False,
            PayloadKind.TASK_OUTPUT: False,
        }
        for kind, offloaded in expected_offloaded.items():
            inline, ref = offload_if_large(s, kind, f"payloads/w/{kind.name}.json", value)
            assert (ref is not None) == offloaded, kind
            assert resolve(s, inline, ref) == value
        # explicit limits override the store's
        inline, ref = offload_if_large(
            s, PayloadKind.TASK_INPUT, "payloads/w/x.json", value, limits=PayloadLimits()
        )
        assert ref is None


def test_above_maximum_is_refused_with_a_clear_reason(store: PayloadStore) -> None:
    limits = PayloadLimits(task_output_threshold=10, max_size=1000)
    value = _value_of_size(1001)
    with pytest.raises(PayloadTooLarge) as err:
        offload_if_large(store, PayloadKind.TASK_OUTPUT, "payloads/w/t1.json", value, limits=limits)
    assert err.value.size == 1001 and err.value.maximum == 1000
    message = str(err.value)
    assert "task output payloads/w/t1.json" in message
    assert "1001 bytes" in message and "1000 bytes" in message
    assert not store.exists("payloads/w/t1.json")
    # exactly the maximum is allowed (offloaded)
    _, ref = offload_if_large(
        store, PayloadKind.TASK_OUTPUT, "payloads/w/t1.json", _value_of_size(1000), limits=limits
    )
    assert ref is not None


def test_default_maximum_is_10_mb(store: PayloadStore) -> None:
    with pytest.raises(PayloadTooLarge, match="workflow input"):
        offload_if_large(
            store,
            PayloadKind.WORKFLOW_INPUT,
            "payloads/w/in.json",
            _value_of_size(10 * 1024**2 + 1),
        )
