"""The Azure Functions shape, bearer tokens and settings from the environment."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest
from stepway_worker import (
    AzureIdentityToken,
    Registry,
    StaticToken,
    TaskClient,
    WorkerSettings,
    handle_queue_message,
    task_log,
    worker_task,
)
from stepway_worker.auth import NoToken, token_provider_from_env
from stepway_worker.testing import FakeTaskServer

from .conftest import fast_settings  # type: ignore[import-not-found]


def test_queue_message_runs_the_handler_and_posts_the_result(
    server: FakeTaskServer, reg: Registry
) -> None:
    @worker_task("classify", registry=reg)
    def classify(text: str) -> dict[str, Any]:
        task_log("classifying")
        return {"documentClass": "invoice" if "invoice" in text else "other"}

    task_id = server.enqueue("classify", {"ignored": True})  # SCHEDULED, never polled
    body = json.dumps(
        {
            "taskId": task_id,
            "workflowId": "wf-1",
            "taskRef": "classify_ref",
            "taskType": "classify",
            "attempt": 1,
            "input": {"text": "an invoice"},
        }
    ).encode()
    posted = handle_queue_message(body, handlers=reg, settings=fast_settings(server.url))
    assert posted is not None and posted["status"] == "COMPLETED"
    assert server.wait_result(task_id)["outputData"] == {"documentClass": "invoice"}
    assert server.logs(task_id) == ["classifying"]
    # the same message again: the Task API refuses it (409) and the helper drops it
    assert handle_queue_message(body, handlers=reg, settings=fast_settings(server.url)) is None


def test_queue_message_result_refused_for_size_is_posted_as_a_terminal_failure(
    server: FakeTaskServer, reg: Registry
) -> None:
    @worker_task("export", registry=reg)
    def export() -> dict[str, str]:
        return {"rows": "x" * 100}

    task_id = server.enqueue("export", {})
    server.fail_next_results(413)
    message = {"taskId": task_id, "workflowId": "wf-1", "taskType": "export", "input": {}}
    posted = handle_queue_message(message, handlers=reg, settings=fast_settings(server.url))
    assert posted is not None and posted["status"] == "FAILED_WITH_TERMINAL_ERROR"
    result = server.wait_result(task_id)
    assert result["status"] == "FAILED_WITH_TERMINAL_ERROR" and result["outputData"] == {}
    assert "outputData is 111 bytes" in result["reasonForIncompletion"]


def test_queue_message_fetches_an_offloaded_input(server: FakeTaskServer, reg: Registry) -> None:
    @worker_task("echo", registry=reg)
    def echo(value: int) -> dict[str, int]:
        return {"value": value}

    task_id = server.enqueue("echo", {"value": 42})
    message = {"taskId": task_id, "workflowId": "wf-1", "taskType": "echo", "inputRef": "x"}
    handle_queue_message(message, handlers=reg, settings=fast_settings(server.url))
    assert server.wait_result(task_id)["outputData"] == {"value": 42}


def test_queue_message_raises_when_the_api_stays_down(reg: Registry) -> None:
    from stepway_worker import TransientError

    @worker_task("echo", registry=reg)
    def echo() -> None:
        return None

    dead = FakeTaskServer().start()
    url = dead.url
    dead.stop()
    with pytest.raises(TransientError):
        handle_queue_message(
            {"taskId": "t", "taskType": "echo", "input": {}},
            handlers=reg,
            settings=fast_settings(url),
            post_timeout=0.3,
        )


def test_static_token_is_sent_and_a_401_is_reported() -> None:
    with FakeTaskServer(token="s3cret-token-value") as server:
        good = TaskClient(server.url, tokens=StaticToken("s3cret-token-value"))
        assert good.poll("x", worker_id="w", count=1, timeout_ms=0) == []
        bad = TaskClient(server.url, tokens=NoToken())
        with pytest.raises(Exception, match="401"):
            bad.poll("x", worker_id="w", count=1, timeout_ms=0)
        assert server.state.auth_headers[0] == "Bearer s3cret-token-value"


@dataclass
class _Access:
    token: str
    expires_on: int


class _FakeCredential:
    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self.calls: list[str] = []

    def get_token(self, *scopes: str) -> _Access:
        self.calls.append(scopes[0])
        return _Access(f"tok-{len(self.calls)}", int(time.time() + self.lifetime))


def test_azure_identity_token_is_cached_and_refreshed_before_expiry() -> None:
    long_lived = _FakeCredential(3600)
    provider = AzureIdentityToken("api://stepway/.default", long_lived, refresh_margin=300)
    assert provider.token() == "tok-1" and provider.token() == "tok-1"
    assert long_lived.calls == ["api://stepway/.default"]
    provider.invalidate()  # after a 401
    assert provider.token() == "tok-2"

    short_lived = _FakeCredential(200)  # inside the refresh margin: fetched every time
    provider = AzureIdentityToken("s", short_lived, refresh_margin=300)
    assert provider.token() == "tok-1" and provider.token() == "tok-2"


def test_token_provider_from_env() -> None:
    assert isinstance(token_provider_from_env({}), NoToken)
    assert isinstance(token_provider_from_env({"STEPWAY_TOKEN": "abc"}), StaticToken)
    azure = token_provider_from_env({"STEPWAY_API_SCOPE": "api://x/.default"})
    assert isinstance(azure, AzureIdentityToken) and azure.scope == "api://x/.default"


def test_settings_from_env_with_per_type_overrides() -> None:
    env = {
        "STEPWAY_SERVER_URL": "https://stepway.example.com",
        "STEPWAY_THREADS": "4",
        "STEPWAY_POLL_INTERVAL": "0.5",
        "STEPWAY_DOMAIN": "tenant-a",
        "STEPWAY_TASK_PARSE_PDF_THREADS": "8",
        "STEPWAY_TASK_PARSE_PDF_DOMAIN": "",
        "STEPWAY_TASK_PARSE_PDF_POLL_INTERVAL": "2",
        "STEPWAY_PAYLOAD_THRESHOLD": "20000",
    }
    s = WorkerSettings.from_env(env, worker_id="w1")
    assert (s.server_url, s.threads, s.worker_id) == ("https://stepway.example.com", 4, "w1")
    pdf = s.for_type("parse_pdf", threads=2)
    assert (pdf.threads, pdf.poll_interval, pdf.domain) == (8, 2.0, None)
    other = s.for_type("extract_excel", threads=2)
    assert (other.threads, other.poll_interval, other.domain) == (2, 0.5, "tenant-a")
    assert other.payload_threshold == 20000
    assert WorkerSettings.from_env({}).server_url == "http://127.0.0.1:8080"
    with pytest.raises(ValueError, match="STEPWAY_THREADS"):
        WorkerSettings.from_env({"STEPWAY_THREADS": "many"})
