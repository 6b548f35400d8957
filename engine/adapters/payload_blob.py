"""Azure Blob Storage adapter of the payload store.

In Azure the store authenticates with a ``TokenCredential`` (managed identity)
and signs URLs as *user delegation* SAS (``get_user_delegation_key`` +
``generate_blob_sas``), since shared keys are off. For Azurite in tests, which
only does OAuth over HTTPS, it also accepts an ``AzureNamedKeyCredential``;
then SAS tokens are signed with the account key.

A reference is the blob name inside the container.

Errors of the service become the port's: a blob that is not there ``PayloadNotFound``;
a request that could not be sent or answered (connection refused, reset, timed out)
and the answers that mean "busy or failing right now" (HTTP 408, 429, 500, 502, 503,
504) ``PayloadStoreUnavailable``, once the SDK's own retries are spent; any other
answer (403 no permission, 404 no such container, 400) ``PayloadStoreRefused``. Their
messages name the account and container and the SDK's error class, status and code,
never the account URL's query (a SAS) nor a key.

How long a call waits before it answers an outage is the client's retry policy and
timeouts. The storage SDK's defaults (azure-storage-blob 12.31: ``ExponentialRetry`` in
``azure/storage/blob/_shared/policies.py``, the timeouts in ``_shared/base_client.py``
and ``_shared/constants.py``):

* ``retry_total=3``: retries after the first request, so 4 requests; the separate
  ``retry_connect``, ``retry_read`` and ``retry_status`` counters (3 each) stop the
  retries too, whichever runs out first, so a ``retry_total`` above 3 alone gives no
  more retries;
* ``initial_backoff=15``, ``increment_base=3``, ``random_jitter_range=3``: before retry
  ``n`` (from 1) the client sleeps ``initial_backoff + increment_base ** n`` seconds,
  varied at random by up to ``random_jitter_range`` either way: 18, 24 and 42 s, about
  84 s in all;
* ``connection_timeout=20``: seconds to open a connection; ``read_timeout=60``: seconds
  each read of the answer may wait for bytes (the ``requests`` read timeout: between
  bytes, not the whole transfer).

So with them a Blob service answering 503 was reported after about 84 s, one that never
answers after about 4 x 60 + 84 = 324 s, past the timeout of any client of the Task API.
The store applies :class:`~engine.adapters.blob_client_settings.BlobClientSettings`
instead (``client``; by default Stepway's: 3 requests, about 7 s of back-off, 5 s to
connect, 20 s per read), configured with ``STEPWAY_BLOB_*`` (docs/configuration.md).
``client_kwargs`` go to ``BlobServiceClient`` after them (tests: a transport, no retries).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from azure.core.credentials import AzureNamedKeyCredential, TokenCredential
from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    IncompleteReadError,
    ResourceExistsError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)
from azure.storage.blob import (
    BlobSasPermissions,
    BlobServiceClient,
    ContentSettings,
    UserDelegationKey,
    generate_blob_sas,
)

from engine.adapters.blob_client_settings import BlobClientSettings
from engine.ports.payload_store import (
    PayloadLimits,
    PayloadNotFound,
    PayloadStoreRefused,
    PayloadStoreUnavailable,
    SignedOperation,
    validate_reference,
)

# Clock skew allowance for SAS start times.
_SKEW = timedelta(minutes=5)
# A user delegation key lives at most 7 days; ask for one that covers a day.
_UDK_LIFETIME = timedelta(days=1)
#: HTTP statuses of the service that mean "busy or failing right now": try again later
_OUTAGE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


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
        client: BlobClientSettings | None = None,
        **client_kwargs: Any,
    ) -> None:
        self._credential = credential
        options = (client or BlobClientSettings()).client_kwargs() | client_kwargs
        self._service = BlobServiceClient(account_url, credential=credential, **options)
        self._container = self._service.get_container_client(container)
        self._container_name = container
        account = self._service.account_name or urlsplit(account_url).hostname or "?"
        self._store = f"Azure Blob container {container!r} of account {account!r}"
        self._limits = limits or PayloadLimits()
        self._clock = clock
        self._https = account_url.lower().startswith("https://")
        self._udk: UserDelegationKey | None = None
        self._udk_expiry: datetime | None = None
        self._udk_lock = threading.Lock()
        if create_container:
            with self._calling("create the container"), contextlib.suppress(ResourceExistsError):
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

    @contextlib.contextmanager
    def _calling(self, operation: str) -> Iterator[None]:
        """Turn the SDK's errors of ``operation`` into the port's (module docstring)."""
        try:
            yield
        except AzureError as exc:
            raise self._failure(operation, exc) from exc

    def _failure(self, operation: str, exc: AzureError) -> Exception:
        cls = type(exc)
        status = exc.status_code if isinstance(exc, HttpResponseError) else None
        # the storage SDK sets it on its errors: a StorageErrorCode (a str enum) or a str
        code = getattr(exc, "error_code", None)
        code = getattr(code, "value", code)
        answer = " ".join(str(part) for part in (status, code) if part)
        detail = f"{cls.__module__}.{cls.__qualname__}" + (f" HTTP {answer}" if answer else "")
        if isinstance(exc, ServiceRequestError):
            what = f"could not be reached ({cls.__name__})"
        elif isinstance(exc, ServiceResponseTimeoutError):
            what = f"did not answer within the read timeout ({cls.__name__})"
        elif isinstance(exc, ServiceResponseError | IncompleteReadError):
            what = f"did not answer in full ({cls.__name__})"
        elif status in _OUTAGE_STATUSES:
            busy = "is throttling requests" if status == 429 else "is unavailable"
            what = f"{busy}: it answered HTTP {answer} ({cls.__name__})"
        else:
            answered = f"HTTP {answer}" if answer else "an error"
            return PayloadStoreRefused(
                f"{self._store} refused to {operation}: it answered {answered} ({cls.__name__})"
            )
        return PayloadStoreUnavailable(f"{self._store} {what}", detail)

    def put(self, key: str, data: bytes, content_type: str = "application/json") -> str:
        blob = self._blob(key)
        with self._calling(f"write {key}"):
            blob.upload_blob(
                data, overwrite=True, content_settings=ContentSettings(content_type=content_type)
            )
        return key

    def get(self, reference: str) -> bytes:
        blob = self._blob(reference)
        with self._calling(f"read {reference}"):
            try:
                data: bytes = blob.download_blob().readall()
            except ResourceNotFoundError:
                raise PayloadNotFound(reference) from None
        return data

    def exists(self, reference: str) -> bool:
        blob = self._blob(reference)
        with self._calling(f"look up {reference}"):
            return bool(blob.exists())

    def delete(self, reference: str) -> bool:
        blob = self._blob(reference)
        with self._calling(f"delete {reference}"):
            try:
                blob.delete_blob()
            except ResourceNotFoundError:
                return False
        return True

    # --- signed URLs ----------------------------------------------------------

    def _user_delegation_key(self, start: datetime, expiry: datetime) -> UserDelegationKey:
        with self._udk_lock:
            if self._udk is None or self._udk_expiry is None or self._udk_expiry < expiry:
                key_expiry = max(expiry, start + _UDK_LIFETIME)
                with self._calling("issue a user delegation key"):
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
