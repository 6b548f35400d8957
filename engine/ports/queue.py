"""The task-queue port: Service Bus queue semantics behind a small sync interface.

Each WORKER task type has queues ``<type>``, ``<type>-high`` and ``<domain>-<type>``
(:mod:`protocol.queues`). The dispatch activity sends the task message
(:mod:`protocol.messages`) with message id ``<taskId>:<attempt>``; the Task API
receives with a peek-lock, defers the message at once (so no lock has to outlive
the call), and later fetches it by sequence number - from any replica - to
complete or dead-letter it.

Semantics every adapter implements (the contract suite in
``tests/contract/test_queue_contract.py`` checks them):

* ``send`` to a queue that was never provisioned raises :class:`QueueNotFound`.
* Duplicate detection: a second send with the same ``message_id`` within the
  queue's duplicate-detection window is dropped silently (no error).
* ``scheduled_enqueue_time`` keeps a message invisible until that time.
* ``receive`` is a peek-lock receive: a returned message is invisible to every
  other receiver until it is settled or its lock expires (``lock_seconds`` of the
  queue's settings). ``delivery_count`` is the number of earlier deliveries that
  ended without settlement (0 on the first receive, as the Python Service Bus SDK
  reports it). A lock expiry or an abandon increments it; when it reaches the
  queue's ``max_delivery_count`` the message is dead-lettered with reason
  ``MaxDeliveryCountExceeded``.
* ``defer`` moves a locked message to the deferred state: it stays in the queue,
  invisible to ``receive``, until fetched by sequence number with
  ``receive_deferred`` by any caller (another adapter instance, another process).
  A fetched deferred message is locked; settle it like any locked message. If
  that lock expires it goes back to the deferred state.
* ``receive_first`` receives from several queues in priority order (one read and
  one transaction on SQLite, whatever the number of queues).
* ``settle_deferred`` completes or dead-letters a deferred message by sequence
  number in one step (one transaction where the backend allows it).
* Settling (``complete``, ``abandon``, ``dead_letter``, ``defer``, ``requeue``)
  needs a live lock: settling after the lock expired, or twice, raises
  :class:`MessageLockLost`.
* A backend that cannot be used right now (locked past its busy timeout, unreachable,
  busy) raises :class:`QueueUnavailable`, which is not a :class:`QueueError`.
* The dead-letter queue of ``q`` is the queue ``q/$deadletterqueue``
  (:func:`dead_letter_queue_name`); it can be peeked and received from (with a
  lock, then completed) like any queue, but not sent to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

DEAD_LETTER_SUFFIX = "/$deadletterqueue"

#: Service Bus limits that the settings are validated against.
MAX_LOCK_SECONDS = 300.0
MAX_DELIVERY_COUNT_LIMIT = 2000
MIN_DUPLICATE_WINDOW_SECONDS = 20
MAX_DUPLICATE_WINDOW_SECONDS = 7 * 24 * 3600

#: Dead-letter reasons set by the queue itself (the names Service Bus uses).
REASON_MAX_DELIVERY = "MaxDeliveryCountExceeded"
REASON_TTL_EXPIRED = "TTLExpiredException"


class QueueError(Exception):
    """Base class of the errors of the task-queue port."""


class QueueNotFound(QueueError):
    """The queue does not exist (it was never provisioned)."""

    def __init__(self, queue: str) -> None:
        super().__init__(f"queue not found: {queue!r}")
        self.queue = queue


class MessageLockLost(QueueError):
    """The message's lock expired, was never held by this caller, or the message
    was already settled."""


class MessageNotFound(QueueError):
    """``receive_deferred``: a sequence number does not name a deferred message of
    the queue, or that deferred message is currently locked by another caller.
    Nothing is locked when this is raised."""

    def __init__(self, queue: str, sequence_numbers: Sequence[int]) -> None:
        super().__init__(
            f"no deferred message with sequence number(s) {list(sequence_numbers)} "
            f"available in {queue!r} (not deferred, settled, or locked by another caller)"
        )
        self.queue = queue
        self.sequence_numbers = tuple(sequence_numbers)


class QueueUnavailable(Exception):
    """The queue backend cannot be used right now (its database locked past the busy
    timeout, the namespace unreachable or busy); the same call may succeed when tried
    again. ``reason`` is safe to show a caller; ``detail`` names the backend's error
    for the server's log.

    Not a :class:`QueueError`: code that handles an answer of a queue (no such queue, a
    lost lock) and goes on must not take an outage for one. It propagates as any
    failure of the backend does: an activity meeting it is retried, the API answers 503.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"task queue unavailable: {reason}")
        self.reason = reason
        self.detail = detail


