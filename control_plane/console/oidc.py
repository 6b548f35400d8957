"""OpenID Connect authorization code flow with PKCE (RFC 7636), for the Entra ID sign-in.

The endpoints come from the authority's discovery document
(``<authority>/.well-known/openid-configuration``: ``authorization_endpoint``,
``token_endpoint``). :func:`begin` makes the state, nonce and code verifier and the URL to
send the browser to; :func:`redeem` exchanges the code (with the verifier) for tokens.
The access token is then validated by the API's own authenticator, not here.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from control_plane.api.errors import ApiError

DISCOVERY_TTL_SECONDS = 3600.0


@dataclass(frozen=True)
class Endpoints:
    authorize: str
    token: str


@dataclass(frozen=True)
class Pending:
    """What the browser keeps (in a short-lived cookie) between the redirect out and back."""

    state: str
    nonce: str
    verifier: str
    next_url: str


def challenge(verifier: str) -> str:
    """S256 code challenge: BASE64URL(SHA256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class OidcClient:
    def __init__(
        self,
        authority: str,
        client_id: str,
        scope: str,
        client_secret: str | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self.authority = authority.rstrip("/")
        self.client_id = client_id
        self.scope = scope
        self._secret = client_secret
        self._http = http or httpx.Client(timeout=15)
        self._endpoints: tuple[float, Endpoints] | None = None
        self._lock = threading.Lock()

    def endpoints(self) -> Endpoints:
        now = time.monotonic()
        with self._lock:
            cached = self._endpoints
        if cached is not None and now - cached[0] < DISCOVERY_TTL_SECONDS:
            return cached[1]
        url = f"{self.authority}/.well-known/openid-configuration"
        try:
            response = self._http.get(url)
            response.raise_for_status()
            doc = response.json()
            found = Endpoints(str(doc["authorization_endpoint"]), str(doc["token_endpoint"]))
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise ApiError(
                502, f"cannot read the sign-in provider's configuration at {url}: {exc}"
            ) from None
        with self._lock:
            self._endpoints = (now, found)
        return found

    def begin(self, redirect_uri: str, next_url: str) -> tuple[str, Pending]:
        pending = Pending(
            state=secrets.token_urlsafe(24),
            nonce=secrets.token_urlsafe(24),
            verifier=secrets.token_urlsafe(48),  # 64 characters, within 43-128
            next_url=next_url,
        )
        query = {
            "client_id": self.client_id,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "response_mode": "query",
            "scope": f"openid profile {self.scope}",
            "state": pending.state,
            "nonce": pending.nonce,
            "code_challenge": challenge(pending.verifier),
            "code_challenge_method": "S256",
        }
        return f"{self.endpoints().authorize}?{urlencode(query)}", pending

    def redeem(self, code: str, redirect_uri: str, pending: Pending) -> dict[str, Any]:
        form = {
            "grant_type": "authorization_code",
            "client_id": self.client_id,
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": pending.verifier,
            "scope": f"openid profile {self.scope}",
        }
        if self._secret:
            form["client_secret"] = self._secret
        try:
            response = self._http.post(self.endpoints().token, data=form)
        except httpx.HTTPError as exc:
            raise ApiError(502, f"the sign-in provider did not answer: {exc}") from None
        try:
            body: dict[str, Any] = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or "access_token" not in body:
            detail = body.get("error_description") or body.get("error") or response.text[:200]
            raise ApiError(401, f"the sign-in provider refused the code: {detail}")
        id_token = body.get("id_token")
        if isinstance(id_token, str) and id_token:
            # received straight from the token endpoint over TLS (OIDC Core 3.1.3.7): the
            # nonce binds it to this sign-in; the access token is validated by the API
            import jwt

            claims = jwt.decode(id_token, options={"verify_signature": False})
            if claims.get("nonce") != pending.nonce:
                raise ApiError(401, "the sign-in answer does not belong to this sign-in")
        return body
