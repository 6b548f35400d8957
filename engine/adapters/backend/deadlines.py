"""A deadline on the unary calls a durable backend client makes without one.

durabletask's client sets no deadline on its calls (``schedule_new_orchestration``,
``raise_orchestration_event``, ``terminate_orchestration``, ``get_orchestration_state``
...): a backend that accepts the connection and then does not answer would hold the
caller (a start or a signal of the API, an engine activity) for as long as it lasts.
:class:`DefaultDeadline` gives every unary call that has none a deadline of
``BackendConfig.call_timeout_seconds``; the call then ends with ``DEADLINE_EXCEEDED``,
which the run signals report as the backend's outage (``RunSignalsUnavailable``: 503,
retryable, on the API). The waits (``WaitForInstanceStart``,
``WaitForInstanceCompletion``) keep the timeout their caller gives, or none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import grpc

__all__ = ["DefaultDeadline"]

#: the calls that wait by design, for as long as their caller says
_WAITS = ("/WaitForInstanceStart", "/WaitForInstanceCompletion")


class _CallDetails(
    NamedTuple(
        "_CallDetails",
        [
            ("method", str),
            ("timeout", float | None),
            ("metadata", Any),
            ("credentials", Any),
            ("wait_for_ready", Any),
            ("compression", Any),
        ],
    ),
    grpc.ClientCallDetails,  # type: ignore[misc]
):
    """``grpc.ClientCallDetails`` with its fields (grpc's own class is abstract)."""


class DefaultDeadline(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Sets ``timeout`` on a unary-unary call that has none (waits excepted)."""

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("a call's deadline must be positive")
        self.seconds = seconds

    def intercept_unary_unary(
        self,
        continuation: Callable[[Any, Any], Any],
        client_call_details: Any,
        request: Any,
    ) -> Any:
        details = client_call_details
        if details.timeout is None and not str(details.method).endswith(_WAITS):
            details = _CallDetails(
                details.method,
                self.seconds,
                details.metadata,
                details.credentials,
                getattr(details, "wait_for_ready", None),
                getattr(details, "compression", None),
            )
        return continuation(details, request)
