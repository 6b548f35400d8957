"""Retry schedule of a task (task definition ``retryLogic``), pure arithmetic.

``retries_made`` is the number of retries already made before the one being scheduled
(0 for the first retry, i.e. after the first attempt failed), as Conductor's
``retryCount``:

* ``FIXED``: ``retryDelaySeconds``
* ``LINEAR_BACKOFF``: ``retryDelaySeconds * backoffScaleFactor * (retries_made + 1)``
* ``EXPONENTIAL_BACKOFF``: ``retryDelaySeconds * 2 ** retries_made``

A ``retry_after`` (e.g. from an HTTP ``Retry-After``) wins when it is larger.
"""

from __future__ import annotations

__all__ = ["MAX_RETRY_DELAY_SECONDS", "retry_delay_seconds"]

#: Exponential backoff is capped so that a large retryCount cannot overflow timers.
MAX_RETRY_DELAY_SECONDS = 30 * 86400


def retry_delay_seconds(
    logic: str,
    delay_seconds: float,
    backoff_scale_factor: float,
    retries_made: int,
    retry_after: float | None = None,
) -> float:
    """Seconds to wait before dispatching the next attempt."""
    n = max(retries_made, 0)
    if logic == "LINEAR_BACKOFF":
        delay = delay_seconds * backoff_scale_factor * (n + 1)
    elif logic == "EXPONENTIAL_BACKOFF":
        delay = delay_seconds * (2 ** min(n, 40))
    else:
        delay = delay_seconds
    delay = min(float(delay), float(MAX_RETRY_DELAY_SECONDS))
    if retry_after is not None and retry_after > delay:
        delay = float(retry_after)
    return max(delay, 0.0)
