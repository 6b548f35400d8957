"""HTTP activity and the bounded outbound client, against local servers on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential

from engine.adapters.payload_blob import BlobPayloadStore
from engine.ports.payload_store import PayloadStoreUnavailable
from engine.runtime.builtins import (
    ActivityDeps,
    ActivityResult,
    OutboundSettings,
    http_activity,
    outbound,
)
from engine.runtime.builtins.http import bearer_token
from engine.runtime.builtins.testing import (
    InMemoryPayloadStore,
    LocalServer,
    Reply,
    Request,
    closed_port,
)

#: the scopes these tests ask tokens for, allowed to go to the loopback test servers
LOOPBACK_TOKENS = {
    scope: ("127.0.0.1",) for scope in ("api://x/.default", "api://svc/.default", "s")
}


def deps(**kwargs: Any) -> ActivityDeps:
    settings = kwargs.pop("outbound", None) or OutboundSettings(
        connect_timeout_seconds=2, read_timeout_seconds=2, max_duration_seconds=10
    )
    return ActivityDeps(outbound=settings, **kwargs)


def roundtrip(result: ActivityResult) -> ActivityResult:
    """Every result must survive the JSON trip durabletask gives it."""
    again = ActivityResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    return again


def test_success_json_body_conductor_shape() -> None:
    def handler(req: Request) -> Reply:
        return Reply(200, {"hello": req.json()["name"]}, {"X-Trace": "abc"})

    with LocalServer(handler) as server:
        result = http_activity(
            deps(),
            {
                "http_request": {
                    "uri": f"{server.url}/greet?x=1",
                    "method": "POST",
                    "body": {"name": "ada"},
                    "headers": {"X-Custom": "1"},
                }
            },
        )
        sent = server.requests[0]
    result = roundtrip(result)
    assert result.status == "COMPLETED", result.reason
    response = result.output["response"]
    assert response["statusCode"] == 200
    assert response["reasonPhrase"] == "OK"
    assert response["body"] == {"hello": "ada"}
    assert response["headers"]["X-Trace"] == ["abc"]
    assert sent.method == "POST" and sent.path == "/greet" and sent.query == {"x": ["1"]}
    assert sent.header("Content-Type") == "application/json"
    assert sent.header("Accept") == "application/json"
    assert sent.header("X-Custom") == "1"
    assert sent.json() == {"name": "ada"}


def test_flat_form_and_text_body() -> None:
    with LocalServer(lambda req: Reply(200, "plain text")) as server:
        result = http_activity(deps(), {"uri": f"{server.url}/t", "method": "get"})
    assert result.status == "COMPLETED"
    assert result.output["response"]["body"] == "plain text"


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": NaN}',
        b'{"b": Infinity}',
        b'{"c": 1e999}',
        b'{"d": [1, -2E+400]}',
        b"1e999",
        b" -2E+400",
    ],
)
def test_a_json_body_holding_a_number_json_has_not_is_kept_as_text(body: bytes) -> None:
    """Python reads NaN, Infinity and 1e999, which no JSON number stands for: stored,
    each came back as null (the task COMPLETED with {"a": null}). The body is kept as
    the text it was, as Conductor's HTTP task keeps a body Jackson cannot read."""
    reply = Reply(200, body, {"Content-Type": "application/json"})
    with LocalServer(lambda req: reply) as server:
        result = roundtrip(http_activity(deps(), {"uri": server.url}))
    assert result.status == "COMPLETED", result.reason
    assert result.output["response"]["body"] == body.decode()


def test_binary_body_is_base64() -> None:
    payload = bytes(range(256))
    reply = Reply(200, payload, {"Content-Type": "application/octet-stream"})
    with LocalServer(lambda req: reply) as server:
        result = http_activity(deps(), {"uri": server.url})
    response = result.output["response"]
    assert response["bodyEncoding"] == "base64"
    import base64

    assert base64.b64decode(response["body"]) == payload


def test_503_with_retry_after_seconds_is_retryable() -> None:
    reply = Reply(503, {"error": "busy"}, {"Retry-After": "7"})
    with LocalServer(lambda req: reply) as server:
        result = roundtrip(http_activity(deps(), {"uri": f"{server.url}/busy?sig=SECRET"}))
    assert result.status == "FAILED"
    assert result.is_retryable
    assert result.retry_after_seconds == 7.0
    assert result.reason is not None and "503" in result.reason
    assert "SECRET" not in result.reason  # the query is redacted
    assert result.output["response"]["body"] == {"error": "busy"}


