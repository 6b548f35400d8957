"""Activities that hold their threads do not stall the orchestrations: HTTP tasks whose
server never answers, more of them than durabletask's default thread pool (CPUs + 4)
has threads, and meanwhile a one-step run of a built-in task completes and a terminate
of the hanging run is applied at once (engine/app/host.py ``engine_concurrency``,
engine/adapters/backend/direct_dispatch.py). With one pool of CPUs + 4 threads shared by
both kinds, both waited for the HTTP calls' read timeout (60 s).
"""

from __future__ import annotations

import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from engine.language.definitions import RunStatus

pytestmark = pytest.mark.timeout(120)

#: durabletask's default thread pool, which the engine shared by both kinds of work item
DEFAULT_POOL = (os.cpu_count() or 1) + 4
HANGING = DEFAULT_POOL + 4


class NeverAnswers:
    """A local HTTP server that reads each request and never answers it, until
    :meth:`close`, which ends every connection it holds."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.requests = 0
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn: socket.socket = self.request
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                except OSError:
                    return
                with owner.lock:
                    owner.requests += 1
                owner.release.wait(90)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 256

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/never"

    def seen(self) -> int:
        with self.lock:
            return self.requests

    def wait_for(self, count: int, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.seen() < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.seen()

    def close(self) -> None:
        self.release.set()  # every handler returns: its connection is closed
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def never_answers() -> Iterator[NeverAnswers]:
    server = NeverAnswers()
    try:
        yield server
    finally:
        server.close()


def register_hanging_fan(platform: Any, url: str) -> None:
    refs = [f"h{i}" for i in range(HANGING)]
    platform.register(
        {
            "name": "hanging_fan",
            "tasks": [
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [
                            {
                                "name": ref,
                                "taskReferenceName": ref,
                                "type": "HTTP",
                                "inputParameters": {"http_request": {"uri": url, "method": "GET"}},
                            }
                        ]
                        for ref in refs
                    ],
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": refs},
            ],
        }
    )
    platform.register(
        {
            "name": "quick",
            "tasks": [
                {
                    "name": "add",
                    "taskReferenceName": "add",
                    "type": "INLINE",
                    "inputParameters": {"evaluatorType": "javascript", "expression": "1 + 1"},
                }
            ],
        }
    )


def test_hanging_http_calls_leave_other_runs_and_a_terminate_unhindered(
    platform: Any, never_answers: NeverAnswers
) -> None:
    register_hanging_fan(platform, never_answers.url)
    hanging = platform.start("hanging_fan")
    # the old shared pool is full (its threads all wait for an answer)
    assert never_answers.wait_for(DEFAULT_POOL, 30) >= DEFAULT_POOL

    started = time.monotonic()
    quick = platform.wait(platform.start("quick"), timeout=15)
    assert quick.status == RunStatus.COMPLETED, quick.reason_for_incompletion
    assert platform.tasks(quick.workflow_id)["add"].output_data == {"result": 2}
    assert time.monotonic() - started < 10

    # the activities run at once beyond durabletask's default pool: every call is made
    assert never_answers.wait_for(HANGING, 15) == HANGING

    started = time.monotonic()
    platform.terminate(hanging, "enough waiting")
    run = platform.wait(hanging, timeout=15)
    assert run.status == RunStatus.TERMINATED
    assert "enough waiting" in (run.reason_for_incompletion or "")
    assert time.monotonic() - started < 10
