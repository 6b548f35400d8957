"""Entra ID tokens: a verified token is remembered until its expiry, never after."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from control_plane.api.errors import ApiError
from control_plane.auth import EntraAuth
from control_plane.deps import Settings

ISSUER = "https://login.microsoftonline.com/t1/v2.0"


@pytest.fixture(scope="module")
def key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _auth(key: Any) -> EntraAuth:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk["kid"] = "k1"
    return EntraAuth(
        Settings(
            auth_mode="entra",
            entra_tenant_id="t1",
            entra_audience=["api://stepway"],
            entra_jwks={"keys": [jwk]},
            entra_worker_task_types={"client-doc": ["parse"]},
        )
    )


def _bearer(key: Any, **claims: Any) -> str:
    base = {"iss": ISSUER, "aud": "api://stepway", "azp": "client-doc", "oid": "mi-1"}
    token = jwt.encode({**base, **claims}, key, algorithm="RS256", headers={"kid": "k1"})
    return f"Bearer {token}"


def test_a_verified_token_is_remembered_with_its_principal(key: Any) -> None:
    auth = _auth(key)
    header = _bearer(key, exp=int(time.time()) + 600)
    assert auth.remembered(header) is None  # never verified
    first = auth.authenticate(header)
    assert first.subject == "entra:mi-1" and first.serves("parse")
    assert auth.remembered(header) == first
    assert auth.authenticate(header) == first
    # another token of the same identity is verified on its own
    assert auth.remembered(_bearer(key, exp=int(time.time()) + 601)) is None


def test_a_remembered_token_is_refused_once_it_expires(key: Any) -> None:
    auth = _auth(key)
    header = _bearer(key, exp=int(time.time()) + 2)
    assert auth.authenticate(header).subject == "entra:mi-1"
    time.sleep(
        max(
            0.0,
            jwt.decode(header.split()[1], options={"verify_signature": False})["exp"] - time.time(),
        )
        + 0.1
    )
    assert auth.remembered(header) is None
    with pytest.raises(ApiError) as refused:
        auth.authenticate(header)
    assert refused.value.status == 401


def test_a_token_that_fails_verification_is_not_remembered(key: Any) -> None:
    auth = _auth(key)
    header = _bearer(key, exp=int(time.time()) + 600, aud="other")
    with pytest.raises(ApiError):
        auth.authenticate(header)
    assert auth.remembered(header) is None
