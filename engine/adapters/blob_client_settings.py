"""How long the Azure Blob payload store's client waits: its retries and timeouts.

Stepway's own defaults, not the Azure SDK's (engine/adapters/payload_blob.py says the
SDK's and why they are too long for a request a worker is waiting on). Read from
``STEPWAY_BLOB_*`` by engine/app/config.py; no Azure import here, so reading the
configuration stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the random part of each back-off: the wait varies by up to this many seconds either way
JITTER_SECONDS = 0.5


@dataclass(frozen=True)
class BlobClientSettings:
    """The Blob client's retry policy (the storage SDK's ``ExponentialRetry``) and
    timeouts. A call that meets an outage makes ``1 + retry_total`` requests; before
    retry ``n`` (from 1) it waits ``initial_backoff_seconds + increment_base ** n``
    seconds, give or take :data:`JITTER_SECONDS`.

    With the defaults: 3 requests, waits of about 2.5 and 4.5 s, so a service that
    answers 503 is reported after about 7 s; one that refuses connections at once
    after about 7 s; one whose connections time out after about 3 x 5 + 7 = 22 s;
    one that accepts requests and never answers after about 3 x 20 + 7 = 67 s (the
    SDK's defaults: about 84, 84, 164 and 324 s). Below the Task API clients' own
    timeout (the worker SDKs': 30 s) but for a service that hangs; within a region
    the Blob service answers a request of a payload (at most
    ``STEPWAY_PAYLOAD_MAX_SIZE``, 10 MiB by default) in well under a second, so the
    read timeout, which bounds each wait for the service's next bytes and not the
    whole transfer, leaves a wide margin."""

    #: retries after the first request (each kind of failure alike)
    retry_total: int = 2
    #: the fixed part of every back-off
    initial_backoff_seconds: float = 0.5
    #: retry n waits ``increment_base ** n`` more seconds
    increment_base: float = 2.0
    #: to open a connection (TCP connect)
    connect_timeout_seconds: float = 5.0
    #: for each read of the answer while none of its bytes arrive
    read_timeout_seconds: float = 20.0

    def client_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``BlobServiceClient`` that apply these settings.
        The SDK also counts connection, read and status retries separately, each 3 by
        default, and stops at whichever runs out first: they are set to ``retry_total``
        too, so that it alone decides."""
        return {
            "retry_total": self.retry_total,
            "retry_connect": self.retry_total,
            "retry_read": self.retry_total,
            "retry_status": self.retry_total,
            "initial_backoff": self.initial_backoff_seconds,
            "increment_base": self.increment_base,
            "random_jitter_range": JITTER_SECONDS,
            "connection_timeout": self.connect_timeout_seconds,
            "read_timeout": self.read_timeout_seconds,
        }