def test_429_with_retry_after_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    with LocalServer(lambda req: Reply(429, None, {"Retry-After": when})) as server:
        result = http_activity(deps(), {"uri": server.url})
    assert result.status == "FAILED"
    assert result.retry_after_seconds is not None and 25 <= result.retry_after_seconds <= 31


@pytest.mark.parametrize("status", [408, 500, 502])
def test_other_retryable_statuses(status: int) -> None:
    with LocalServer(lambda req: Reply(status)) as server:
        result = http_activity(deps(), {"uri": server.url})
    assert result.status == "FAILED"
    assert str(status) in (result.reason or "")
    assert result.retry_after_seconds is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_other_4xx_are_terminal(status: int) -> None:
    with LocalServer(lambda req: Reply(status, {"error": "no"})) as server:
        result = roundtrip(http_activity(deps(), {"uri": f"{server.url}/missing"}))
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert f"HTTP {status}" in (result.reason or "")
    assert result.output["response"]["statusCode"] == status


def test_read_timeout_is_retryable() -> None:
    with LocalServer(lambda req: Reply(200, {}, delay_seconds=4)) as server:
        started = time.monotonic()
        result = http_activity(deps(), {"uri": server.url, "readTimeOut": 300})
        elapsed = time.monotonic() - started
    assert result.status == "FAILED"
    assert "read timeout" in (result.reason or "")
    assert elapsed < 3  # cut at the read timeout, not after the server's 4 s


def test_slow_drip_response_is_bounded_by_max_duration() -> None:
    reply = Reply(200, b"x" * 40, chunked=True, chunk_size=4, chunk_delay_seconds=0.2)
    settings = OutboundSettings(read_timeout_seconds=1, max_duration_seconds=0.5)
    with LocalServer(lambda req: reply) as server:
        result = http_activity(deps(outbound=settings), {"uri": server.url})
    assert result.status == "FAILED"
    assert "not complete after" in (result.reason or "")


def test_connect_error_is_retryable() -> None:
    result = http_activity(deps(), {"uri": f"http://127.0.0.1:{closed_port()}/x"})
    assert result.status == "FAILED"
    assert "connection failed" in (result.reason or "")


def test_unresolvable_host_is_retryable() -> None:
    result = http_activity(deps(), {"uri": "http://no-such-host.invalid/x"})
    assert result.status == "FAILED"
    assert "could not resolve" in (result.reason or "")


def test_response_over_cap_with_content_length_is_terminal() -> None:
    settings = OutboundSettings(max_response_bytes=1000)
    with LocalServer(lambda req: Reply(200, b"a" * 5000)) as server:
        result = http_activity(deps(outbound=settings), {"uri": server.url})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "5000 bytes" in (result.reason or "") and "cap of 1000" in (result.reason or "")


def test_chunked_response_over_cap_stops_reading_and_is_terminal() -> None:
    settings = OutboundSettings(max_response_bytes=10_000)
    reply = Reply(200, b"a" * 200_000, chunked=True, chunk_size=4096)
    with LocalServer(lambda req: reply) as server:
        result = http_activity(deps(outbound=settings), {"uri": server.url})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "exceeds the cap of 10000 bytes" in (result.reason or "")
    assert result.output == {}  # never a truncated body


@pytest.mark.parametrize(
    "uri",
    [
        "http://169.254.169.254/metadata/instance?api-version=2021-02-01",
        "http://168.63.129.16/machine?comp=goalstate",
        "http://[fe80::1]/x",
        "http://[::ffff:169.254.169.254]/x",
    ],
)
def test_link_local_and_metadata_addresses_are_blocked(uri: str) -> None:
    result = http_activity(deps(), {"uri": uri})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "link-local" in (result.reason or "")


