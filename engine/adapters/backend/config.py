"""Which durable backend an engine process or client connects to.

``kind="embedded"``: the in-memory backend Stepway hosts itself
(:mod:`engine.adapters.backend.embedded`), reached at ``address`` (``host:port``, plain gRPC).

``kind="azure"``: the Durable Task Scheduler at ``endpoint`` (``https://...``), task hub
``task_hub``, authenticated with ``DefaultAzureCredential`` (``credential="default"``) or
``ManagedIdentityCredential(client_id=managed_identity_client_id)``
(``credential="managed_identity"``; no client id means the system-assigned identity).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "DEFAULT_CALL_TIMEOUT_SECONDS",
    "DEFAULT_EMBEDDED_ADDRESS",
    "GRPC_MAX_MESSAGE_BYTES",
    "BackendConfig",
    "BackendKind",
    "CredentialKind",
]

BackendKind = Literal["embedded", "azure"]
CredentialKind = Literal["default", "managed_identity"]

DEFAULT_EMBEDDED_ADDRESS = "127.0.0.1:4001"

#: The largest gRPC message between the engine and the durable backend, both ways. The
#: embedded backend's server and every embedded client and worker use the same value (a
#: message one side may send, the other may receive); with the Durable Task Scheduler it
#: is the receive limit of Stepway's clients, and the scheduler keeps its own limits
#: (docs/configuration.md). Stepway keeps its own messages far smaller
#: (engine.runtime.run_limits.RunLimits.max_message_bytes); this bounds a whole work item, an
#: orchestration's history included.
GRPC_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_ENV_PREFIX = "STEPWAY_BACKEND_"

#: how long a client's call to the backend may take when its caller sets no deadline
#: (engine/adapters/backend/deadlines.py): well above a call's few milliseconds, even
#: under a burst of starts in one process, and below the 30 s a worker SDK or an HTTP
#: client commonly waits for an answer
DEFAULT_CALL_TIMEOUT_SECONDS = 10.0


class BackendConfig(BaseModel):
    """Durable backend connection settings (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: BackendKind = "embedded"
    address: str = Field(
        default=DEFAULT_EMBEDDED_ADDRESS, description="embedded only: host:port of the backend"
    )
    endpoint: str | None = Field(
        default=None, description="azure only: scheduler endpoint, e.g. https://x.durabletask.io"
    )
    task_hub: str | None = Field(default=None, description="azure only: task hub name")
    credential: CredentialKind = Field(
        default="default", description="azure only: how to get an Entra ID token"
    )
    managed_identity_client_id: str | None = Field(
        default=None,
        description="azure only: client id of a user-assigned managed identity",
    )
    call_timeout_seconds: float = Field(
        default=DEFAULT_CALL_TIMEOUT_SECONDS,
        gt=0,
        le=3600,
        description="the deadline of a client's call that sets none (waits excepted)",
    )

    @model_validator(mode="after")
    def _check_kind_fields(self) -> Self:
        if self.kind == "embedded":
            host, sep, port = self.address.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"embedded address must be host:port, got {self.address!r}")
        else:
            if not self.endpoint:
                raise ValueError("azure backend needs endpoint")
            if not self.task_hub:
                raise ValueError("azure backend needs task_hub")
            if self.managed_identity_client_id and self.credential != "managed_identity":
                raise ValueError(
                    "managed_identity_client_id is only used with credential='managed_identity'"
                )
        return self

    @classmethod
    def embedded(cls, address: str = DEFAULT_EMBEDDED_ADDRESS) -> BackendConfig:
        return cls(kind="embedded", address=address)

    @classmethod
    def azure(
        cls,
        endpoint: str,
        task_hub: str,
        *,
        managed_identity_client_id: str | None = None,
        credential: CredentialKind | None = None,
    ) -> BackendConfig:
        """Azure settings; a client id implies ``credential="managed_identity"``."""
        if credential is None:
            credential = "managed_identity" if managed_identity_client_id else "default"
        return cls(
            kind="azure",
            endpoint=endpoint,
            task_hub=task_hub,
            credential=credential,
            managed_identity_client_id=managed_identity_client_id,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BackendConfig:
        """Reads ``STEPWAY_BACKEND_KIND``, ``_ADDRESS``, ``_ENDPOINT``, ``_TASK_HUB``,
        ``_CREDENTIAL``, ``_MANAGED_IDENTITY_CLIENT_ID`` and ``_CALL_TIMEOUT_SECONDS``;
        unset fields keep their
        defaults (embedded at 127.0.0.1:4001)."""
        env = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for name in cls.model_fields:
            value = env.get(_ENV_PREFIX + name.upper())
            if value:
                values[name] = value
        return cls.model_validate(values)
