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

_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class _Empty(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One segment per response, sent at once: headers and body written separately on a
    # kept-alive connection meet the client's delayed ACK (about 40 ms per call).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self.wfile.write(_RESPONSE)

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
