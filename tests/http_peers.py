"""A real HTTP peer for outage tests of the Azure Blob payload store: it answers some
requests itself (an error status with an ``x-ms-error-code``, by hanging up without an
answer, or not at all while it runs) and forwards the others to an upstream server
(Azurite), as a load balancer in front of the service would."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

#: the hop-by-hop headers a forwarding peer does not pass on
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host"})


@dataclass
class Failure:
    """What the peer answers instead of forwarding: ``status`` with ``code`` as the
    ``x-ms-error-code`` (as Azure Storage names its errors), or no answer at all
    (``status`` None: the connection is closed after the request was read; with
    ``hold``, only once the peer stops: a service that hangs)."""

    status: int | None
    code: str = ""
    hold: bool = False


@dataclass
class BlobPeer:
    url: str
    #: requests left to fail, each ``(method, path) -> bool`` with its failure
    failures: list[tuple[Callable[[str, str], bool], Failure]] = field(default_factory=list)
    #: the (method, path, status) of every request the peer answered itself
    failed: list[tuple[str, str, int | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: set when the peer stops: the requests it holds are let go
    stopping: threading.Event = field(default_factory=threading.Event)

    def fail(self, failure: Failure, when: Callable[[str, str], bool] = lambda m, p: True) -> None:
        """Answer the next request that ``when`` matches with ``failure`` (once)."""
        with self.lock:
            self.failures.append((when, failure))

    def take(self, method: str, path: str) -> Failure | None:
        with self.lock:
            for i, (when, failure) in enumerate(self.failures):
                if when(method, path):
                    del self.failures[i]
                    self.failed.append((method, path, failure.status))
                    return failure
        return None


@contextmanager
def blob_peer(upstream: str | None = None, always: Failure | None = None) -> Iterator[BlobPeer]:
    """A peer on a free port of 127.0.0.1: ``always`` answers every request (no
    upstream needed); otherwise requests go to ``upstream`` (``http://host:port``) but
    those the peer was told to fail (:meth:`BlobPeer.fail`)."""
    target = urlsplit(upstream) if upstream else None
    peer_ref: dict[str, BlobPeer] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            peer = peer_ref["peer"]
            failure = always or peer.take(self.command, self.path)
            if always is not None:
                with peer.lock:
                    peer.failed.append((self.command, self.path, always.status))
            if failure is not None:
                if failure.status is None:
                    if failure.hold:
                        peer.stopping.wait()
                    self.close_connection = True
                    return  # hang up without an answer
                self.send_response(failure.status)
                if failure.code:
                    self.send_header("x-ms-error-code", failure.code)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            assert target is not None and target.hostname and target.port
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in _HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    peer = BlobPeer(f"http://127.0.0.1:{server.server_address[1]}")
    peer_ref["peer"] = peer
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        peer.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
