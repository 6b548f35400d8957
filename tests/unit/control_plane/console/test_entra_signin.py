"""Entra ID sign-in of the console (authorization code with PKCE), against a local fake
OpenID Connect provider whose tokens the API's own Entra validation checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from control_plane.console.config import ConsoleSettings
from control_plane.console.oidc import challenge
from tests.unit.control_plane.console.conftest import csrf_of
from tests.unit.control_plane.console.fake_oidc import FakeOidcProvider, User

AUDIENCE = "api://stepway-test"
CLIENT_ID = "console-client-id"


@pytest.fixture
def provider() -> Iterator[FakeOidcProvider]:
    with FakeOidcProvider(AUDIENCE, CLIENT_ID) as fake:
        yield fake


def _entra_console(make_console: Any, provider: FakeOidcProvider) -> Any:
    return make_console(
        "entra",
        entra_issuer=provider.issuer,
        entra_audience=[AUDIENCE],
        entra_jwks_url=f"{provider.issuer}/discovery/v2.0/keys",
        console=ConsoleSettings(client_id=CLIENT_ID),
    )


def _sign_in(
    client: httpx.Client, provider: FakeOidcProvider, next_url: str = "/"
) -> httpx.Response:
    """Click through: console -> sign-in page -> provider -> callback."""
    first = client.get(next_url)
    assert first.status_code == 303, first.text
    signin = client.get(first.headers["location"])
    assert "Sign in with Microsoft Entra ID" in signin.text
    start = client.get("/signin/entra", params={"next": next_url})
    assert start.status_code == 302
    with httpx.Client(timeout=10) as idp:  # the provider is another site
        back = idp.get(start.headers["location"])
    assert back.status_code == 302, back.text
    return client.get(back.headers["location"])


def test_entra_sign_in_with_pkce_then_pages_and_actions_by_app_role(
    make_console: Any, provider: FakeOidcProvider
) -> None:
    console = _entra_console(make_console, provider)
    workflow_id = console.invoice_run()
    client = console.browser()
    done = _sign_in(client, provider, f"/runs/{workflow_id}")
    assert done.status_code == 200, done.text
    assert f'content="0;url=/runs/{workflow_id}"' in done.text  # moves on, same-site

    # what the console sent the provider: a code request with an S256 challenge ...
    [auth] = provider.authorize_requests
    assert auth["client_id"] == CLIENT_ID and auth["response_type"] == "code"
    assert auth["code_challenge_method"] == "S256" and len(auth["code_challenge"]) == 43
    assert f"{AUDIENCE}/.default" in auth["scope"].split()
    assert auth["redirect_uri"] == f"{console.url}/signin/callback"
    # ... redeemed with the verifier of that challenge
    [token] = provider.token_requests
    assert challenge(token["code_verifier"]) == auth["code_challenge"]
    assert "client_secret" not in token  # a public client unless a secret is configured

    cookies = done.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("stepway_session="))
    assert "HttpOnly" in session and "SameSite=strict" in session
    page = client.get(f"/runs/{workflow_id}")
    assert page.status_code == 200 and "Ada Operator" in page.text
    assert "/actions/pause" in page.text  # operator app role
    r = client.post(f"/runs/{workflow_id}/actions/pause", data={"csrf": csrf_of(page.text)})
    assert r.status_code == 303
    assert [c.kind for c in console.signals.calls] == ["suspend"]


def test_an_entra_reader_sees_no_actions(make_console: Any, provider: FakeOidcProvider) -> None:
    console = _entra_console(make_console, provider)
    provider.user = User(name="Rita Reader", roles=["reader"])
    workflow_id = console.invoice_run()
    client = console.browser()
    assert _sign_in(client, provider).status_code == 200
    page = client.get(f"/runs/{workflow_id}")
    assert "Rita Reader" in page.text and "/actions/" not in page.text
    forged = client.post(f"/runs/{workflow_id}/actions/pause", data={"csrf": csrf_of(page.text)})
    assert forged.status_code == 403
    assert console.signals.calls == []


def test_a_user_without_an_app_role_is_not_let_in(
    make_console: Any, provider: FakeOidcProvider
) -> None:
    console = _entra_console(make_console, provider)
    provider.user = User(name="Nobody", roles=[])
    done = _sign_in(console.browser(), provider)
    assert done.status_code == 403 and "Not signed in" in done.text
    assert "stepway_session=" not in " ".join(done.headers.get_list("set-cookie"))


def test_a_callback_that_this_browser_did_not_start_is_refused(
    make_console: Any, provider: FakeOidcProvider
) -> None:
    console = _entra_console(make_console, provider)
    victim = console.browser()
    attacker = console.browser()
    start = attacker.get("/signin/entra")
    with httpx.Client(timeout=10) as idp:
        back = idp.get(start.headers["location"])
    # the attacker's callback URL, opened in another browser (login CSRF): no state cookie
    refused = victim.get(back.headers["location"])
    assert refused.status_code == 400 and "does not match" in refused.text
    # a state that does not match
    query = parse_qs(urlsplit(back.headers["location"]).query)
    wrong = attacker.get("/signin/callback", params={"code": query["code"][0], "state": "x"})
    assert wrong.status_code == 400
    # the provider's error is shown
    error = attacker.get(
        "/signin/callback", params={"error": "access_denied", "error_description": "said no"}
    )
    assert error.status_code == 401 and "said no" in error.text


def test_a_replayed_code_is_refused(make_console: Any, provider: FakeOidcProvider) -> None:
    console = _entra_console(make_console, provider)
    client = console.browser()
    start = client.get("/signin/entra")
    with httpx.Client(timeout=10) as idp:
        back = idp.get(start.headers["location"]).headers["location"]
    assert client.get(back).status_code == 200
    # the sign-in cookie was used up; start again, but bring the old code
    again = client.get("/signin/entra")
    state = parse_qs(urlsplit(again.headers["location"]).query)["state"][0]
    old_code = parse_qs(urlsplit(back).query)["code"][0]
    replay = client.get("/signin/callback", params={"code": old_code, "state": state})
    assert replay.status_code == 401 and "unknown code" in replay.text