def test_hostname_resolving_to_metadata_address_is_blocked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = socket.getaddrinfo

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "innocent.example":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port)),
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    result = http_activity(deps(), {"uri": "http://innocent.example/x"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "169.254.169.254" in (result.reason or "")


def test_allow_link_local_lifts_the_block() -> None:
    import httpx

    settings = OutboundSettings(allow_link_local=True)
    addresses = outbound.check_destination(httpx.URL("http://169.254.169.254/x"), settings)
    assert [str(a) for a in addresses] == ["169.254.169.254"]


def test_redirect_to_metadata_address_is_blocked() -> None:
    reply = Reply(302, None, {"Location": "http://169.254.169.254/latest/meta-data"})
    with LocalServer(lambda req: reply) as server:
        result = http_activity(deps(), {"uri": server.url})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "link-local" in (result.reason or "")


def test_redirect_followed_and_authorization_dropped_across_origins() -> None:
    with LocalServer(lambda req: Reply(200, {"final": True})) as target:

        def first(req: Request) -> Reply:
            return Reply(307, None, {"Location": f"{target.url}/next"})

        with LocalServer(first) as origin:
            result = http_activity(
                deps(token_provider=lambda scope: "tok", token_hosts=LOOPBACK_TOKENS),
                {
                    "uri": origin.url,
                    "method": "POST",
                    "body": {"a": 1},
                    "auth": {"type": "managed_identity", "scope": "api://x/.default"},
                },
            )
            assert origin.requests[0].header("Authorization") == "Bearer tok"
        assert result.status == "COMPLETED", result.reason
        assert target.requests[0].method == "POST"
        assert target.requests[0].json() == {"a": 1}
        assert target.requests[0].header("Authorization") is None


def test_localhost_name_is_pinned_to_a_working_address() -> None:
    # "localhost" may resolve to ::1 first; the server only listens on 127.0.0.1
    with LocalServer(lambda req: Reply(200, {"ok": True})) as server:
        result = http_activity(deps(), {"uri": f"http://localhost:{server.port}/x"})
        assert server.requests[0].header("Host") == f"localhost:{server.port}"
    assert result.status == "COMPLETED", result.reason


def test_managed_identity_header() -> None:
    scopes: list[str] = []

    def provider(scope: str) -> str:
        scopes.append(scope)
        return "token-123"

    with LocalServer(lambda req: Reply(200, {})) as server:
        result = http_activity(
            deps(token_provider=provider, token_hosts=LOOPBACK_TOKENS),
            {
                "http_request": {"uri": server.url},
                "auth": {"type": "managed_identity", "scope": "api://svc/.default"},
            },
        )
        assert server.requests[0].header("Authorization") == "Bearer token-123"
    assert result.status == "COMPLETED"
    assert scopes == ["api://svc/.default"]


def test_managed_identity_refused_over_plain_http_to_non_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    result = http_activity(
        deps(token_provider=lambda s: "t", token_hosts={"s": ("api.internal",)}),
        {"uri": "http://api.internal/x", "auth": {"type": "managed_identity", "scope": "s"}},
    )
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "https" in (result.reason or "")


def test_token_failure_is_retryable_and_missing_provider_terminal() -> None:
    def broken(scope: str) -> str:
        raise RuntimeError("IMDS unavailable")

    auth = {"type": "managed_identity", "scope": "s"}
    failed = http_activity(
        deps(token_provider=broken, token_hosts=LOOPBACK_TOKENS),
        {"uri": "http://127.0.0.1:1", "auth": auth},
    )
    assert failed.status == "FAILED" and "IMDS unavailable" in (failed.reason or "")
    terminal = http_activity(
        deps(token_hosts=LOOPBACK_TOKENS), {"uri": "http://127.0.0.1:1", "auth": auth}
    )
    assert terminal.status == "FAILED_WITH_TERMINAL_ERROR"
    refused = http_activity(
        deps(token_provider=lambda s: "t", allowed_token_scopes=frozenset({"other"})),
        {"uri": "http://127.0.0.1:1", "auth": auth},
    )
    assert refused.status == "FAILED_WITH_TERMINAL_ERROR" and "not allowed" in (
        refused.reason or ""
    )


@pytest.mark.parametrize(
    ("uri", "allowed"),
    [
        ("https://api.example.com/x", True),
        ("https://API.Example.com:8443/x", True),
        ("https://orders.internal.example.org/x", True),  # *.internal.example.org
        ("https://internal.example.org/x", False),  # the domain itself is not under it
        ("https://api.example.com.evil.test/x", False),
        ("https://evil-api.example.com/x", False),
        ("https://attacker.test/?to=api.example.com", False),
    ],
)
def test_a_token_goes_only_to_a_host_allowed_for_its_scope(uri: str, allowed: bool) -> None:
    """The engine's identity reaches the run store, queues and payloads: a token for any
    scope sent wherever a task's input points would hand that reach to whoever chose the
    URL (a run's input, a worker's output). A token is sent only to a host STEPWAY_TOKEN_HOSTS
    names for its scope; anything else fails the task before a token is even asked for."""
    asked: list[str] = []

    def provider(scope: str) -> str:
        asked.append(scope)
        return "tok"

    hosts = {"api://orders/.default": ("api.example.com", "*.internal.example.org")}
    auth = {"type": "managed_identity", "scope": "api://orders/.default"}
    if allowed:
        assert (
            bearer_token(deps(token_provider=provider, token_hosts=hosts), auth, uri)
            == "Bearer tok"
        )
        assert asked == ["api://orders/.default"]
        return
    result = http_activity(
        deps(token_provider=provider, token_hosts=hosts), {"uri": uri, "auth": auth}
    )
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "may not be sent to" in (result.reason or "") and "STEPWAY_TOKEN_HOSTS" in (
        result.reason or ""
    )
    assert asked == []
    # another scope's hosts do not count, and no entry means no host
    other = deps(token_provider=provider, token_hosts={"api://other/.default": ("attacker.test",)})
    assert http_activity(other, {"uri": "https://attacker.test/", "auth": auth}).status == (
        "FAILED_WITH_TERMINAL_ERROR"
    )


def test_large_response_is_offloaded() -> None:
    store = InMemoryPayloadStore()
    big = {"rows": [{"i": i, "text": "x" * 50} for i in range(500)]}
    with LocalServer(lambda req: Reply(200, big)) as server:
        result = roundtrip(
            http_activity(
                deps(payload_store=store, payload_threshold_bytes=10 * 1024),
                {"uri": server.url, "_payloadKeyPrefix": "wf-1/task-1/0"},
            )
        )
    response = result.output["response"]
    assert result.status == "COMPLETED"
    assert response["body"] is None
    assert response["bodyRef"] == "mem://wf-1/task-1/0/response-body"
    assert response["bodySize"] > 10 * 1024
    assert response["bodyContentType"] == "application/json"
    assert json.loads(store.get(response["bodyRef"])) == big
    assert len(json.dumps(result.to_dict())) < 2048  # the history stays small


def test_a_large_response_meeting_a_payload_store_outage_raises_it_for_the_engine() -> None:
    # the Blob adapter on a port nothing listens on: an outage, not a failure of the
    # task (the interpreter runs the activity again)
    blob = BlobPayloadStore(
        f"http://127.0.0.1:{closed_port()}/devstoreaccount1",
        "payloads",
        AzureNamedKeyCredential("devstoreaccount1", "a2V5"),
        retry_total=0,
    )
    big = {"text": "x" * 20_000}
    try:
        with (
            LocalServer(lambda req: Reply(200, big)) as server,
            pytest.raises(PayloadStoreUnavailable, match="could not be reached"),
        ):
            http_activity(deps(payload_store=blob), {"uri": server.url})
    finally:
        blob.close()


def test_small_response_stays_inline_with_store() -> None:
    store = InMemoryPayloadStore()
    with LocalServer(lambda req: Reply(200, {"a": 1})) as server:
        result = http_activity(deps(payload_store=store), {"uri": server.url})
    assert result.output["response"]["body"] == {"a": 1}
    assert store.items == {}


@pytest.mark.parametrize(
    "task_input",
    [
        {},
        {"http_request": "nope"},
        {"uri": "http://127.0.0.1/", "method": "BREW"},
        {"uri": "ftp://127.0.0.1/x"},
        {"uri": "http://127.0.0.1/", "auth": {"type": "basic"}},
        {"uri": "http://127.0.0.1/", "readTimeOut": "soon"},
    ],
)
def test_invalid_input_is_terminal(task_input: dict[str, Any]) -> None:
    result = http_activity(deps(), task_input)
    assert result.status == "FAILED_WITH_TERMINAL_ERROR", result


def test_form_body_and_explicit_content_type() -> None:
    with LocalServer(lambda req: Reply(204)) as server:
        result = http_activity(
            deps(),
            {
                "uri": server.url,
                "method": "POST",
                "contentType": "application/x-www-form-urlencoded",
                "body": {"a": "1", "b": "two words"},
            },
        )
        sent = server.requests[0]
    assert result.status == "COMPLETED"
    assert result.output["response"]["body"] is None
    assert sent.body == b"a=1&b=two+words"
    assert sent.header("Content-Type") == "application/x-www-form-urlencoded"


def test_parse_retry_after() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    assert outbound.parse_retry_after("120") == 120.0
    assert outbound.parse_retry_after(None) is None
    assert outbound.parse_retry_after("soon") is None
    assert outbound.parse_retry_after("Wed, 01 Jan 2025 00:01:00 GMT", now=now) == 60.0
    assert outbound.parse_retry_after("Tue, 31 Dec 2024 00:00:00 GMT", now=now) == 0.0


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "nan", "-3", "-0.5"])
def test_retry_after_not_a_delay_is_ignored(value: str) -> None:
    """RFC 9110: delay-seconds is a non-negative integer; an infinite one crashed the run
    (OverflowError when its timer was armed), a negative one retried at once."""
    assert outbound.parse_retry_after(value) is None


