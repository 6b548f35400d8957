"""Payload store port: large inputs and outputs kept out of records and histories.

A payload is stored under a *reference*, a relative path such as
``payloads/<workflowId>/<name>.json``. ``put`` takes the reference to write
(the caller chooses it, normally with ``payload_key``) and returns it. Workers
may read or write a payload directly with a signed URL.

Size rules (docs/architecture.md, "Payloads"): a JSON value above the threshold of its kind (default
10 KB each) is offloaded; above the hard maximum (default 10 MB) it is refused
with ``PayloadTooLarge``. Sizes are the UTF-8 byte length of the compact JSON.

Errors
------
* ``PayloadNotFound``: nothing is stored under the reference.
* :class:`PayloadStoreUnavailable`: the store could not be reached or is overloaded
  right now (a connection refused, reset or timed out; the service throttling or
  answering 5xx; a disk that failed or filled). Nothing was written or read; the same
  call may succeed when tried again. Not a ``PayloadError``: code that handles an answer
  of the store (a missing payload) and goes on must not take an outage for one. It
  propagates: the API answers 503 with ``Retry-After``, an engine activity meeting it is
  run again after a durable delay.
* :class:`PayloadStoreRefused`: the store answered and refused the call for a reason
  that trying again will not change (no permission, no such container, a bad request):
  a misconfiguration or a defect, named with the store and its error code.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

SignedOperation = Literal["read", "write"]

KB = 1024
MB = 1024 * 1024


class PayloadKind(StrEnum):
    WORKFLOW_INPUT = "workflow input"
    WORKFLOW_OUTPUT = "workflow output"
    TASK_INPUT = "task input"
    TASK_OUTPUT = "task output"


class PayloadLimits(BaseModel):
    """Offload thresholds per kind and the hard maximum, in bytes."""

    workflow_input_threshold: int = Field(default=10 * KB, ge=0)
    workflow_output_threshold: int = Field(default=10 * KB, ge=0)
    task_input_threshold: int = Field(default=10 * KB, ge=0)
    task_output_threshold: int = Field(default=10 * KB, ge=0)
    max_size: int = Field(default=10 * MB, ge=0)

    def threshold(self, kind: PayloadKind) -> int:
        return {
            PayloadKind.WORKFLOW_INPUT: self.workflow_input_threshold,
            PayloadKind.WORKFLOW_OUTPUT: self.workflow_output_threshold,
            PayloadKind.TASK_INPUT: self.task_input_threshold,
            PayloadKind.TASK_OUTPUT: self.task_output_threshold,
        }[kind]


class PayloadError(Exception):
    pass


class PayloadTooLarge(PayloadError):
    def __init__(self, name: str, size: int, maximum: int) -> None:
        self.name = name
        self.size = size
        self.maximum = maximum
        super().__init__(
            f"{name} is {size} bytes, above the maximum payload size of {maximum} bytes"
        )


class PayloadNotFound(PayloadError, KeyError):
    def __init__(self, reference: str) -> None:
        self.reference = reference
        super().__init__(f"payload not found: {reference}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class InvalidReference(PayloadError, ValueError):
    pass


class PayloadStoreUnavailable(Exception):
    """The payload store cannot be used right now: unreachable, a connection that failed
    or timed out, the service throttling (429) or failing (5xx), a disk that failed or
    filled. Nothing was written or read by the call that raised it; the same call may
    succeed when tried again.

    ``reason`` names the store (an account and container, a directory) and what went
    wrong in words safe to show a caller (no URL, no key, no SAS); ``detail`` names the
    underlying error (its class, status and code) for the server's log. Raised chained
    to that error."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"payload store unavailable: {reason}")
        self.reason = reason
        self.detail = detail


class PayloadStoreRefused(Exception):
    """The payload store answered and refused the call for a reason that trying again
    will not change (no permission, a container that does not exist, a request it
    rejects): a misconfiguration or a defect. Its message names the store, the
    operation and the store's error (status and code), never a key or a SAS."""


