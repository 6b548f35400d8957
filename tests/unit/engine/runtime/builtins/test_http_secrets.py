"""An HTTP task's request carries ``${workflow.secrets.NAME}`` only to the hosts the secret
is bound to, and nothing the task records holds its value (engine/runtime/builtins/
secrets.py), over real HTTP to a local server."""

from __future__ import annotations

import pytest

from engine.language.expressions import resolve
from engine.runtime.builtins import ActivityDeps, OutboundSettings, http_activity
from engine.runtime.builtins.secrets import MASK, Secrets
from engine.runtime.builtins.testing import LocalServer, Reply, Request

SETTINGS = OutboundSettings(connect_timeout_seconds=2, read_timeout_seconds=5)
TOKEN = "s3cr3t-token-value"


def deps(
    hosts: tuple[str, ...] = ("127.0.0.1",), values: dict[str, str] | None = None
) -> ActivityDeps:
    return ActivityDeps(
        outbound=SETTINGS,
        secrets=Secrets({"API_TOKEN": TOKEN} if values is None else values, {"API_TOKEN": hosts}),
    )


def echo(request: Request) -> Reply:
    """Answers with what it received, as some services do (and error pages often)."""
    return Reply(
        200,
        {"auth": request.header("Authorization"), "query": request.query, "body": request.json()},
        {"X-Echo": request.header("Authorization") or ""},
    )


def test_a_secret_is_sent_to_its_host_and_masked_in_what_the_task_records() -> None:
    # the definition's template, resolved as the Decider does: the reference stays text
    task_input = resolve(
        {
            "http_request": {
                "uri": "URL/items?key=${workflow.secrets.API_TOKEN}",
                "method": "POST",
                "headers": {"Authorization": "Bearer ${workflow.secrets.API_TOKEN}"},
                "body": {"credential": "${workflow.secrets.API_TOKEN}", "n": 1},
            }
        },
        {"workflow": {"input": {}}},
    )
    assert "${workflow.secrets.API_TOKEN}" in str(task_input) and TOKEN not in str(task_input)
    with LocalServer(echo) as server:
        task_input["http_request"]["uri"] = task_input["http_request"]["uri"].replace(
            "URL", server.url
        )
        result = http_activity(deps(), task_input)
        sent = server.requests[0]
    assert sent.header("Authorization") == f"Bearer {TOKEN}"
    assert sent.query["key"] == [TOKEN]
    assert sent.json() == {"credential": TOKEN, "n": 1}
    assert result.status == "COMPLETED", result.reason
    response = result.output["response"]
    assert response["body"]["auth"] == f"Bearer {MASK}"
    assert response["body"]["query"] == {"key": [MASK]}
    assert response["body"]["body"] == {"credential": MASK, "n": 1}
    assert response["headers"]["X-Echo"] == [f"Bearer {MASK}"]
    assert TOKEN not in repr(result)


@pytest.mark.parametrize(
    ("task_deps", "uri", "needle"),
    [
        (deps(hosts=("api.example.com",)), "URL/x", "may not be sent to this request's host"),
        (deps(values={}), "URL/x", "STEPWAY_SECRET_API_TOKEN is not set"),
        (ActivityDeps(outbound=SETTINGS), "URL/x", "is not bound to any host"),
        (deps(), "http://${workflow.secrets.API_TOKEN}.example.com/", "part of the URI's host"),
    ],
)
def test_a_secret_the_request_may_not_carry_fails_the_task_before_sending(
    task_deps: ActivityDeps, uri: str, needle: str
) -> None:
    with LocalServer(echo) as server:
        result = http_activity(
            task_deps,
            {
                "uri": uri.replace("URL", server.url),
                "headers": {"Authorization": "Bearer ${workflow.secrets.API_TOKEN}"},
            },
        )
        assert server.requests == []
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert needle in (result.reason or "")
    assert TOKEN not in (result.reason or "")


def test_the_secrets_repr_names_no_value() -> None:
    assert TOKEN not in repr(deps()) and "API_TOKEN" in repr(deps().secrets)


def test_a_request_without_references_is_sent_as_it_is() -> None:
    with LocalServer(echo) as server:
        result = http_activity(deps(), {"uri": server.url, "headers": {"X": "${not.a.secret}"}})
        assert server.requests[0].header("X") == "${not.a.secret}"
    assert result.status == "COMPLETED"
