"""How the SDK's client reaches the Task API (stepway_worker/client.py and keepalive.py),
over real sockets: calls share kept-alive connections, a connection the server closed
while idle is replaced without failing a call, HTTPS verifies the server against the
trust store httpx would use (``SSL_CERT_FILE`` honoured), a configured proxy is used
(and ``NO_PROXY`` bypasses it), and a custom httpx transport still carries the calls."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from stepway_worker import Registry, TransientError, Worker, worker_task
from stepway_worker.client import ConflictError, TaskClient
from stepway_worker.testing import FakeTaskServer

from .conftest import fast_settings  # type: ignore[import-not-found]


def test_calls_share_one_kept_alive_connection(server: FakeTaskServer) -> None:
    client = TaskClient(server.url)
    task_id = server.enqueue("echo", {"n": 1})
    try:
        for _ in range(5):
            client.poll("idle", worker_id="w", count=1, timeout_ms=0)
        (task,) = client.poll("echo", worker_id="w", count=1, timeout_ms=0)
        client.update(
            {
                "taskId": task["taskId"],
                "workerId": "w",
                "status": "COMPLETED",
                "outputData": {"ü": "✓"},
            }
        )
    finally:
        client.close()
    assert server.wait_result(task_id)["outputData"] == {"ü": "✓"}
    assert server.connections_opened == 1


class _OneAnswerPerConnection:
    """An HTTP/1.1 server that answers one request on each connection (200, ``[]``,
    no ``Connection: close``) and then closes it, as a server whose keep-alive timeout
    ran out does; ``closed`` is set once it has."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 2\r\n\r\n[]"
                )
            self.closed.set()


def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    server = _OneAnswerPerConnection()
    client = TaskClient(f"http://127.0.0.1:{server.port}")
    try:
        assert client.poll("x", worker_id="w", count=1, timeout_ms=0) == []
        assert server.closed.wait(5)
        # the idle connection is closed on the server's side: the call opens a new one
        # instead of failing
        assert client.poll("x", worker_id="w", count=1, timeout_ms=0) == []
    finally:
        client.close()
        server.listener.close()
    assert server.accepted == 2


# --- HTTPS -------------------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: (certificate PEM, key PEM)."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stepway test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture
def https_server(certificate: tuple[Path, Path]) -> Iterator[FakeTaskServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    with FakeTaskServer(ssl_context=context) as fake:
        yield fake


def test_a_worker_works_over_https_with_the_trust_store_of_ssl_cert_file(
    https_server: FakeTaskServer,
    certificate: tuple[Path, Path],
    reg: Registry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))

    @worker_task("echo", registry=reg)
    def echo(n: int) -> dict[str, int]:
        return {"n": n + 1}

    first = https_server.enqueue("echo", {"n": 1})
    second = https_server.enqueue("echo", {"n": 2})
    assert https_server.url.startswith("https://")
    with Worker(reg, settings=fast_settings(https_server.url)):
        assert https_server.wait_result(first)["outputData"] == {"n": 2}
        assert https_server.wait_result(second)["outputData"] == {"n": 3}


def test_an_untrusted_certificate_fails_the_call(https_server: FakeTaskServer) -> None:
    client = TaskClient(https_server.url)
    try:
        with pytest.raises(TransientError, match="CERTIFICATE_VERIFY_FAILED"):
            client.poll("x", worker_id="w", count=1, timeout_ms=0)
    finally:
        client.close()


# --- proxies -----------------------------------------------------------------------------


class _Proxy:
    """A forward proxy that answers every request itself (200, ``[]``) and records
    its request target (absolute-form for a proxied call)."""

    def __init__(self) -> None:
        seen: list[str] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                seen.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"[]")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Proxy]:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    found = _Proxy()
    monkeypatch.setenv("HTTP_PROXY", found.url)
    yield found
    found.close()


def test_calls_go_through_the_configured_proxy(proxy: _Proxy, server: FakeTaskServer) -> None:
    client = TaskClient(server.url)
    try:
        assert client.poll("x", worker_id="w", count=1, timeout_ms=0) == []
    finally:
        client.close()
    assert len(proxy.seen) == 1
    assert proxy.seen[0].startswith(f"{server.url}/api/tasks/poll/batch/x?")
    assert server.state.polls == []


def test_no_proxy_bypasses_the_proxy(
    proxy: _Proxy, server: FakeTaskServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = TaskClient(server.url)
    try:
        assert client.poll("x", worker_id="w", count=1, timeout_ms=0) == []
    finally:
        client.close()
    assert proxy.seen == []
    assert [p.task_type for p in server.state.polls] == ["x"]


# --- a custom transport ------------------------------------------------------------------


def test_a_custom_transport_carries_the_calls() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/update-v2"):
            return httpx.Response(409, json={"message": "stale attempt"})
        return httpx.Response(200, json=[{"taskId": "t1"}])

    client = TaskClient("http://task-api.invalid/base", transport=httpx.MockTransport(answer))
    try:
        assert client.poll("x", worker_id="w", count=2, timeout_ms=0) == [{"taskId": "t1"}]
        with pytest.raises(ConflictError, match="stale attempt"):
            client.update_v2({"taskId": "t1", "status": "COMPLETED"}, headers={"x-h": "1"})
    finally:
        client.close()
    assert str(seen[0].url) == (
        "http://task-api.invalid/base/api/tasks/poll/batch/x?workerid=w&count=2&timeout=0"
    )
    assert seen[1].headers["content-type"] == "application/json"
    assert seen[1].headers["x-h"] == "1"
    assert seen[1].headers["user-agent"] == "stepway-worker/0.1"
