"""Connector handlers against a local http.server standing in for the bank and the
tax authority, and over the Task API: the credential stays in the worker."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from stepway_worker import Worker, WorkerSettings, registry
from stepway_worker.context import TaskContext
from stepway_worker.testing import FakeTaskServer

import workers.connector  # noqa: F401  (registers the handlers)

KEY = "bank-secret-key-123"


class Remote:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lodged: dict[str, str] = {}
        self.fail_with: int | None = None


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    state = Remote()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, body: Any = None) -> bool:
            state.requests.append(
                {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "body": body,
                    "idempotency": self.headers.get("Idempotency-Key"),
                }
            )
            if state.fail_with:
                self._reply(state.fail_with, {"error": "injected"})
                return False
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                self._reply(401, {"error": "bad credential"})
                return False
            return True

        def do_GET(self) -> None:
            if not self._record():
                return
            q = parse_qs(urlsplit(self.path).query)
            self._reply(
                200,
                {
                    "transactions": [
                        {"date": f"{q['period'][0]}-01", "amount": 10.5, "reference": "A"}
                    ]
                },
            )

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self._record(body):
                return
            key = self.headers["Idempotency-Key"]
            lodgement = state.lodged.setdefault(key, f"L-{len(state.lodged) + 1}")
            self._reply(201, {"lodgementId": lodgement, "status": "RECEIVED"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("CONNECTOR_BANK_URL", url)
    monkeypatch.setenv("CONNECTOR_TAX_URL", url)
    monkeypatch.setenv("CONNECTOR_API_KEY", KEY)
    yield state
    server.shutdown()
    server.server_close()


def run(task_type: str, data: dict[str, Any], task_id: str = "t1") -> Any:
    handler = registry.get(task_type)
    assert handler is not None
    return handler.execute(TaskContext(task_id=task_id, task_type=task_type, input=data))


def test_fetch_and_lodge_over_the_task_api_keep_the_credential_here(remote: Remote) -> None:
    with FakeTaskServer() as server:
        settings = WorkerSettings(
            server_url=server.url, worker_id="conn", long_poll_ms=100, poll_interval=0.05
        )
        with Worker(registry, settings=settings, task_types=["fetch_bank_feed", "lodge_return"]):
            feed = server.enqueue("fetch_bank_feed", {"period": "2024-05", "accountId": "acc-1"})
            lodge = server.enqueue(
                "lodge_return",
                {"documentUrl": "https://docs/r.pdf", "amount": 12.5, "reference": "Q2"},
            )
            feed_result = server.wait_result(feed)
            lodge_result = server.wait_result(lodge)
    assert feed_result["outputData"]["transactions"] == [
        {"date": "2024-05-01", "amount": 10.5, "reference": "A"}
    ]
    assert lodge_result["outputData"] == {"lodgementId": "L-1", "status": "RECEIVED"}
    assert all(r["auth"] == f"Bearer {KEY}" for r in remote.requests)
    assert (
        "accountId=acc-1" in remote.requests[0]["path"]
        or "accountId=acc-1" in (remote.requests[1]["path"])
    )
    # the credential never travels through the engine
    everything = json.dumps([server.state.results, server.state.logs, server.state.tasks])
    assert KEY not in everything


def test_a_retried_lodgement_is_idempotent(remote: Remote) -> None:
    first = run("lodge_return", {"documentUrl": "u"}, task_id="task-9")
    again = run("lodge_return", {"documentUrl": "u"}, task_id="task-9")
    assert first.output["lodgementId"] == again.output["lodgementId"] == "L-1"
    assert {r["idempotency"] for r in remote.requests} == {"task-9"}


def test_remote_errors_retryable_or_terminal(remote: Remote, monkeypatch: Any) -> None:
    remote.fail_with = 503
    assert run("fetch_bank_feed", {"period": "2024-05"}).status == "FAILED"
    remote.fail_with = 400
    assert run("fetch_bank_feed", {"period": "2024-05"}).status == "FAILED_WITH_TERMINAL_ERROR"
    remote.fail_with = None
    monkeypatch.setenv("CONNECTOR_API_KEY", "wrong")
    denied = run("fetch_bank_feed", {"period": "2024-05"})
    assert denied.status == "FAILED_WITH_TERMINAL_ERROR" and "wrong" not in denied.reason
    monkeypatch.delenv("CONNECTOR_API_KEY")
    unconfigured = run("fetch_bank_feed", {"period": "2024-05"})
    assert unconfigured.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "CONNECTOR_API_KEY" in unconfigured.reason
    assert run("fetch_bank_feed", {"period": "May"}).status == "FAILED_WITH_TERMINAL_ERROR"
