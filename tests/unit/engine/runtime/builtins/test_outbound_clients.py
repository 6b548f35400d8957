"""Outbound clients are reused across calls of one engine process; https connections
are kept alive per TLS server name, plain http connections are not (a server that writes
headers and body in two segments would stall each reused connection on delayed ACKs)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from engine.runtime.builtins import ActivityDeps, OutboundSettings, http_activity
from engine.runtime.builtins.outbound import OutboundClients


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


def test_plain_http_connections_are_not_kept_alive(server: tuple[str, list[int]]) -> None:
    """This server keeps connections open and writes headers and body apart: a kept-alive
    connection would wait ~40 ms per request for the client's delayed ACK."""
    url, ports = server
    for clients in (ActivityDeps().http_clients, None):
        ports.clear()
        deps = ActivityDeps(outbound=OutboundSettings(connect_timeout_seconds=2))
        deps.http_clients = clients
        for _ in range(3):
            _call(deps, url)
        assert len(ports) == 3 and len(set(ports)) == 3, ports


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
