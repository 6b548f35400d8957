"""Outbound clients are reused across calls of one engine process and keep their
connections alive (https per TLS server name). A server that writes headers and body in
two segments would stall a reused connection on the client's delayed ACK; connections
acknowledge at once instead (engine/runtime/builtins/quickack.py), and where they cannot
(not Linux) plain http connections are closed after each response."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from engine.runtime.builtins import ActivityDeps, OutboundSettings, http_activity
from engine.runtime.builtins.outbound import OutboundClients
from engine.runtime.builtins.quickack import QUICKACK, QuickAckBackend, QuickAckStream


class _KeepAlive(BaseHTTPRequestHandler):
    """Answers ``{}`` and keeps the connection open; records the client's port."""

    protocol_version = "HTTP/1.1"
    ports: list[int]

    def do_GET(self) -> None:
        self.ports.append(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[int]]]:
    ports: list[int] = []
    handler = type("Handler", (_KeepAlive,), {"ports": ports})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/", ports
    finally:
        httpd.shutdown()
        httpd.server_close()


def _call(deps: ActivityDeps, url: str) -> None:
    result = http_activity(deps, {"http_request": {"uri": url, "method": "GET"}})
    assert result.status == "COMPLETED", result.reason


def test_plain_http_connections_are_reused_where_they_acknowledge_at_once(
    server: tuple[str, list[int]],
) -> None:
    """This server keeps connections open and writes headers and body apart. The engine's
    clients reuse one connection for consecutive calls (Linux); a call without them has a
    connection of its own."""
    url, ports = server
    deps = ActivityDeps(outbound=OutboundSettings(connect_timeout_seconds=2))
    for _ in range(3):
        _call(deps, url)
    assert len(ports) == 3
    assert len(set(ports)) == (1 if QUICKACK else 3), ports

    ports.clear()
    deps.http_clients = None
    for _ in range(2):
        _call(deps, url)
    assert len(ports) == 2 and len(set(ports)) == 2, ports


def test_every_outbound_client_opens_quick_ack_connections() -> None:
    clients = OutboundClients()
    for url in ("http://a.example/", "https://a.example/"):
        pool: Any = clients.for_url(httpx.URL(url))._transport._pool  # type: ignore[attr-defined]
        assert isinstance(pool._network_backend, QuickAckBackend)
    clients.close()


@pytest.mark.skipif(not QUICKACK, reason="TCP_QUICKACK is Linux's")
def test_a_read_switches_the_socket_to_quick_ack_first() -> None:
    """Quick-ack mode is not permanent (tcp(7)): it is on when each read begins."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    seen: list[int] = []

    class Inner:
        def get_extra_info(self, info: str) -> Any:
            return client if info == "socket" else None

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            seen.append(client.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK))
            return client.recv(max_bytes)

    try:
        stream = QuickAckStream(Inner())  # type: ignore[arg-type]
        for chunk in (b"head", b"body"):
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
            peer.sendall(chunk)
            assert stream.read(16) == chunk
        assert seen == [1, 1]
    finally:
        for s in (client, peer, listener):
            s.close()


def test_one_client_per_tls_server_name_and_a_bounded_number() -> None:
    clients = OutboundClients(max_clients=2)
    a = clients.for_url(httpx.URL("https://a.example/x"))
    assert clients.for_url(httpx.URL("https://A.example/y")) is a
    assert clients.for_url(httpx.URL("https://b.example/")) is not a
    plain = clients.for_url(httpx.URL("http://a.example/"))
    assert plain is not a and clients.for_url(httpx.URL("http://b.example/")) is plain
    # a third name evicts the least recently used (a.example)
    clients.for_url(httpx.URL("https://c.example/"))
    assert clients.for_url(httpx.URL("https://a.example/")) is not a
    clients.close()
