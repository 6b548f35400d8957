"""DOCUMENT_INTELLIGENCE through the real azure-ai-documentintelligence SDK, against a local
server on 127.0.0.1 that speaks the service's REST protocol (analyze -> 202 +
Operation-Location -> running -> succeeded)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from azure.core.credentials import AccessToken, AzureKeyCredential

from engine.runtime.builtins import (
    ActivityDeps,
    ActivityResult,
    OutboundSettings,
    document_intelligence_activity,
    document_intelligence_poll,
    run_poll,
)
from engine.runtime.builtins.testing import (
    FakeDocumentIntelligence,
    InMemoryPayloadStore,
    closed_port,
)

SETTINGS = OutboundSettings(connect_timeout_seconds=2, read_timeout_seconds=5)


class FakeTokenCredential:
    """An azure-core TokenCredential that records the scopes it was asked for."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **_kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken("di-token", int(time.time()) + 3600)


def roundtrip(result: ActivityResult) -> ActivityResult:
    again = ActivityResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    return again


def drive(deps: ActivityDeps, task_input: dict[str, Any], max_polls: int = 10) -> ActivityResult:
    """What the orchestration does: start, then poll (after durable timers) until done."""
    result = roundtrip(document_intelligence_activity(deps, task_input))
    for _ in range(max_polls):
        if not result.is_pending:
            return result
        assert result.pending is not None
        result = roundtrip(run_poll(deps, "DOCUMENT_INTELLIGENCE", result.pending.poll_input()))
    raise AssertionError("still pending")


def test_lro_with_token_credential_over_loopback() -> None:
    credential = FakeTokenCredential()
    with FakeDocumentIntelligence(running_polls=2) as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            document_intelligence_endpoint=service.endpoint,
            document_intelligence_credential=credential,
        )
        started = roundtrip(
            document_intelligence_activity(
                deps, {"modelId": "prebuilt-layout", "url": "https://example.com/a.pdf"}
            )
        )
        assert started.status == "PENDING"
        assert started.pending is not None
        assert "/documentModels/prebuilt-layout/analyzeResults/" in started.pending.location
        assert started.pending.retry_after_seconds == 0.0

        first = document_intelligence_poll(deps, started.pending.poll_input())
        assert first.status == "PENDING"
        assert first.pending is not None
        second = document_intelligence_poll(deps, first.pending.poll_input())
        assert second.status == "PENDING"
        assert second.pending is not None
        done = roundtrip(document_intelligence_poll(deps, second.pending.poll_input()))

        analyze = service.requests[0]
        assert analyze.method == "POST"
        assert analyze.path == "/documentintelligence/documentModels/prebuilt-layout:analyze"
        assert analyze.query["api-version"] == ["2024-11-30"]
        assert analyze.json() == {"urlSource": "https://example.com/a.pdf"}
        assert all(r.header("Authorization") == "Bearer di-token" for r in service.requests)
        assert len(service.requests) == 4
    assert done.status == "COMPLETED", done.reason
    assert done.output["modelId"] == "prebuilt-layout"
    assert done.output["content"] == "Hello from the fake service"
    assert done.output["pages"][0]["pageNumber"] == 1
    assert ("https://cognitiveservices.azure.com/.default",) in credential.scopes


def test_an_endpoint_override_the_engine_does_not_allow_gets_no_credential() -> None:
    """A task's ``endpoint`` input points the engine's credential (its identity's token,
    or its key) at a host; a host not allowed for Cognitive Services tokens is refused
    before anything is sent: otherwise whoever chose the input gets the credential."""
    with FakeDocumentIntelligence(running_polls=0) as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            document_intelligence_endpoint="https://unused.cognitiveservices.azure.com",
            document_intelligence_credential=AzureKeyCredential("the-key"),
        )
        result = document_intelligence_activity(
            deps,
            {
                "modelId": "prebuilt-layout",
                "url": "https://e.com/a.pdf",
                "endpoint": service.endpoint,
            },
        )
        assert service.requests == []
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "not allowed to receive the engine's credential" in (result.reason or "")
    assert "STEPWAY_TOKEN_HOSTS" in (result.reason or "")


