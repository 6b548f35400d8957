"""LOGIC_APP: synchronous and asynchronous (202 + Location, polled) trigger responses."""

from __future__ import annotations

import json
from typing import Any

from engine.runtime.builtins import (
    POLL_ACTIVITIES,
    ActivityDeps,
    ActivityResult,
    OutboundSettings,
    logic_app_activity,
    logic_app_poll,
    run_activity,
    run_poll,
)
from engine.runtime.builtins.testing import InMemoryPayloadStore, LocalServer, Reply, Request

SETTINGS = OutboundSettings(connect_timeout_seconds=2, read_timeout_seconds=2)


def deps(**kwargs: Any) -> ActivityDeps:
    return ActivityDeps(outbound=SETTINGS, **kwargs)


def roundtrip(result: ActivityResult) -> ActivityResult:
    again = ActivityResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    return again


def test_synchronous_response_completes() -> None:
    def handler(req: Request) -> Reply:
        return Reply(200, {"approved": req.json()["amount"] < 100})

    with LocalServer(handler) as server:
        trigger = f"{server.url}/workflows/wf1/triggers/manual/paths/invoke?sig=SECRET"
        result = logic_app_activity(deps(), {"triggerUrl": trigger, "body": {"amount": 42}})
        assert server.requests[0].method == "POST"
    assert result.status == "COMPLETED", result.reason
    assert result.output["response"]["statusCode"] == 200
    assert result.output["response"]["body"] == {"approved": True}


def test_async_pattern_202_then_poll_until_200() -> None:
    polls = {"n": 0}

    def handler(req: Request) -> Reply:
        if req.method == "POST":
            return Reply(
                202,
                None,
                {"Location": "/runs/r1/operations/op1?sig=POLLSECRET", "Retry-After": "2"},
            )
        assert req.path == "/runs/r1/operations/op1"
        assert req.query["sig"] == ["POLLSECRET"]
        polls["n"] += 1
        if polls["n"] < 2:
            return Reply(202, None)  # still running, no Retry-After: the default applies
        return Reply(200, {"result": "done"})

    with LocalServer(handler) as server:
        started = roundtrip(
            logic_app_activity(
                deps(logic_app_default_poll_seconds=5),
                {"url": f"{server.url}/trigger?sig=SECRET", "body": {}},
            )
        )
        assert started.status == "PENDING" and started.is_pending
        assert started.pending is not None
        assert started.pending.location == f"{server.url}/runs/r1/operations/op1?sig=POLLSECRET"
        assert started.pending.retry_after_seconds == 2.0
        assert started.retry_after_seconds == 2.0

        # the orchestration waits on a durable timer, then polls
        second = roundtrip(logic_app_poll(deps(), started.pending.poll_input()))
        assert second.status == "PENDING"
        assert second.pending is not None
        assert second.pending.retry_after_seconds == 5.0
        assert second.pending.location == started.pending.location

        final = roundtrip(run_poll(deps(), "LOGIC_APP", second.pending.poll_input()))
    assert final.status == "COMPLETED", final.reason
    assert final.output["response"]["body"] == {"result": "done"}
    assert polls["n"] == 2


def test_async_poll_failure_is_mapped_like_http() -> None:
    def handler(req: Request) -> Reply:
        if req.method == "POST":
            return Reply(202, None, {"Location": "/op"})
        return Reply(500, {"error": {"code": "ActionFailed"}}, {"Retry-After": "9"})

    with LocalServer(handler) as server:
        started = logic_app_activity(deps(), {"url": server.url + "/t"})
        assert started.pending is not None
        assert started.pending.retry_after_seconds == 5.0  # default without Retry-After
        failed = logic_app_poll(deps(), started.pending.poll_input())
    assert failed.status == "FAILED"
    assert failed.retry_after_seconds == 9.0
    assert "HTTP 500" in (failed.reason or "")


def test_202_without_location_completes() -> None:
    reply = Reply(202, None, {"x-ms-workflow-run-id": "08584"})
    with LocalServer(lambda req: reply) as server:
        result = logic_app_activity(deps(), {"url": server.url})
    assert result.status == "COMPLETED"
    assert result.output["response"]["headers"]["x-ms-workflow-run-id"] == ["08584"]


def test_trigger_failure_is_terminal_for_4xx_and_url_secret_not_leaked() -> None:
    with LocalServer(lambda req: Reply(401, {"error": "bad sig"})) as server:
        result = logic_app_activity(deps(), {"url": f"{server.url}/t?sig=SECRET"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "401" in (result.reason or "")
    assert "SECRET" not in json.dumps(result.to_dict())


def test_auth_carried_to_same_origin_poll_only() -> None:
    def provider(scope: str) -> str:
        return "la-token"

    auth = {"type": "managed_identity", "scope": "https://logic.azure.com/.default"}
    with LocalServer(lambda req: Reply(200, {"ok": True})) as other:

        def handler(req: Request) -> Reply:
            if req.path == "/t":
                return Reply(202, None, {"Location": "/same"})
            if req.path == "/t2":
                return Reply(202, None, {"Location": f"{other.url}/elsewhere"})
            return Reply(200, {"ok": True})

        with LocalServer(handler) as server:
            same = logic_app_activity(
                deps(
                    token_provider=provider,
                    token_hosts={"https://logic.azure.com/.default": ("127.0.0.1",)},
                ),
                {"url": server.url + "/t", "auth": auth},
            )
            assert server.requests[0].header("Authorization") == "Bearer la-token"
            assert same.pending is not None and same.pending.state == {"auth": auth}
            polled = logic_app_poll(
                deps(
                    token_provider=provider,
                    token_hosts={"https://logic.azure.com/.default": ("127.0.0.1",)},
                ),
                same.pending.poll_input(),
            )
            assert polled.status == "COMPLETED"
            assert server.requests[1].header("Authorization") == "Bearer la-token"

            moved = logic_app_activity(
                deps(
                    token_provider=provider,
                    token_hosts={"https://logic.azure.com/.default": ("127.0.0.1",)},
                ),
                {"url": server.url + "/t2", "auth": auth},
            )
            assert moved.pending is not None and moved.pending.state == {}
            logic_app_poll(
                deps(
                    token_provider=provider,
                    token_hosts={"https://logic.azure.com/.default": ("127.0.0.1",)},
                ),
                moved.pending.poll_input(),
            )
        assert other.requests[0].header("Authorization") is None


def test_large_final_body_is_offloaded() -> None:
    store = InMemoryPayloadStore()
    with LocalServer(lambda req: Reply(200, {"blob": "y" * 20_000})) as server:
        result = run_activity(
            deps(payload_store=store), "logic_app", {"url": server.url, "body": {}}
        )
    assert result.status == "COMPLETED"
    assert result.output["response"]["bodyRef"] in store.items


def test_invalid_input_and_registry() -> None:
    assert logic_app_activity(deps(), {}).status == "FAILED_WITH_TERMINAL_ERROR"
    assert logic_app_poll(deps(), {}).status == "FAILED_WITH_TERMINAL_ERROR"
    assert set(POLL_ACTIVITIES) == {"LOGIC_APP", "DOCUMENT_INTELLIGENCE"}
    assert run_activity(deps(), "WORKER", {}).status == "FAILED_WITH_TERMINAL_ERROR"
    assert run_poll(deps(), "HTTP", {}).status == "FAILED_WITH_TERMINAL_ERROR"