def dead_letter_queue_name(queue: str) -> str:
    """The dead-letter sub-queue of ``queue`` (``<queue>/$deadletterqueue``)."""
    return queue + DEAD_LETTER_SUFFIX


def is_dead_letter_queue(queue: str) -> bool:
    return queue.endswith(DEAD_LETTER_SUFFIX)


def base_queue_name(queue: str) -> str:
    """``q`` for ``q`` and for ``q/$deadletterqueue``."""
    return queue[: -len(DEAD_LETTER_SUFFIX)] if is_dead_letter_queue(queue) else queue


def receive_in_order(
    queue: TaskQueue,
    queues: Sequence[str],
    max_messages: int,
    max_wait_seconds: float,
    lock_seconds: float | None,
) -> list[QueueMessage]:
    """``receive_first`` made of ``receive`` calls: each queue in turn without waiting,
    then (nothing received) the last one waits."""
    out: list[QueueMessage] = []
    for i, name in enumerate(queues):
        last = i == len(queues) - 1
        wait = max_wait_seconds if last and not out else 0.0
        out += queue.receive(name, max_messages - len(out), wait, lock_seconds)
        if len(out) >= max_messages:
            break
    return out


def encode_body(body: bytes | Mapping[str, Any]) -> bytes:
    """Bytes as they are; a mapping as compact UTF-8 JSON."""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")


@dataclass(frozen=True)
class QueueSettings:
    """Settings of one queue. Durations in seconds.

    ``default_message_ttl_seconds=None`` means messages never expire (the Service
    Bus default, ``TimeSpan.MaxValue``)."""

    lock_duration_seconds: float = 60.0
    max_delivery_count: int = 10
    duplicate_detection_window_seconds: int = 600
    requires_duplicate_detection: bool = True
    dead_lettering_on_message_expiration: bool = True
    default_message_ttl_seconds: int | None = None
    requires_session: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.lock_duration_seconds <= MAX_LOCK_SECONDS:
            raise ValueError(
                f"lock_duration_seconds must be in (0, {MAX_LOCK_SECONDS:g}], "
                f"got {self.lock_duration_seconds}"
            )
        if not 1 <= self.max_delivery_count <= MAX_DELIVERY_COUNT_LIMIT:
            raise ValueError(
                f"max_delivery_count must be in [1, {MAX_DELIVERY_COUNT_LIMIT}], "
                f"got {self.max_delivery_count}"
            )
        if not 0 < self.duplicate_detection_window_seconds <= MAX_DUPLICATE_WINDOW_SECONDS:
            raise ValueError(
                "duplicate_detection_window_seconds must be in "
                f"(0, {MAX_DUPLICATE_WINDOW_SECONDS}], "
                f"got {self.duplicate_detection_window_seconds}"
            )
        if self.default_message_ttl_seconds is not None and self.default_message_ttl_seconds <= 0:
            raise ValueError("default_message_ttl_seconds must be positive or None")


@dataclass(frozen=True)
class QueueMessage:
    """A message as received (locked) or peeked (``lock_token is None``).

    Times are timezone-aware UTC."""

    queue: str
    message_id: str
    body: bytes
    sequence_number: int
    enqueued_time: datetime
    delivery_count: int
    lock_token: str | None = None
    locked_until: datetime | None = None
    scheduled_enqueue_time: datetime | None = None
    dead_letter_reason: str | None = None
    dead_letter_description: str | None = None
    content_type: str | None = None

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)


@dataclass(frozen=True)
class QueueDepth:
    """Message counts of one queue.

    ``active`` counts messages that can be received now or are locked by a
    receiver; ``scheduled`` those waiting for their enqueue time; ``deferred``
    those deferred (including a deferred message currently fetched);
    ``dead_lettered`` the messages in the dead-letter queue. On Service Bus the
    deferred count is not exposed; see the Service Bus adapter."""

    active: int
    scheduled: int
    deferred: int
    dead_lettered: int

    @property
    def total(self) -> int:
        return self.active + self.scheduled + self.deferred + self.dead_lettered


MessageRef = QueueMessage | str
"""A locked message, or just its lock token."""


def lock_token_of(message: MessageRef) -> str:
    if isinstance(message, str):
        return message
    if message.lock_token is None:
        raise MessageLockLost(
            f"message {message.message_id!r} was peeked, not received with a lock"
        )
    return message.lock_token