_SEGMENT = re.compile(r"^[A-Za-z0-9._=+@-]+$")


def validate_reference(reference: str) -> str:
    """A reference is a relative '/'-separated path of safe segments (no '..')."""
    parts = reference.split("/")
    if not reference or len(reference) > 1024:
        raise InvalidReference(f"invalid payload reference: {reference!r}")
    for part in parts:
        if part in ("", ".", "..") or not _SEGMENT.match(part):
            raise InvalidReference(f"invalid payload reference: {reference!r}")
    return reference


def payload_key(workflow_id: str, name: str, *, prefix: str = "payloads") -> str:
    """``payloads/<workflowId>/<name>.json``; ``name`` may contain '/' (e.g. ``task/out``)."""
    suffix = "" if name.endswith(".json") else ".json"
    return validate_reference(f"{prefix}/{workflow_id}/{name}{suffix}")


@runtime_checkable
class PayloadStore(Protocol):
    """Adapters: ``engine.adapters.payload_local.LocalPayloadStore`` and
    ``engine.adapters.payload_blob.BlobPayloadStore``."""

    @property
    def limits(self) -> PayloadLimits: ...

    def put(self, key: str, data: bytes, content_type: str = "application/json") -> str:
        """Store ``data`` under ``key`` (overwriting) and return its reference (== key)."""
        ...

    def get(self, reference: str) -> bytes:
        """The stored bytes; raises ``PayloadNotFound`` when there are none."""
        ...

    def exists(self, reference: str) -> bool: ...

    def delete(self, reference: str) -> bool:
        """Remove the payload; False when there was none."""
        ...

    def signed_url(
        self,
        reference: str,
        operation: SignedOperation,
        expires_in: timedelta | int,
    ) -> str:
        """A URL that lets its bearer GET (``read``) or PUT (``write``) this one
        payload until it expires. ``expires_in`` is a timedelta or seconds."""
        ...


def json_text(value: Any) -> str:
    """The compact JSON text of ``value`` whose UTF-8 bytes a payload's size counts."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_json(value: Any) -> bytes:
    return json_text(value).encode("utf-8")


def offload_if_large(
    store: PayloadStore,
    kind: PayloadKind,
    key: str,
    value: Any,
    *,
    limits: PayloadLimits | None = None,
) -> tuple[Any, str | None]:
    """Keep ``value`` inline or offload it to ``store`` under ``key``.

    Returns ``(value, None)`` when its JSON is at most the threshold of ``kind``,
    ``(None, reference)`` when it was stored. Raises ``PayloadTooLarge`` (naming
    ``kind`` and ``key``) above the maximum. ``limits`` defaults to ``store.limits``.
    """
    return offload_encoded(store, kind, key, value, encode_json(value), limits=limits)


def offload_encoded(
    store: PayloadStore,
    kind: PayloadKind,
    key: str,
    value: Any,
    data: bytes,
    *,
    limits: PayloadLimits | None = None,
) -> tuple[Any, str | None]:
    """:func:`offload_if_large` for a ``value`` its caller encoded already (``data``:
    :func:`encode_json` of it), so that it is not encoded twice."""
    lim = limits if limits is not None else store.limits
    size = len(data)
    if size > lim.max_size:
        raise PayloadTooLarge(f"{kind.value} {key}", size, lim.max_size)
    if size <= lim.threshold(kind):
        return value, None
    return None, store.put(key, data, "application/json")


def check_size(name: str, size: int, limits: PayloadLimits) -> None:
    """Raise ``PayloadTooLarge`` if ``size`` is above the maximum (for payloads that
    workers uploaded directly)."""
    if size > limits.max_size:
        raise PayloadTooLarge(name, size, limits.max_size)


def resolve(store: PayloadStore, value: Any, reference: str | None = None) -> Any:
    """The JSON value of an (inline value, reference) pair as returned by
    ``offload_if_large``: reads and decodes the payload when ``reference`` is set,
    else returns ``value``."""
    if reference is None:
        return value
    return json.loads(store.get(reference))
