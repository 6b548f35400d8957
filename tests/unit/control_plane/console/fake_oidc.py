"""A small local OpenID Connect provider shaped like Entra ID's v2 endpoints, for tests.

It serves the discovery document, an authorize endpoint that signs in the configured user
at once (no page) and redirects back with a code, a token endpoint that redeems the code
only with the PKCE verifier of its challenge, and the JWKS of its RSA test key. Access
tokens are RS256 JWTs with Entra's claims (``iss``, ``aud``, ``exp``, ``roles``, ``name``,
``oid``, ``azp``, ``scp``), so the API's Entra validation checks them as it would a real
one.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass
class User:
    name: str = "Ada Operator"
    roles: list[str] = field(default_factory=lambda: ["operator"])
    oid: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str
    scope: str
    user: User


class FakeOidcProvider:
    def __init__(self, audience: str, client_id: str, host: str = "127.0.0.1") -> None:
        self.audience = audience
        self.client_id = client_id
        self.user = User()
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        self.grants: dict[str, Grant] = {}
        self.token_requests: list[dict[str, str]] = []
        self.authorize_requests: list[dict[str, str]] = []
        self._lock = threading.Lock()
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider._get(self)

            def do_POST(self) -> None:
                provider._post(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.issuer = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOidcProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- keys and tokens ------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()

        def b64(n: int) -> str:
            raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
            return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

        return {
            "keys": [
                {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                 "n": b64(numbers.n), "e": b64(numbers.e)}
            ]
        }  # fmt: skip

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})

    def access_token(self, user: User, lifetime: int = 3600) -> str:
        now = int(time.time())
        return self.sign(
            {
                "iss": self.issuer,
                "aud": self.audience,
                "iat": now,
                "nbf": now,
                "exp": now + lifetime,
                "name": user.name,
                "oid": user.oid,
                "roles": user.roles,
                "azp": self.client_id,
                "scp": "access_as_user",
                "ver": "2.0",
            }
        )

    # --- HTTP -------------------------------------------------------------------------

    def _send(self, h: http.server.BaseHTTPRequestHandler, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _get(self, h: http.server.BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/.well-known/openid-configuration":
            self._send(
                h,
                200,
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": f"{self.issuer}/oauth2/v2.0/authorize",
                    "token_endpoint": f"{self.issuer}/oauth2/v2.0/token",
                    "jwks_uri": f"{self.issuer}/discovery/v2.0/keys",
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                },
            )
        elif parts.path == "/discovery/v2.0/keys":
            self._send(h, 200, self.jwks())
        elif parts.path == "/oauth2/v2.0/authorize":
            self.authorize_requests.append(query)
            problem = None
            if query.get("client_id") != self.client_id:
                problem = "unauthorized_client"
            elif query.get("response_type") != "code":
                problem = "unsupported_response_type"
            elif query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
                problem = "invalid_request"
            if problem is not None:
                self._send(h, 400, {"error": problem})
                return
            code = secrets.token_urlsafe(24)
            with self._lock:
                self.grants[code] = Grant(
                    client_id=query["client_id"],
                    redirect_uri=query["redirect_uri"],
                    challenge=query["code_challenge"],
                    nonce=query.get("nonce", ""),
                    scope=query.get("scope", ""),
                    user=self.user,
                )
            back = query["redirect_uri"] + "?" + urlencode({"code": code, "state": query["state"]})
            h.send_response(302)
            h.send_header("Location", back)
            h.send_header("Content-Length", "0")
            h.end_headers()
        else:
            self._send(h, 404, {"error": "not_found"})

    def _post(self, h: http.server.BaseHTTPRequestHandler) -> None:
        if urlsplit(h.path).path != "/oauth2/v2.0/token":
            self._send(h, 404, {"error": "not_found"})
            return
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0)).decode()
        form = {k: v[0] for k, v in parse_qs(raw).items()}
        self.token_requests.append(form)
        with self._lock:
            grant = self.grants.pop(form.get("code", ""), None)  # a code is used once
        if grant is None:
            self._send(h, 400, {"error": "invalid_grant", "error_description": "unknown code"})
            return
        verifier = form.get("code_verifier", "")
        digest = hashlib.sha256(verifier.encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant.challenge:
            self._send(
                h, 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
            )
            return
        if form.get("redirect_uri") != grant.redirect_uri or form.get("client_id") != (
            grant.client_id
        ):
            self._send(h, 400, {"error": "invalid_grant", "error_description": "mismatch"})
            return
        now = int(time.time())
        id_token = self.sign(
            {"iss": self.issuer, "aud": grant.client_id, "iat": now, "exp": now + 3600,
             "nonce": grant.nonce, "name": grant.user.name, "oid": grant.user.oid}
        )  # fmt: skip
        self._send(
            h,
            200,
            {
                "token_type": "Bearer",
                "scope": grant.scope,
                "expires_in": 3599,
                "access_token": self.access_token(grant.user),
                "id_token": id_token,
            },
        )
