"""The trivial HTTP endpoint every system's HTTP step calls: ``GET /`` answers ``{}``.

Runs in a process of its own (``python -m bench.stub_http``; first stdout line
``listening PORT``) so that serving it costs no system under test its GIL.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Empty(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def main() -> int:
    server = _Server(("127.0.0.1", 0), _Empty)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