@pytest.mark.parametrize(
    "value", ["1e20", "99999999999", "2592001", "Fri, 31 Dec 9999 23:59:59 GMT"]
)
def test_retry_after_is_capped_as_every_retry_delay(value: str) -> None:
    """A server cannot park a run for millennia (or overflow its timer, 1e20 seconds):
    the header is capped at MAX_RETRY_DELAY_SECONDS (30 days), as every retry delay."""
    from engine.language.retry import MAX_RETRY_DELAY_SECONDS, retry_delay_seconds

    seconds = outbound.parse_retry_after(value)
    assert seconds == MAX_RETRY_DELAY_SECONDS == 30 * 86400
    assert retry_delay_seconds("FIXED", 1, 1, 0, retry_after=seconds) == MAX_RETRY_DELAY_SECONDS
    # and should a caller hand the delay arithmetic a value of its own
    assert retry_delay_seconds("FIXED", 1, 1, 0, retry_after=1e20) == MAX_RETRY_DELAY_SECONDS
    assert retry_delay_seconds("FIXED", 5, 1, 0, retry_after=float("inf")) == 5
    assert retry_delay_seconds("FIXED", 5, 1, 0, retry_after=float("nan")) == 5


def test_http_task_retry_after_infinity_retries_on_the_task_delay() -> None:
    """A 503 with ``Retry-After: inf`` is a FAILED attempt without a retry_after; the
    task's own retry delay applies."""
    result = outbound.result_for_response(
        outbound.OutboundResponse(
            status_code=503,
            reason_phrase="Service Unavailable",
            url="http://x/",
            headers=(("Retry-After", "inf"),),
            content=b"busy",
        ),
        "GET",
        {},
    )
    assert (result.status, result.retry_after_seconds) == ("FAILED", None)


