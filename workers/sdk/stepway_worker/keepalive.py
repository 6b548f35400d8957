"""Keep-alive HTTP/1.1 connections to the Task API's origin, on the standard library's
``http.client``: the worker's hot path (polls and result posts, one request a task).

A general client (httpx) builds request, URL, header, cookie and response objects and
runs auth, redirect and event-hook steps on every call; for a worker that makes one
small JSON request a task, that was most of its CPU. This pool keeps the connections
open and sends the request bytes with ``http.client``; :class:`~stepway_worker.client.
TaskClient` uses it only for a direct connection to its own server (no proxy applies,
no custom transport), and keeps httpx for everything else.

Thread safe: a connection is used by one thread at a time; idle ones wait in a stack.
An idle connection the server has closed (or sent anything on) is replaced before use,
as httpcore and urllib3 do.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["KeepAlivePool", "Reply"]

#: idle connections kept open at most (httpx keeps 20 by default too)
MAX_IDLE = 20


@dataclass(slots=True)
class Reply:
    """An HTTP response read to its end."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def _dropped(sock: socket.socket) -> bool:
    """True when an idle connection's socket is readable: the server closed it (or
    sent bytes no request asked for), so it must not carry the next request."""
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


class KeepAlivePool:
    """Connections to the origin of ``base_url`` (``http`` or ``https``); request
    targets are joined to its path, as httpx's ``base_url`` does."""

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: int = MAX_IDLE,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.base_path = parts.path.rstrip("/")
        if self.https and ssl_context is None:
            ssl_context = ssl.create_default_context()
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(
        self,
        method: str,
        target: str,
        *,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float,
    ) -> Reply:
        """Send one request and read its response to the end. Raises ``OSError``
        (connection refused or reset, timeout, TLS) or ``http.client.HTTPException``
        (the server closed without an answer, a malformed answer); the connection is
        then closed, never reused."""
        conn = self._take(timeout)
        try:
            conn.request(method, self.base_path + target, body=body, headers=headers)
            response = conn.getresponse()
            reply = Reply(response.status, response.read())
        except BaseException:
            conn.close()
            raise
        self._give_back(conn)
        return reply

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self, timeout: float) -> http.client.HTTPConnection:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            if self.https:
                return http.client.HTTPSConnection(
                    self.host, self.port, timeout=timeout, context=self._ssl_context
                )
            return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        # a closed connection (the server answered "Connection: close") reconnects
        # on its next request, with this timeout
        conn.timeout = timeout
        sock = conn.sock
        if sock is not None:
            if _dropped(sock):
                conn.close()
            else:
                sock.settimeout(timeout)
        return conn

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()
