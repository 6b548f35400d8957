"""CALL_TOOL against a local action service on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

from engine.runtime.builtins import (
    ActivityDeps,
    ActivityResult,
    OutboundSettings,
    call_tool_activity,
)
from engine.runtime.builtins.testing import InMemoryPayloadStore, LocalServer, Reply, Request

SETTINGS = OutboundSettings(connect_timeout_seconds=2, read_timeout_seconds=2)


def deps(server: LocalServer, **kwargs: Any) -> ActivityDeps:
    return ActivityDeps(outbound=SETTINGS, action_service_url=server.url + "/", **kwargs)


def test_posts_input_with_identity_and_returns_the_tool_result() -> None:
    scopes: list[str] = []

    def provider(scope: str) -> str:
        scopes.append(scope)
        return "tool-token"

    def handler(req: Request) -> Reply:
        return Reply(200, {"total": sum(req.json()["values"])})

    with LocalServer(handler) as server:
        result = call_tool_activity(
            deps(server, token_provider=provider, action_service_scope="api://actions/.default"),
            {"tool": "sum_values", "input": {"values": [1, 2, 3]}},
        )
        sent = server.requests[0]
    assert result.status == "COMPLETED", result.reason
    assert result.output == {"total": 6}
    assert sent.method == "POST" and sent.path == "/tools/sum_values"
    assert sent.header("Authorization") == "Bearer tool-token"
    assert sent.header("Content-Type") == "application/json"
    assert scopes == ["api://actions/.default"]
    assert ActivityResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_no_scope_means_no_authorization_and_non_object_result_is_wrapped() -> None:
    with LocalServer(lambda req: Reply(200, [1, 2])) as server:
        result = call_tool_activity(deps(server), {"tool": "list_things"})
        assert server.requests[0].header("Authorization") is None
        assert server.requests[0].json() == {}
    assert result.output == {"result": [1, 2]}


def test_status_mapping() -> None:
    replies = {
        "/tools/busy": Reply(503, {"error": "later"}, {"Retry-After": "3"}),
        "/tools/missing": Reply(404, {"error": "no such tool"}),
        "/tools/bad": Reply(422, {"error": "invalid input"}),
    }
    with LocalServer(lambda req: replies[req.path]) as server:
        busy = call_tool_activity(deps(server), {"tool": "busy", "input": {}})
        missing = call_tool_activity(deps(server), {"tool": "missing", "input": {}})
        bad = call_tool_activity(deps(server), {"tool": "bad", "input": {}})
    assert busy.status == "FAILED" and busy.retry_after_seconds == 3.0
    assert missing.status == "FAILED_WITH_TERMINAL_ERROR" and "404" in (missing.reason or "")
    assert bad.status == "FAILED_WITH_TERMINAL_ERROR"
    assert bad.output == {"tool": "bad", "error": {"error": "invalid input"}}


def test_non_json_success_is_terminal() -> None:
    with LocalServer(lambda req: Reply(200, "<html>")) as server:
        result = call_tool_activity(deps(server), {"tool": "html"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "not JSON" in (result.reason or "")


def test_large_result_is_offloaded() -> None:
    store = InMemoryPayloadStore()
    big = {"items": ["x" * 100] * 200}
    with LocalServer(lambda req: Reply(200, big)) as server:
        result = call_tool_activity(
            deps(server, payload_store=store, payload_threshold_bytes=1024),
            {"tool": "big", "_payloadKeyPrefix": "wf/t/1"},
        )
    assert result.status == "COMPLETED"
    assert result.output["resultRef"] == "mem://wf/t/1/tool-result.json"
    assert json.loads(store.get(result.output["resultRef"])) == big
    assert result.output["resultSize"] > 1024


def test_invalid_input_is_terminal() -> None:
    with LocalServer(lambda req: Reply(200, {})) as server:
        for tool in (None, "", "../admin", "a/b", ".."):
            result = call_tool_activity(deps(server), {"tool": tool})
            assert result.status == "FAILED_WITH_TERMINAL_ERROR", tool
        assert server.requests == []
    no_service = call_tool_activity(ActivityDeps(), {"tool": "x"})
    assert no_service.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "action service" in (no_service.reason or "")