def test_document_ref_bytes_with_key_credential_and_endpoint_override() -> None:
    store = InMemoryPayloadStore()
    reference = store.put("docs/invoice.pdf", b"%PDF-1.7 fake", "application/pdf")
    with FakeDocumentIntelligence(running_polls=0) as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            payload_store=store,
            document_intelligence_endpoint="https://unused.cognitiveservices.azure.com",
            document_intelligence_credential=AzureKeyCredential("the-key"),
            # the override's host is allowed to receive the engine's credential
            token_hosts={"https://cognitiveservices.azure.com/.default": ("127.0.0.1",)},
        )
        result = drive(
            deps,
            {
                "modelId": "prebuilt-invoice",
                "documentRef": reference,
                "endpoint": service.endpoint,
                "locale": "en-US",
                "features": ["keyValuePairs"],
            },
        )
        analyze = service.requests[0]
        assert analyze.header("Ocp-Apim-Subscription-Key") == "the-key"
        assert analyze.header("Authorization") is None
        assert base64.b64decode(analyze.json()["base64Source"]) == b"%PDF-1.7 fake"
        assert analyze.query["locale"] == ["en-US"]
        assert analyze.query["features"] == ["keyValuePairs"]
    assert result.status == "COMPLETED", result.reason
    assert result.output["modelId"] == "prebuilt-invoice"


def test_token_provider_is_used_when_no_credential_is_configured() -> None:
    scopes: list[str] = []

    def provider(scope: str) -> str:
        scopes.append(scope)
        return "from-provider"

    with FakeDocumentIntelligence(running_polls=0) as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            document_intelligence_endpoint=service.endpoint,
            token_provider=provider,
        )
        result = drive(deps, {"modelId": "prebuilt-read", "url": "https://example.com/x.png"})
        assert service.requests[0].header("Authorization") == "Bearer from-provider"
    assert result.status == "COMPLETED", result.reason
    assert scopes[0] == "https://cognitiveservices.azure.com/.default"


def test_large_result_is_offloaded() -> None:
    store = InMemoryPayloadStore()
    big = {"apiVersion": "2024-11-30", "modelId": "prebuilt-layout", "content": "z" * 50_000}
    with FakeDocumentIntelligence(running_polls=0, analyze_result=big) as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            payload_store=store,
            document_intelligence_endpoint=service.endpoint,
            document_intelligence_credential=FakeTokenCredential(),
        )
        result = drive(
            deps, {"modelId": "prebuilt-layout", "url": "https://e/x", "_payloadKeyPrefix": "w/t"}
        )
    assert result.status == "COMPLETED"
    assert result.output["resultRef"] == "mem://w/t/analyze-result.json"
    assert json.loads(store.get(result.output["resultRef"]))["content"] == "z" * 50_000


