"""Test doubles for the built-in activities: a scriptable local HTTP server, a local
Document Intelligence service speaking the REST protocol, and an in-memory payload store.

Used by the unit tests, and usable by end-to-end tests and ``stepway dev`` demos: they
listen on 127.0.0.1 only and need no cloud account.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    """A request as the local server received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lname), None)

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    """What the local server answers. ``delay_seconds`` waits before the status line;
    ``chunked`` sends the body with chunked transfer encoding (no Content-Length), in
    ``chunk_size`` pieces with ``chunk_delay_seconds`` between them."""

    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    chunked: bool = False
    chunk_size: int = 64 * 1024
    chunk_delay_seconds: float = 0.0

    def encoded(self) -> tuple[bytes, dict[str, str]]:
        headers = dict(self.headers)
        if self.body is None:
            return b"", headers
        if isinstance(self.body, bytes):
            return self.body, headers
        if isinstance(self.body, str):
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            return self.body.encode("utf-8"), headers
        headers.setdefault("Content-Type", "application/json")
        return json.dumps(self.body).encode("utf-8"), headers


Handler = Callable[[Request], Reply]


class LocalServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 that answers with ``handler``.

    ``requests`` records every request received. Use as a context manager.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k: v for k, v in self.headers.items()},
                    body=body,
                )
                outer.requests.append(request)
                reply = outer.handler(request)
                if reply.delay_seconds:
                    time.sleep(reply.delay_seconds)
                data, headers = reply.encoded()
                try:
                    self.send_response(reply.status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Connection", "close")
                    if reply.chunked:
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for i in range(0, len(data), reply.chunk_size):
                            piece = data[i : i + reply.chunk_size]
                            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                            self.wfile.flush()
                            if reply.chunk_delay_seconds:
                                time.sleep(reply.chunk_delay_seconds)
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        if self.command != "HEAD":
                            self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading (e.g. the size cap)
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def closed_port() -> int:
    """A local TCP port with nothing listening on it (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class InMemoryPayloadStore:
    """A payload store in a dict: ``put`` returns ``mem://<key>``."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[bytes, str]] = {}

    def put(self, key: str, data: bytes, content_type: str = "application/json") -> str:
        reference = f"mem://{key}"
        self.items[reference] = (bytes(data), content_type)
        return reference

    def get(self, reference: str) -> bytes:
        return self.items[reference][0]


class FakeDocumentIntelligence:
    """A local Document Intelligence service (REST protocol of api-version 2024-11-30).

    ``POST /documentintelligence/documentModels/{modelId}:analyze`` answers 202 with
    ``Operation-Location``; ``GET`` of that location answers ``{"status": "running"}``
    ``running_polls`` times, then ``{"status": "succeeded", "analyzeResult": ...}`` (or
    ``{"status": "failed", "error": fail_with}`` when ``fail_with`` is set).
    """

    def __init__(
        self,
        *,
        running_polls: int = 1,
        analyze_result: dict[str, Any] | None = None,
        fail_with: dict[str, Any] | None = None,
        retry_after: str | None = "0",
    ) -> None:
        self.running_polls = running_polls
        self.analyze_result = analyze_result
        self.fail_with = fail_with
        self.retry_after = retry_after
        self.operations: dict[str, dict[str, Any]] = {}
        self.server = LocalServer(self._handle)

    @property
    def endpoint(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[Request]:
        return self.server.requests

    def _handle(self, request: Request) -> Reply:
        prefix = "/documentintelligence/documentModels/"
        if not request.path.startswith(prefix):
            return Reply(404, {"error": {"code": "NotFound", "message": request.path}})
        rest = request.path[len(prefix) :]
        api_version = (request.query.get("api-version") or ["?"])[0]
        extra = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
        if request.method == "POST" and rest.endswith(":analyze"):
            model_id = rest[: -len(":analyze")]
            body = request.json() or {}
            if not (body.get("urlSource") or body.get("base64Source")):
                return Reply(400, {"error": {"code": "InvalidRequest", "message": "no document"}})
            op_id = uuid.uuid4().hex
            self.operations[op_id] = {"model": model_id, "polls": 0, "request": body}
            location = (
                f"{self.endpoint}{prefix}{model_id}/analyzeResults/{op_id}"
                f"?api-version={api_version}"
            )
            return Reply(202, None, {"Operation-Location": location, **extra})
        if request.method == "GET" and "/analyzeResults/" in rest:
            model_id, _, op_id = rest.partition("/analyzeResults/")
            op = self.operations.get(op_id)
            if op is None:
                return Reply(404, {"error": {"code": "NotFound", "message": "no operation"}})
            op["polls"] += 1
            stamp = {"createdDateTime": "2025-01-01T00:00:00Z"}
            if op["polls"] <= self.running_polls:
                return Reply(200, {"status": "running", **stamp}, extra)
            if self.fail_with is not None:
                return Reply(200, {"status": "failed", "error": self.fail_with, **stamp})
            result = self.analyze_result or {
                "apiVersion": api_version,
                "modelId": model_id,
                "content": "Hello from the fake service",
                "pages": [{"pageNumber": 1, "width": 8.5, "height": 11, "unit": "inch"}],
            }
            return Reply(200, {"status": "succeeded", **stamp, "analyzeResult": result})
        return Reply(404, {"error": {"code": "NotFound", "message": request.path}})

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> FakeDocumentIntelligence:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