def test_result_envelope_json_roundtrip_and_validation() -> None:
    from engine.runtime.builtins import PendingPoll

    pending = ActivityResult.pending_poll(PendingPoll("http://x/op", 5.0, {"auth": {"a": 1}}))
    assert roundtrip(pending).pending == PendingPoll("http://x/op", 5.0, {"auth": {"a": 1}})
    assert pending.pending is not None
    assert pending.pending.poll_input() == {"auth": {"a": 1}, "location": "http://x/op"}
    with pytest.raises(ValueError):
        ActivityResult.from_dict({"status": "WHATEVER"})


def test_unexpected_exception_becomes_failed_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.runtime.builtins import http

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("bug")

    monkeypatch.setattr(http, "send", boom)
    result = http_activity(deps(), {"uri": "http://127.0.0.1/"})
    assert result.status == "FAILED"
    assert "unexpected error" in (result.reason or "")


def test_offload_into_the_real_local_payload_store(tmp_path: Any) -> None:
    payload_local = pytest.importorskip("engine.adapters.payload_local")
    store = payload_local.LocalPayloadStore(tmp_path, secret="s" * 32)
    big = {"rows": ["r" * 100] * 200}
    with LocalServer(lambda req: Reply(200, big)) as server:
        result = http_activity(
            deps(payload_store=store),  # threshold from store.limits (10 KB by default)
            {"uri": server.url, "_payloadKeyPrefix": "payloads/wf-9/fetch-0"},
        )
    response = result.output["response"]
    assert result.status == "COMPLETED", result.reason
    assert response["bodyRef"] == "payloads/wf-9/fetch-0/response-body"
    assert json.loads(store.get(response["bodyRef"])) == big


def test_body_above_the_maximum_payload_size_is_terminal() -> None:
    with LocalServer(lambda req: Reply(200, b"a" * 5000)) as server:
        result = http_activity(
            deps(payload_store=InMemoryPayloadStore(), max_payload_bytes=1000),
            {"uri": server.url},
        )
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "5000 bytes, above the maximum payload size of 1000" in (result.reason or "")


def test_a_json_body_nested_deeper_than_the_limit_fails_the_task_terminally() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    reply = Reply(200, deep, {"Content-Type": "application/json"})
    with LocalServer(lambda req: reply) as server:
        result = http_activity(deps(), {"uri": server.url})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert result.reason == (
        "the response body is nested more than 100 levels deep; the limit is 100"
    )
