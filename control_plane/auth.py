"""Authentication and authorization of control plane callers.

Roles (docs/architecture.md, "Security model"): ``admin`` registers definitions and task
definitions, ``operator`` starts, pauses, resumes, terminates and retries runs and
completes HUMAN tasks, ``reader`` reads, ``worker`` polls, updates, logs and fetches
storage locations for its own task types only. ``admin`` and ``operator`` may also
read. Modes (``Settings.auth_mode``):

* ``none`` (embedded dev default): no token needed; the anonymous caller is admin,
  operator, reader and a worker of every type, so unmodified Conductor SDK workers work.
* ``tokens``: opaque bearer tokens from a local file mapping each token to
  ``{name, roles, taskTypes}``; tokens with the same name are one principal (token
  rotation). Only SHA-256 digests are kept in memory and they
  are compared in constant time; tokens are never logged.
* ``entra``: Entra ID access tokens (JWT) checked for signature (the tenant's JWKS),
  issuer, audience and expiry with PyJWT. App roles in the ``roles`` claim map to
  Stepway roles (``entra_role_map``, identity otherwise); a worker identity's task
  types come from ``entra_worker_task_types`` keyed by its client id (``azp`` or
  ``appid``); an identity listed there is a worker of those types even without an app
  role (managed identities of worker apps get no app role assignment).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread
import yaml
from fastapi import Request

from control_plane.api.errors import ApiError
from control_plane.deps import Settings

log = logging.getLogger(__name__)

ROLES = frozenset({"admin", "operator", "reader", "worker"})


@dataclass(frozen=True)
class Principal:
    name: str
    roles: frozenset[str]
    #: task types this worker serves; None = every type
    task_types: frozenset[str] | None = frozenset()
    #: the authenticated identity (``token:<name>``, ``entra:<object id>``); None when
    #: authentication is off. Task leases are bound to it (``workerId`` is informative).
    subject: str | None = None

    def has_role(self, role: str) -> bool:
        return role in self.roles

    def can_read(self) -> bool:
        return bool(self.roles & {"reader", "operator", "admin"})

    def serves(self, task_type: str) -> bool:
        if "worker" not in self.roles:
            return False
        return self.task_types is None or task_type in self.task_types

    @property
    def all_types(self) -> bool:
        return "worker" in self.roles and self.task_types is None


ANONYMOUS = Principal("anonymous", frozenset(ROLES), None)


class Authenticator(Protocol):
    #: ``authenticate`` may wait on the network (an identity provider's keys)
    blocking: bool

    def authenticate(self, authorization: str | None) -> Principal: ...


def _unauthorized(message: str = "a valid bearer token is required") -> ApiError:
    return ApiError(401, message)


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise _unauthorized()
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("the Authorization header must be 'Bearer <token>'")
    return token.strip()


class NoAuth:
    blocking = False

    def authenticate(self, authorization: str | None) -> Principal:
        return ANONYMOUS


def _principal(name: str, roles: Iterable[str], task_types: Iterable[str] | None) -> Principal:
    role_set = frozenset(roles)
    unknown = role_set - ROLES
    if unknown:
        raise ValueError(f"principal {name!r}: unknown roles {sorted(unknown)}")
    types = None if task_types is None else frozenset(task_types)
    if types is not None and "*" in types:
        types = None
    return Principal(
        name, role_set, types if "worker" in role_set else frozenset(), subject=f"token:{name}"
    )


class TokenAuth:
    """Opaque tokens from a local file."""

    blocking = False

    def __init__(self, entries: Iterable[tuple[str, Principal]]) -> None:
        self._entries = [(hashlib.sha256(t.encode()).digest(), p) for t, p in entries]
        if not self._entries:
            raise ValueError("the tokens file lists no tokens")

    @classmethod
    def from_file(cls, path: Path) -> TokenAuth:
        text = path.read_text(encoding="utf-8")
        data: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        items = data.get("tokens") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a list under 'tokens'")
        entries: list[tuple[str, Principal]] = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("token"), str):
                raise ValueError(f"{path}: tokens[{i}] needs a string 'token'")
            if len(item["token"]) < 16:
                raise ValueError(f"{path}: tokens[{i}] is shorter than 16 characters")
            raw_types = item.get("taskTypes")
            entries.append(
                (
                    item["token"],
                    _principal(
                        str(item.get("name") or f"token-{i}"),
                        item.get("roles") or [],
                        None
                        if raw_types is None and "worker" not in (item.get("roles") or [])
                        else (raw_types or []),
                    ),
                )
            )
        return cls(entries)

    def authenticate(self, authorization: str | None) -> Principal:
        digest = hashlib.sha256(_bearer(authorization).encode()).digest()
        found: Principal | None = None
        for known, principal in self._entries:  # no early exit: constant time per entry
            if hmac.compare_digest(known, digest):
                found = principal
        if found is None:
            raise _unauthorized("unknown bearer token")
        return found


#: verified Entra ID tokens remembered per process; past it the memory starts afresh
_TOKENS_REMEMBERED = 10_000


class EntraAuth:
    """Entra ID JWT validation with PyJWT. A verified token is remembered (by its
    SHA-256) until its ``exp``, so that a worker's polls and results do not each pay
    the signature check (nor a trip to a thread, see ``principal``)."""

    blocking = True  # the signing keys are fetched (and refreshed) from Entra ID

    def __init__(self, settings: Settings) -> None:
        import jwt

        self._jwt = jwt
        tenant = settings.entra_tenant_id
        if not tenant and not settings.entra_issuer:
            raise ValueError("auth_mode 'entra' needs entra_tenant_id or entra_issuer")
        if not settings.entra_audience:
            raise ValueError("auth_mode 'entra' needs entra_audience")
        self._issuer = settings.entra_issuer or f"https://login.microsoftonline.com/{tenant}/v2.0"
        self._audience = list(settings.entra_audience)
        self._role_map = dict(settings.entra_role_map)
        self._worker_types = {k: list(v) for k, v in settings.entra_worker_task_types.items()}
        self._verified: dict[bytes, tuple[float, Principal]] = {}
        self._static_keys: dict[str, Any] | None = None
        self._jwks_client: Any = None
        if settings.entra_jwks is not None:
            self._static_keys = {
                str(k.get("kid")): jwt.PyJWK(k).key for k in settings.entra_jwks.get("keys", [])
            }
        else:
            url = (
                settings.entra_jwks_url
                or f"https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys"
            )
            self._jwks_client = jwt.PyJWKClient(url, cache_keys=True, lifespan=3600)

    def _key(self, token: str) -> Any:
        if self._static_keys is not None:
            kid = str(self._jwt.get_unverified_header(token).get("kid"))
            if kid not in self._static_keys:
                raise _unauthorized("token signed with an unknown key")
            return self._static_keys[kid]
        return self._jwks_client.get_signing_key_from_jwt(token).key

    def remembered(self, authorization: str | None) -> Principal | None:
        """The principal of a token verified earlier and not expired yet, else None."""
        if not authorization:
            return None
        entry = self._verified.get(hashlib.sha256(authorization.encode()).digest())
        if entry is None or entry[0] <= time.time():
            return None
        return entry[1]

    def authenticate(self, authorization: str | None) -> Principal:
        found = self.remembered(authorization)
        if found is not None:
            return found
        token = _bearer(authorization)
        try:
            claims = self._jwt.decode(
                token,
                self._key(token),
                algorithms=["RS256"],
                audience=self._audience,
                issuer=self._issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except ApiError:
            raise
        except Exception as exc:  # PyJWT errors, JWKS fetch errors
            raise _unauthorized(f"invalid token: {type(exc).__name__}") from None
        roles = {self._role_map.get(str(r), str(r)) for r in claims.get("roles") or []}
        roles &= ROLES
        client_id = str(claims.get("azp") or claims.get("appid") or "")
        types = self._worker_types.get(client_id, [])
        if client_id in self._worker_types:
            # The identity map handed over by the Pulumi program is the grant: a worker's
            # managed identity has no app role assignment, only its task list here.
            roles.add("worker")
        name = str(claims.get("name") or claims.get("oid") or client_id or "entra")
        # oid: the object id of the user or service principal (a managed identity), the
        # same for every token it gets; sub as a fallback (per application)
        subject = f"entra:{claims.get('oid') or claims.get('sub') or client_id}"
        found = Principal(name, frozenset(roles), frozenset(types), subject=subject)
        if len(self._verified) >= _TOKENS_REMEMBERED:
            self._verified.clear()
        assert authorization is not None  # _bearer refused a missing one
        digest = hashlib.sha256(authorization.encode()).digest()
        self._verified[digest] = (float(claims["exp"]), found)
        return found


def build_authenticator(settings: Settings) -> Authenticator:
    if settings.auth_mode == "none":
        return NoAuth()
    if settings.auth_mode == "tokens":
        if settings.tokens_file is None:
            raise ValueError("auth_mode 'tokens' needs tokens_file")
        return TokenAuth.from_file(settings.tokens_file)
    return EntraAuth(settings)


async def principal(request: Request) -> Principal:
    """FastAPI dependency: the authenticated caller. An authenticator that may wait on
    the network (Entra ID fetching its signing keys) runs in a worker thread, unless it
    remembers the token; the others answer on the event loop (a sync dependency would
    cost each request a hop to the thread pool and back)."""
    auth: Authenticator = request.app.state.authenticator
    header = request.headers.get("authorization")
    if isinstance(auth, EntraAuth):
        known = auth.remembered(header)
        if known is not None:
            return known
    if auth.blocking:
        return await anyio.to_thread.run_sync(auth.authenticate, header)
    return auth.authenticate(header)


def require_role(p: Principal, role: str) -> None:
    if role == "reader":
        if not p.can_read():
            raise ApiError(403, f"{p.name} may not read (needs reader, operator or admin)")
        return
    if not p.has_role(role):
        raise ApiError(403, f"{p.name} lacks the {role!r} role")


def require_worker(p: Principal, task_type: str) -> None:
    if not p.serves(task_type):
        raise ApiError(403, f"{p.name} is not a worker of task type {task_type!r}")
