"""Azure Blob Storage adapter of the payload store.

In Azure the store authenticates with a ``TokenCredential`` (managed identity)
and signs URLs as *user delegation* SAS (``get_user_delegation_key`` +
``generate_blob_sas``), since shared keys are off. For Azurite in tests, which
only does OAuth over HTTPS, it also accepts an ``AzureNamedKeyCredential``;
then SAS tokens are signed with the account key.

A reference is the blob name inside the container.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.credentials import AzureNamedKeyCredential, TokenCredential
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import (
    BlobSasPermissions,
    BlobServiceClient,
    ContentSettings,
    UserDelegationKey,
    generate_blob_sas,
)

from engine.ports.payload_store import (
    PayloadLimits,
    PayloadNotFound,
    SignedOperation,
    validate_reference,
)

# Clock skew allowance for SAS start times.
_SKEW = timedelta(minutes=5)
# A user delegation key lives at most 7 days; ask for one that covers a day.
_UDK_LIFETIME = timedelta(days=1)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class BlobPayloadStore:
    def __init__(
        self,
        account_url: str,
        container: str,
        credential: TokenCredential | AzureNamedKeyCredential,
        *,
        limits: PayloadLimits | None = None,
        create_container: bool = False,
        clock: Callable[[], datetime] = _utcnow,
        **client_kwargs: Any,
    ) -> None:
        self._credential = credential
        self._service = BlobServiceClient(account_url, credential=credential, **client_kwargs)
        self._container = self._service.get_container_client(container)
        self._container_name = container
        self._limits = limits or PayloadLimits()
        self._clock = clock
        self._https = account_url.lower().startswith("https://")
        self._udk: UserDelegationKey | None = None
        self._udk_expiry: datetime | None = None
        self._udk_lock = threading.Lock()
        if create_container:
            with contextlib.suppress(ResourceExistsError):
                self._container.create_container()

    @property
    def limits(self) -> PayloadLimits:
        return self._limits

    @property
    def container_name(self) -> str:
        return self._container_name

    def close(self) -> None:
        self._service.close()

    def _blob(self, reference: str) -> Any:
        return self._container.get_blob_client(validate_reference(reference))

    def put(self, key: str, data: bytes, content_type: str = "application/json") -> str:
        self._blob(key).upload_blob(
            data, overwrite=True, content_settings=ContentSettings(content_type=content_type)
        )
        return key

    def get(self, reference: str) -> bytes:
        try:
            data: bytes = self._blob(reference).download_blob().readall()
        except ResourceNotFoundError:
            raise PayloadNotFound(reference) from None
        return data

    def exists(self, reference: str) -> bool:
        return bool(self._blob(reference).exists())

    def delete(self, reference: str) -> bool:
        try:
            self._blob(reference).delete_blob()
        except ResourceNotFoundError:
            return False
        return True

    # --- signed URLs ----------------------------------------------------------

    def _user_delegation_key(self, start: datetime, expiry: datetime) -> UserDelegationKey:
        with self._udk_lock:
            if self._udk is None or self._udk_expiry is None or self._udk_expiry < expiry:
                key_expiry = max(expiry, start + _UDK_LIFETIME)
                self._udk = self._service.get_user_delegation_key(start, key_expiry)
                self._udk_expiry = key_expiry
            return self._udk

    def signed_url(
        self, reference: str, operation: SignedOperation, expires_in: timedelta | int
    ) -> str:
        blob = self._blob(reference)
        delta = expires_in if isinstance(expires_in, timedelta) else timedelta(seconds=expires_in)
        if delta <= timedelta(0):
            raise ValueError("expires_in must be positive")
        if operation == "read":
            permission = BlobSasPermissions(read=True)
        elif operation == "write":
            permission = BlobSasPermissions(create=True, write=True)
        else:
            raise ValueError(f"unknown operation {operation!r}")
        now = self._clock()
        start, expiry = now - _SKEW, now + delta
        common: dict[str, Any] = {
            "account_name": self._service.account_name,
            "container_name": self._container_name,
            "blob_name": blob.blob_name,
            "permission": permission,
            "start": start,
            "expiry": expiry,
        }
        if self._https:
            common["protocol"] = "https"
        if isinstance(self._credential, AzureNamedKeyCredential):
            sas = generate_blob_sas(account_key=self._credential.named_key.key, **common)
        else:
            udk = self._user_delegation_key(start, expiry)
            sas = generate_blob_sas(user_delegation_key=udk, **common)
        return f"{blob.url}?{sas}"
