"""Retry schedule of a task (task definition ``retryLogic``), pure arithmetic.

``retries_made`` is the number of retries already made before the one being scheduled
(0 for the first retry, i.e. after the first attempt failed), as Conductor's
``retryCount``:

* ``FIXED``: ``retryDelaySeconds``
* ``LINEAR_BACKOFF``: ``retryDelaySeconds * backoffScaleFactor * (retries_made + 1)``
* ``EXPONENTIAL_BACKOFF``: ``retryDelaySeconds * 2 ** retries_made``

A ``retry_after`` (e.g. from an HTTP ``Retry-After``) wins when it is larger; an infinite,
NaN or negative one is ignored. The result is at most :data:`MAX_RETRY_DELAY_SECONDS`
whichever way it was reached.
"""

from __future__ import annotations

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
) -> float:
    """Seconds to wait before dispatching the next attempt."""
    n = max(retries_made, 0)
    if logic == "LINEAR_BACKOFF":
        delay = delay_seconds * backoff_scale_factor * (n + 1)
    elif logic == "EXPONENTIAL_BACKOFF":
        delay = delay_seconds * (2 ** min(n, 40))
    else:
        delay = delay_seconds
    if retry_after is not None and math.isfinite(retry_after) and retry_after > delay:
        delay = retry_after
    return min(max(float(delay), 0.0), float(MAX_RETRY_DELAY_SECONDS))