def test_failed_operation_is_terminal_or_retryable_by_code() -> None:
    bad = {
        "code": "InvalidRequest",
        "message": "Invalid request.",
        "innererror": {"code": "InvalidContent", "message": "The file is corrupted."},
    }
    with FakeDocumentIntelligence(running_polls=0, fail_with=bad) as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            document_intelligence_endpoint=service.endpoint,
            document_intelligence_credential=FakeTokenCredential(),
        )
        result = drive(deps, {"modelId": "prebuilt-layout", "url": "https://e/x"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "InvalidRequest" in (result.reason or "") and "corrupted" in (result.reason or "")

    internal = {"code": "InternalServerError", "message": "An unexpected error occurred."}
    with FakeDocumentIntelligence(running_polls=0, fail_with=internal) as service:
        deps.document_intelligence_endpoint = service.endpoint
        result = drive(deps, {"modelId": "prebuilt-layout", "url": "https://e/x"})
    assert result.status == "FAILED"


def test_analyze_rejected_by_service_maps_status() -> None:
    with FakeDocumentIntelligence() as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            document_intelligence_endpoint=service.endpoint,
            document_intelligence_credential=FakeTokenCredential(),
        )
        # the fake answers 404 for an unknown path: e.g. a poll of a deleted operation
        gone = document_intelligence_poll(
            deps,
            {
                "location": f"{service.endpoint}/documentintelligence/documentModels/m/"
                "analyzeResults/nope?api-version=2024-11-30"
            },
        )
    assert gone.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "404" in (gone.reason or "")


def test_connect_error_is_retryable() -> None:
    deps = ActivityDeps(
        outbound=SETTINGS,
        document_intelligence_endpoint=f"http://127.0.0.1:{closed_port()}",
        document_intelligence_credential=FakeTokenCredential(),
    )
    result = document_intelligence_activity(deps, {"modelId": "prebuilt-layout", "url": "u"})
    assert result.status == "FAILED"
    assert "connection failed" in (result.reason or "")


@pytest.mark.parametrize(
    ("task_input", "deps_kwargs", "needle"),
    [
        ({"url": "u"}, {}, "modelId"),
        ({"modelId": "m"}, {}, "exactly one"),
        ({"modelId": "m", "url": "u", "documentRef": "r"}, {}, "exactly one"),
        (
            {"modelId": "m", "url": "u", "endpoint": ""},
            {"document_intelligence_endpoint": None},
            "endpoint",
        ),
        ({"modelId": "m", "documentRef": "r"}, {}, "payload store"),
        ({"modelId": "m", "url": "u", "endpoint": "http://169.254.169.254"}, {}, "link-local"),
    ],
)
def test_invalid_or_blocked_input_is_terminal(
    task_input: dict[str, Any], deps_kwargs: dict[str, Any], needle: str
) -> None:
    kwargs: dict[str, Any] = {
        "outbound": SETTINGS,
        "document_intelligence_endpoint": "https://x.cognitiveservices.azure.com",
        "document_intelligence_credential": FakeTokenCredential(),
        **deps_kwargs,
    }
    result = document_intelligence_activity(ActivityDeps(**kwargs), task_input)
    assert result.status == "FAILED_WITH_TERMINAL_ERROR", result
    assert needle in (result.reason or "")


def test_bearer_token_never_over_plain_http_to_non_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    deps = ActivityDeps(
        outbound=SETTINGS,
        document_intelligence_endpoint="http://di.internal",
        document_intelligence_credential=FakeTokenCredential(),
    )
    result = document_intelligence_activity(deps, {"modelId": "m", "url": "u"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "https" in (result.reason or "")


def test_poll_location_must_be_on_the_endpoint() -> None:
    deps = ActivityDeps(
        outbound=SETTINGS,
        document_intelligence_endpoint="https://mine.cognitiveservices.azure.com",
        document_intelligence_credential=FakeTokenCredential(),
    )
    result = document_intelligence_poll(deps, {"location": "https://evil.example/steal"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "not on the endpoint" in (result.reason or "")


def test_key_credential_never_over_plain_http_to_non_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    deps = ActivityDeps(
        outbound=SETTINGS,
        document_intelligence_endpoint="http://di.internal",
        document_intelligence_credential=AzureKeyCredential("k"),
    )
    result = document_intelligence_activity(deps, {"modelId": "m", "url": "u"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "https" in (result.reason or "")


def test_result_above_the_maximum_payload_size_is_terminal() -> None:
    big = {"modelId": "m", "content": "q" * 5000}
    with FakeDocumentIntelligence(running_polls=0, analyze_result=big) as service:
        deps = ActivityDeps(
            outbound=SETTINGS,
            max_payload_bytes=2000,
            document_intelligence_endpoint=service.endpoint,
            document_intelligence_credential=FakeTokenCredential(),
        )
        result = drive(deps, {"modelId": "m", "url": "https://e/x"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "above the maximum payload size of 2000" in (result.reason or "")
