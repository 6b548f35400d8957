"""Bearer tokens for the Task API.

* ``STEPWAY_API_SCOPE`` set: an Entra ID token for that scope from ``azure-identity``
  (``DefaultAzureCredential``: the app's managed identity in Azure, using
  ``AZURE_CLIENT_ID`` for a user-assigned one; a developer login or a service
  principal elsewhere), cached and refreshed before it expires. ``azure-identity``
  is optional and imported only then.
* else ``STEPWAY_TOKEN``: a static token (the embedded control plane's token file).
* else no token (the embedded default without auth).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

log = logging.getLogger("stepway_worker")


class TokenProvider(Protocol):
    def token(self) -> str | None:
        """The bearer token to send now, or None for no Authorization header."""

    def invalidate(self) -> None:
        """The server refused the last token (401): fetch a new one next time."""


class NoToken:
    def token(self) -> str | None:
        return None

    def invalidate(self) -> None:
        return None


class StaticToken:
    def __init__(self, value: str) -> None:
        self._value = value

    def token(self) -> str | None:
        return self._value

    def invalidate(self) -> None:
        return None

    def __repr__(self) -> str:  # never print the token
        return "StaticToken(***)"


class AzureIdentityToken:
    """An Entra ID access token for ``scope``, refreshed ``refresh_margin`` seconds
    before it expires (and after a 401)."""

    def __init__(
        self, scope: str, credential: Any = None, *, refresh_margin: float = 300.0
    ) -> None:
        self.scope = scope
        self._credential = credential
        self._refresh_margin = refresh_margin
        self._token: str | None = None
        self._expires_on = 0.0
        self._lock = threading.Lock()

    def _get_credential(self) -> Any:
        if self._credential is None:
            try:
                from azure.identity import DefaultAzureCredential
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise RuntimeError(
                    "STEPWAY_API_SCOPE is set but azure-identity is not installed: "
                    "pip install 'stepway-worker[azure]'"
                ) from exc
            client_id = os.environ.get("AZURE_CLIENT_ID") or None
            self._credential = DefaultAzureCredential(managed_identity_client_id=client_id)
        return self._credential

    def token(self) -> str | None:
        with self._lock:
            if self._token is None or time.time() >= self._expires_on - self._refresh_margin:
                access = self._get_credential().get_token(self.scope)
                self._token = access.token
                self._expires_on = float(access.expires_on)
            return self._token

    def invalidate(self) -> None:
        with self._lock:
            self._token = None

    def __repr__(self) -> str:
        return f"AzureIdentityToken({self.scope!r})"


def token_provider_from_env(env: Mapping[str, str] | None = None) -> TokenProvider:
    env = os.environ if env is None else env
    scope = env.get("STEPWAY_API_SCOPE", "").strip()
    if scope:
        return AzureIdentityToken(scope)
    static = env.get("STEPWAY_TOKEN", "").strip()
    if static:
        return StaticToken(static)
    return NoToken()
