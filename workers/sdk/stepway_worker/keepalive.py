"""Keep-alive HTTP/1.1 connections to the Task API's origin: the worker's hot path
(polls and result posts, one request a task).

A general client (httpx) builds request, URL, header, cookie and response objects and
runs auth, redirect and event-hook steps on every call, and even the standard
library's ``http.client`` parses each response's headers with the ``email`` package
and wraps the socket in a new file object; for a worker that makes one small JSON
request a task that was most of its CPU. This module writes the request bytes itself
and reads the response from a per-connection buffer: a status line, header lines, then
a body delimited by ``Content-Length``, by chunked transfer coding, or by the end of
the connection (RFC 9112, section 6.3). :class:`~stepway_worker.client.TaskClient`
uses it only for a direct connection to its own server (no proxy applies, no custom
transport), and keeps httpx for everything else.

Thread safe: a connection is used by one thread at a time; idle ones wait in a stack.
An idle connection the server has closed (or sent anything on) is replaced before use,
as httpcore and urllib3 do. Errors are ``OSError`` (connect, reset, timeout, TLS) or
``http.client.HTTPException`` (no answer, a malformed answer), and close the
connection.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
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
#: the most bytes a response's status line and headers may take
MAX_HEAD = 64 * 1024
#: the most bytes one chunk-size or trailer line may take
MAX_LINE = 8 * 1024
RECV = 64 * 1024
#: what a request target or a header may not contain (http.client refuses the same)
_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
_BAD_HEADER = re.compile(r"[\r\n\x00]")
_NO_BODY = frozenset({204, 304})


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
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


class _Connection:
    """One socket and the bytes read from it that no response consumed yet."""

    __slots__ = ("buf", "scratch", "sock", "timeout")

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.timeout = timeout
        self.buf = bytearray()
        # received into, then copied: a fresh 64 KiB bytes object a read would cost
        # an mmap, a shrink and an munmap
        self.scratch = memoryview(bytearray(RECV))

    def set_timeout(self, timeout: float) -> None:
        if timeout != self.timeout:
            self.sock.settimeout(timeout)
            self.timeout = timeout

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def _fill(self) -> bool:
        """Read more into the buffer; False at the end of the connection."""
        n = self.sock.recv_into(self.scratch)
        if not n:
            return False
        self.buf += self.scratch[:n]
        return True

    def _line(self, limit: int) -> bytes:
        """One CRLF-terminated line (without the CRLF)."""
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[: end + 2]
                return line
            if len(self.buf) > limit:
                raise http.client.LineTooLong("a chunk line of the response")
            if not self._fill():
                raise http.client.IncompleteRead(bytes(self.buf))

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise http.client.IncompleteRead(bytes(self.buf), n - len(self.buf))
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def _head(self) -> tuple[str, int, dict[str, str]]:
        """The status line and headers of the next response (names in lower case;
        repeated ones joined with commas)."""
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self.buf) > MAX_HEAD:
                raise http.client.LineTooLong("the response's status line and headers")
            if not self._fill():
                if not self.buf:
                    raise http.client.RemoteDisconnected(
                        "Remote end closed connection without response"
                    )
                raise http.client.IncompleteRead(bytes(self.buf))
        head = bytes(self.buf[:end]).decode("latin-1")
        del self.buf[: end + 4]
        status_line, *lines = head.split("\r\n")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if (
            not version.startswith("HTTP/1.")
            or not code.isdigit()
            or code < "100"
            or rest[3:4] not in ("", " ")
        ):
            raise http.client.BadStatusLine(status_line)
        headers: dict[str, str] = {}
        key = ""
        for line in lines:
            if line[:1] in (" ", "\t") and key:  # obs-fold: the previous value goes on
                headers[key] = f"{headers[key]} {line.strip()}"
                continue
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise http.client.HTTPException(f"malformed response header: {line!r}")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return version, int(code), headers

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_text = self._line(MAX_LINE).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise http.client.HTTPException(f"bad chunk size {size_text!r}") from None
            if size < 0:
                raise http.client.HTTPException(f"bad chunk size {size_text!r}")
            if size == 0:
                while self._line(MAX_LINE):  # trailer fields, up to the empty line
                    pass
                return b"".join(parts)
            parts.append(self._exactly(size))
            if self._exactly(2) != b"\r\n":
                raise http.client.HTTPException("a chunk not followed by CRLF")

    def _to_end(self) -> bytes:
        while self._fill():
            pass
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def exchange(self, request: bytes, method: str) -> tuple[Reply, bool]:
        """Send ``request`` (its head and body) and read the response; also whether
        the connection may carry another request."""
        self.sock.sendall(request)
        while True:
            version, status, headers = self._head()
            # an interim response (100 Continue, 103 Early Hints) precedes the final one
            if status >= 200 or status == 101:
                break
        tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        reusable = "close" not in tokens and (version != "HTTP/1.0" or "keep-alive" in tokens)
        coding = headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        if method == "HEAD" or status in _NO_BODY or status < 200:
            content = b""
        elif coding:
            if coding.rsplit(",", 1)[-1].strip() != "chunked":
                # a body delimited by the end of the connection (RFC 9112, 6.3)
                content, reusable = self._to_end(), False
            else:
                content = self._chunked()
        elif length is not None:
            values = {v.strip() for v in length.split(",")}
            if len(values) != 1 or not next(iter(values)).isdigit():
                raise http.client.HTTPException(f"bad Content-Length {length!r}")
            content = self._exactly(int(values.pop()))
        else:
            content, reusable = self._to_end(), False
        if self.buf:  # bytes past the response: nothing else may be read from here
            reusable = False
        return Reply(status, content), reusable


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
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.https else 80
        self._host_header = host if self.port == default_port else f"{host}:{self.port}"
        if self.https and ssl_context is None:
            ssl_context = ssl.create_default_context()
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._idle: list[_Connection] = []
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
        """Send one request and read its response to the end (``Host`` and
        ``Content-Length`` are added). Raises ``ValueError`` for a target or header
        that would break the request apart, else as the module says."""
        path = self.base_path + target
        if _BAD_TARGET.search(path):
            raise ValueError(f"invalid request target {path!r}")
        lines = [f"{method} {path} HTTP/1.1\r\nHost: {self._host_header}\r\n"]
        for name, value in headers.items():
            if _BAD_HEADER.search(name) or _BAD_HEADER.search(value) or ":" in name:
                raise ValueError(f"invalid header {name!r}")
            lines.append(f"{name}: {value}\r\n")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}\r\n")
        lines.append("\r\n")
        request = "".join(lines).encode("latin-1") + (body or b"")
        conn = self._take(timeout)
        try:
            reply, reusable = conn.exchange(request, method)
        except BaseException:
            conn.close()
            raise
        if reusable:
            self._give_back(conn)
        else:
            conn.close()
        return reply

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self, timeout: float) -> _Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect(timeout)
            if _dropped(conn.sock):
                conn.close()
                continue
            conn.set_timeout(timeout)
            return conn

    def _connect(self, timeout: float) -> _Connection:
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            # the request goes out in one send: no need to wait for an ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl_context is not None:
                sock = self._ssl_context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock, timeout)

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()
