"""Errors the service layer raises; ``control_plane.api.error_handlers`` turns them into
Conductor error bodies. No FastAPI here, so services stay framework-free."""

from __future__ import annotations

from collections.abc import Sequence

from engine.ports.payload_store import PayloadStoreUnavailable
from engine.ports.queue import QueueUnavailable
from engine.ports.run_signals import RunSignalsUnavailable
from engine.ports.run_store import RunStoreUnavailable

#: the errors of a backing service that is unavailable right now: 503, retryable. Their
#: messages are safe to show a caller (each names the service and what went wrong, never
#: a statement, an address or a key)
OUTAGES: tuple[type[Exception], ...] = (
    RunStoreUnavailable,
    QueueUnavailable,
    PayloadStoreUnavailable,
    RunSignalsUnavailable,
)


class ApiError(Exception):
    """An error the API reports to the caller with a Conductor error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        validation_errors: Sequence[tuple[str, str]] = (),
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.validation_errors = list(validation_errors)
        self.retryable = retryable


def bad_request(message: str, path: str | None = None) -> ApiError:
    return ApiError(400, message, validation_errors=[(path, message)] if path else [])


def not_found(message: str) -> ApiError:
    return ApiError(404, message)


def conflict(message: str) -> ApiError:
    return ApiError(409, message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, message)


def failure_of(what: str, exc: Exception) -> ApiError:
    """The error of a call in which ``what`` failed with ``exc`` (the caller logs
    ``exc``). An outage (:data:`OUTAGES`) is 503, retryable, with the outage's message;
    anything else is the server's error, as Conductor answers an exception that is not
    transient: 500, not retryable, naming ``what`` and the exception's class but not its
    text (a driver's or the backend's, which may hold internal details)."""
    if isinstance(exc, OUTAGES):
        return ApiError(503, f"{what}: {exc}", retryable=True)
    return ApiError(500, f"{what} (internal error: {type(exc).__name__})")