@runtime_checkable
class TaskQueue(Protocol):
    """Service Bus queue operations the engine and the Task API use.

    Sync API, safe to call from many threads of one process."""

    def send(
        self,
        queue: str,
        body: bytes | Mapping[str, Any],
        message_id: str,
        scheduled_enqueue_time: datetime | None = None,
    ) -> None:
        """Send one message. A duplicate ``message_id`` within the window is dropped
        silently. Raises :class:`QueueNotFound`."""
        ...

    def receive(
        self,
        queue: str,
        max_messages: int = 1,
        max_wait_seconds: float = 0.0,
        lock_seconds: float | None = None,
    ) -> list[QueueMessage]:
        """Peek-lock receive of up to ``max_messages``. Waits up to
        ``max_wait_seconds`` for the first message, then returns what is available.
        ``lock_seconds`` overrides the queue's lock duration where the backend
        allows it (SQLite); Service Bus always uses the queue's lock duration."""
        ...

    def receive_first(
        self,
        queues: Sequence[str],
        max_messages: int = 1,
        max_wait_seconds: float = 0.0,
        lock_seconds: float | None = None,
    ) -> list[QueueMessage]:
        """Peek-lock receive of up to ``max_messages`` from ``queues`` in their order
        (the first queue's messages before the second's: priorities), waiting up to
        ``max_wait_seconds`` for the first message on any of them. Each message names
        its queue. Raises :class:`QueueNotFound` (for the first one, in order) when a
        queue does not exist."""
        ...

    def defer(self, queue: str, message: MessageRef) -> None:
        """Defer a locked message; fetch it later with :meth:`receive_deferred`."""
        ...

    def batch(self) -> AbstractContextManager[None]:
        """A block in which the calls of this thread are one transaction where the
        adapter keeps its messages in a database (SQLite): committed at the block's
        end, rolled back when the block raises; a call that raises inside it undoes its
        own writes only (as it would alone), and the others' stand. From its first
        write until the block ends, other threads and processes wait to write (and see
        none of its writes); receivers woken by its sends are woken after it commits.
        A batch inside a batch is part of it. Where every call is an operation of its
        own (Service Bus) the block changes nothing."""
        ...

    def receive_deferred(self, queue: str, sequence_numbers: Sequence[int]) -> list[QueueMessage]:
        """Fetch and lock deferred messages by sequence number (any caller).
        Raises :class:`MessageNotFound` (and locks nothing) if one is not available."""
        ...

    def settle_deferred(
        self,
        queue: str,
        sequence_number: int,
        dead_letter_reason: str | None = None,
        description: str = "",
    ) -> bool:
        """Fetch the deferred message ``sequence_number`` and complete it (or, with a
        reason, dead-letter it), as :meth:`receive_deferred` then :meth:`complete` or
        :meth:`dead_letter` would. False, settling nothing, when it is not available
        (not deferred, settled, or locked by another caller)."""
        ...

    def complete(self, queue: str, message: MessageRef) -> None:
        """Remove a locked message."""
        ...

    def abandon(self, queue: str, message: MessageRef) -> None:
        """Release the lock now; the delivery count goes up by one."""
        ...

    def dead_letter(
        self,
        queue: str,
        message: MessageRef,
        reason: str,
        description: str = "",
    ) -> None:
        """Move a locked message to ``<queue>/$deadletterqueue`` with a reason."""
        ...

    def requeue(
        self,
        queue: str,
        message: QueueMessage,
        delay_seconds: float,
    ) -> str:
        """Put a locked message back, invisible for ``delay_seconds`` (a limit hit,
        an IN_PROGRESS callback): a copy is sent scheduled at now + delay with the
        message id :func:`requeue_message_id` (so duplicate detection does
        not drop it, and a retried requeue of the same delivery is dropped), then
        the original is completed. Returns the copy's message id."""
        ...

    def peek(
        self, queue: str, max_messages: int = 10, from_sequence_number: int = 0
    ) -> list[QueueMessage]:
        """Read messages without locking them (active, scheduled and deferred),
        in sequence-number order. Works on dead-letter queues."""
        ...

    def depth(self, queue: str) -> QueueDepth: ...

    def close(self) -> None: ...


def requeue_message_id(message: QueueMessage) -> str:
    """Message id of the copy :meth:`TaskQueue.requeue` sends:
    ``<original id>#r<sequence number>``, where an earlier ``#r...`` suffix is
    replaced rather than extended, so ids stay short across many requeues."""
    base = message.message_id.split("#r", 1)[0]
    return f"{base}#r{message.sequence_number}"
