"""The control plane's HTTP server keeps an idle kept-alive connection open longer than
the clients that reuse one (control_plane/cli/http_server.py): a request sent on a
connection idle for longer than uvicorn's default of 5 s is answered, not reset."""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import urlsplit

_REQUEST = b"GET /health HTTP/1.1\r\nHost: stepway\r\n\r\n"


def _exchange(sock: socket.socket) -> bytes:
    """Send one request; the response head and body (Content-Length framed)."""
    sock.sendall(_REQUEST)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data  # closed by the server
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head


def test_an_idle_kept_alive_connection_is_still_served_after_6_seconds(make_server: Any) -> None:
    server = make_server()
    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        assert _exchange(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6)  # longer than uvicorn's default keep-alive (5 s) and httpx's pool
        assert _exchange(sock).startswith(b"HTTP/1.1 200")
