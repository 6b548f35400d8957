"""Retry schedule of a task (task definition ``retryLogic``), pure arithmetic.

``retries_made`` is the number of retries already made before the one being scheduled
(0 for the first retry, i.e. after the first attempt failed), as Conductor's
``retryCount``:

* ``FIXED``: ``retryDelaySeconds``
* ``LINEAR_BACKOFF``: ``retryDelaySeconds * backoffScaleFactor * (retries_made + 1)``
* ``EXPONENTIAL_BACKOFF``: ``retryDelaySeconds * 2 ** retries_made``

``maxRetryDelaySeconds`` (when above 0) caps that delay, as conductor-oss's
``applyMaxRetryDelayCap``. A ``retry_after`` (e.g. from an HTTP ``Retry-After``) wins when it
is larger (a server's wait is not cut by the cap); an infinite, NaN or negative one is
ignored. ``backoffJitterMs`` (when above 0) adds 0 to that many milliseconds, as
conductor-oss's, but chosen from ``jitter_key`` (the attempt), not drawn: the Decider
decides again on every replay and must decide the same, and a key per attempt still
spreads the retries of tasks that failed together. The result is at most
:data:`MAX_RETRY_DELAY_SECONDS` whichever way it was reached.
"""

from __future__ import annotations

import hashlib
import math

__all__ = ["MAX_RETRY_DELAY_SECONDS", "retry_delay_seconds"]

#: The longest delay before a retry (30 days): exponential backoff with a large
#: retryCount, or a server's ``Retry-After``, cannot overflow a timer or park a run for years.
MAX_RETRY_DELAY_SECONDS = 30 * 86400


def retry_delay_seconds(
    logic: str,
    delay_seconds: float,
    backoff_scale_factor: float,
    retries_made: int,
    retry_after: float | None = None,
    *,
    max_delay_seconds: int = 0,
    jitter_ms: int = 0,
    jitter_key: str = "",
) -> float:
    """Seconds to wait before dispatching the next attempt."""
    n = max(retries_made, 0)
    if logic == "LINEAR_BACKOFF":
        delay = delay_seconds * backoff_scale_factor * (n + 1)
    elif logic == "EXPONENTIAL_BACKOFF":
        delay = delay_seconds * (2 ** min(n, 40))
    else:
        delay = delay_seconds
    if max_delay_seconds > 0:
        delay = min(delay, max_delay_seconds)
    if retry_after is not None and math.isfinite(retry_after) and retry_after > delay:
        delay = retry_after
    if jitter_ms > 0:
        delay += _jitter_of(jitter_key, jitter_ms) / 1000
    return min(max(float(delay), 0.0), float(MAX_RETRY_DELAY_SECONDS))


def _jitter_of(key: str, jitter_ms: int) -> int:
    """0 to ``jitter_ms`` milliseconds, the same for the same ``key``, spread evenly over
    keys (the first 8 bytes of its SHA-256)."""
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % (jitter_ms + 1)
