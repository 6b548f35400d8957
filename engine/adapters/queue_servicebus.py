"""Azure Service Bus task queue (``azure-servicebus``), identity auth only.

Operation mapping:

==================  ===========================================================
port                Service Bus
==================  ===========================================================
send                ``ServiceBusSender.send_messages`` with ``message_id`` and
                    ``scheduled_enqueue_time_utc`` (duplicate detection is the
                    queue's ``requiresDuplicateDetection``)
receive             ``ServiceBusReceiver.receive_messages`` in ``PEEK_LOCK`` mode,
                    ``prefetch_count=0`` (prefetched messages would sit locked);
                    a receive that is not to wait waits ``QUICK_LOOK_SECONDS``
defer               ``defer_message`` on the receiver that received it
receive_deferred    ``receive_deferred_messages(sequence_numbers)`` on any
                    receiver of the queue (management link)
complete/abandon/   ``complete_message`` / ``abandon_message`` /
dead_letter         ``dead_letter_message(reason, error_description)``
requeue             send a copy scheduled at now + delay, then complete
peek                ``peek_messages(sequence_number=...)``
depth               ``ServiceBusAdministrationClient.get_queue_runtime_properties``
==================  ===========================================================

Settlement and links: a message received from a queue can only be settled on
the receiver link that received it; a deferred message fetched again by sequence
number is settled through the management link of the receiver that fetched it.
So this adapter keeps the received ``ServiceBusReceivedMessage`` objects of the
locks it holds (keyed by lock token) together with their receiver, and settles
through that receiver. A lock token held by ANOTHER adapter instance (another
Task API replica) cannot be settled here: :class:`MessageLockLost`. That is why
the Task API defers a message right after receiving it (same call, same
receiver), and settles later only through ``receive_deferred`` on whichever
replica gets the result.

Receivers are pooled per queue; ``ServiceBusReceiver`` is not thread-safe, so
each is used by one thread at a time. Settling a message waits for its receiver
if another thread is long-polling on it.

Depth: the runtime properties expose active, scheduled, dead-letter and transfer
counts and the total, but no deferred count; Service Bus counts deferred
messages as active. ``deferred`` is computed as ``total - active - scheduled -
dead_letter - transfer - transfer_dead_letter`` (normally 0), and ``active``
includes deferred messages. Locked messages are active too, as in SQLite.

``receive(lock_seconds=...)`` is ignored: Service Bus locks for the queue's
``lockDuration``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.credentials import TokenCredential
from azure.core.exceptions import (
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    MessageNotFoundError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusServerBusyError,
)
from azure.servicebus.management import ServiceBusAdministrationClient

from engine.ports.queue import (
    MessageLockLost,
    MessageNotFound,
    MessageRef,
    QueueDepth,
    QueueError,
    QueueMessage,
    QueueNotFound,
    QueueUnavailable,
    base_queue_name,
    encode_body,
    is_dead_letter_queue,
    lock_token_of,
    receive_in_order,
    requeue_message_id,
)

_MAX_RECEIVERS_PER_QUEUE = 8

#: how long a receive that is not to wait waits on Service Bus. The SDK takes no 0
#: (``receive_messages`` raises ``ValueError`` for ``max_wait_time <= 0``), and on an empty
#: queue it answers only once this much time has passed, so every look at an empty queue
#: costs this: above all ``<type>-high``, which a poll reads before ``<type>`` (empty in
#: the common case). A message already in the queue comes at once, in one round trip
#: (a message that comes later waits in the receiver for its next receive).
QUICK_LOOK_SECONDS = 0.05


#: errors of the SDK that mean Service Bus cannot be used right now (the SDK retried
#: them already): the port's ``QueueUnavailable``
_OUTAGES = (
    ServiceBusConnectionError,
    ServiceBusCommunicationError,
    ServiceBusServerBusyError,
    OperationTimeoutError,
    ServiceRequestError,  # the administration client's request could not be sent
    ServiceResponseError,  # ... or its answer not read
)


def _outage_reason(exc: BaseException) -> str:
    """What is wrong, in words safe to show a caller (the SDK's message names the
    namespace and the connection's details)."""
    if isinstance(exc, ServiceBusServerBusyError):
        return "Service Bus is busy"
    if isinstance(exc, OperationTimeoutError):
        return "a Service Bus operation timed out"
    return "cannot connect to Service Bus"


@dataclass
class _Receiver:
    receiver: ServiceBusReceiver
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Held:
    queue: str
    entry: _Receiver
    message: ServiceBusReceivedMessage


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _body_bytes(message: ServiceBusReceivedMessage) -> bytes:
    body: Any = message.body
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    try:
        return b"".join(bytes(part) for part in body)
    except TypeError:
        return str(message).encode("utf-8")


class ServiceBusTaskQueue:
    """:class:`engine.ports.queue.TaskQueue` on an Azure Service Bus namespace."""

    def __init__(
        self,
        fully_qualified_namespace: str,
        credential: TokenCredential,
        *,
        client: ServiceBusClient | None = None,
        admin_client: ServiceBusAdministrationClient | None = None,
    ) -> None:
        self._client = client or ServiceBusClient(fully_qualified_namespace, credential)
        self._admin = admin_client or ServiceBusAdministrationClient(
            fully_qualified_namespace, credential
        )
        self._lock = threading.Lock()
        self._senders: dict[str, tuple[ServiceBusSender, threading.Lock]] = {}
        self._receivers: dict[str, list[_Receiver]] = {}
        self._held: dict[str, _Held] = {}

    # -- plumbing ------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, queue: str) -> Iterator[None]:
        try:
            yield
        except MessagingEntityNotFoundError as exc:
            raise QueueNotFound(queue) from exc
        except ResourceNotFoundError as exc:
            raise QueueNotFound(queue) from exc
        except (MessageLockLostError, MessageAlreadySettled) as exc:
            raise MessageLockLost(str(exc)) from exc
        except _OUTAGES as exc:
            cls = type(exc)
            raise QueueUnavailable(
                _outage_reason(exc), f"{cls.__module__}.{cls.__qualname__}"
            ) from exc
        except ServiceBusError as exc:
            if "not found" in str(exc).lower() and "entity" in str(exc).lower():
                raise QueueNotFound(queue) from exc
            raise

    def _sender(self, queue: str) -> tuple[ServiceBusSender, threading.Lock]:
        with self._lock:
            pair = self._senders.get(queue)
            if pair is None:
                pair = (self._client.get_queue_sender(queue), threading.Lock())
                self._senders[queue] = pair
            return pair

    @contextlib.contextmanager
    def _checkout(self, queue: str) -> Iterator[_Receiver]:
        """An idle receiver of ``queue`` (or of its dead-letter sub-queue), held
        exclusively for the duration."""
        chosen: _Receiver | None = None
        with self._lock:
            pool = self._receivers.setdefault(queue, [])
            for entry in pool:
                if entry.lock.acquire(blocking=False):
                    chosen = entry
                    break
            if chosen is None and len(pool) < _MAX_RECEIVERS_PER_QUEUE:
                sub_queue = ServiceBusSubQueue.DEAD_LETTER if is_dead_letter_queue(queue) else None
                receiver = self._client.get_queue_receiver(
                    base_queue_name(queue),
                    sub_queue=sub_queue,
                    receive_mode=ServiceBusReceiveMode.PEEK_LOCK,
                    prefetch_count=0,
                )
                chosen = _Receiver(receiver)
                chosen.lock.acquire()
                pool.append(chosen)
            waiting_on = pool[0] if chosen is None else None
        if chosen is None:
            assert waiting_on is not None
            waiting_on.lock.acquire()
            chosen = waiting_on
        try:
            yield chosen
        finally:
            chosen.lock.release()

    def _hold(
        self, queue: str, entry: _Receiver, messages: list[ServiceBusReceivedMessage]
    ) -> None:
        now = datetime.now(UTC)
        with self._lock:
            for token in [
                t
                for t, h in self._held.items()
                if (_utc(h.message.locked_until_utc) or now) < now - timedelta(seconds=5)
            ]:
                del self._held[token]
            for m in messages:
                if m.lock_token is not None:
                    self._held[str(m.lock_token)] = _Held(queue, entry, m)

    def _take(self, queue: str, message: MessageRef) -> _Held:
        token = lock_token_of(message)
        with self._lock:
            held = self._held.get(token)
        if held is None or held.queue != queue:
            raise MessageLockLost(
                f"lock {token!r} on {queue!r} is not held by this adapter instance "
                "(expired, settled, or received by another replica)"
            )
        return held

    def _release(self, message: MessageRef) -> None:
        with self._lock:
            self._held.pop(lock_token_of(message), None)

    @staticmethod
    def _convert(queue: str, m: ServiceBusReceivedMessage) -> QueueMessage:
        return QueueMessage(
            queue=queue,
            message_id=str(m.message_id),
            body=_body_bytes(m),
            sequence_number=int(m.sequence_number or 0),
            enqueued_time=_utc(m.enqueued_time_utc) or datetime.now(UTC),
            delivery_count=int(m.delivery_count or 0),
            lock_token=None if m.lock_token is None else str(m.lock_token),
            locked_until=_utc(m.locked_until_utc),
            scheduled_enqueue_time=_utc(m.scheduled_enqueue_time_utc),
            dead_letter_reason=m.dead_letter_reason,
            dead_letter_description=m.dead_letter_error_description,
            content_type=m.content_type,
        )

    # -- port ----------------------------------------------------------------

    def send(
        self,
        queue: str,
        body: bytes | Mapping[str, Any],
        message_id: str,
        scheduled_enqueue_time: datetime | None = None,
    ) -> None:
        if is_dead_letter_queue(queue):
            raise QueueError(f"cannot send to a dead-letter queue: {queue!r}")
        is_bytes = isinstance(body, bytes | bytearray | memoryview)
        message = ServiceBusMessage(
            encode_body(body),
            message_id=message_id,
            content_type=None if is_bytes else "application/json",
            scheduled_enqueue_time_utc=scheduled_enqueue_time,
        )
        sender, lock = self._sender(queue)
        with self._errors(queue), lock:
            sender.send_messages(message)

    def receive(
        self,
        queue: str,
        max_messages: int = 1,
        max_wait_seconds: float = 0.0,
        lock_seconds: float | None = None,
    ) -> list[QueueMessage]:
        with self._errors(queue), self._checkout(queue) as entry:
            # the SDK bounds the opening of a receiver's link (a token, the connection,
            # the attach) by the wait of the receive that needs it, which a quick look
            # cannot give: the link is opened first, with the SDK's own retries and
            # timeouts (at once when it is open), also after it dropped
            entry.receiver.__enter__()
            received = entry.receiver.receive_messages(
                max_message_count=max_messages,
                max_wait_time=max(max_wait_seconds, QUICK_LOOK_SECONDS),
            )
            self._hold(queue, entry, received)
        return [self._convert(queue, m) for m in received]

    def receive_first(
        self,
        queues: Sequence[str],
        max_messages: int = 1,
        max_wait_seconds: float = 0.0,
        lock_seconds: float | None = None,
    ) -> list[QueueMessage]:
        return receive_in_order(self, queues, max_messages, max_wait_seconds, lock_seconds)

    def defer(self, queue: str, message: MessageRef) -> None:
        held = self._take(queue, message)
        with self._errors(queue), held.entry.lock:
            held.entry.receiver.defer_message(held.message)
        self._release(message)

    def receive_deferred(self, queue: str, sequence_numbers: Sequence[int]) -> list[QueueMessage]:
        with self._errors(queue), self._checkout(queue) as entry:
            try:
                received = entry.receiver.receive_deferred_messages(list(sequence_numbers))
            except MessageNotFoundError as exc:
                raise MessageNotFound(queue, sequence_numbers) from exc
            self._hold(queue, entry, received)
        found = {m.sequence_number for m in received}
        missing = [s for s in sequence_numbers if s not in found]
        if missing:
            raise MessageNotFound(queue, missing)
        return [self._convert(queue, m) for m in received]

    def settle_deferred(
        self,
        queue: str,
        sequence_number: int,
        dead_letter_reason: str | None = None,
        description: str = "",
    ) -> bool:
        # Service Bus settles a message only through a lock: fetch it, then settle
        try:
            [message] = self.receive_deferred(queue, [sequence_number])
        except MessageNotFound:
            return False
        if dead_letter_reason is None:
            self.complete(queue, message)
        else:
            self.dead_letter(queue, message, dead_letter_reason, description)
        return True

    def complete(self, queue: str, message: MessageRef) -> None:
        held = self._take(queue, message)
        with self._errors(queue), held.entry.lock:
            held.entry.receiver.complete_message(held.message)
        self._release(message)

    def abandon(self, queue: str, message: MessageRef) -> None:
        held = self._take(queue, message)
        with self._errors(queue), held.entry.lock:
            held.entry.receiver.abandon_message(held.message)
        self._release(message)

    def dead_letter(
        self,
        queue: str,
        message: MessageRef,
        reason: str,
        description: str = "",
    ) -> None:
        held = self._take(queue, message)
        with self._errors(queue), held.entry.lock:
            held.entry.receiver.dead_letter_message(
                held.message, reason=reason, error_description=description
            )
        self._release(message)

    def requeue(self, queue: str, message: QueueMessage, delay_seconds: float) -> str:
        held = self._take(queue, message)
        new_id = requeue_message_id(message)
        copy = ServiceBusMessage(
            _body_bytes(held.message),
            message_id=new_id,
            content_type=held.message.content_type,
            scheduled_enqueue_time_utc=datetime.now(UTC) + timedelta(seconds=delay_seconds),
        )
        sender, lock = self._sender(queue)
        with self._errors(queue), lock:
            sender.send_messages(copy)
        self.complete(queue, message)
        return new_id

    def peek(
        self, queue: str, max_messages: int = 10, from_sequence_number: int = 0
    ) -> list[QueueMessage]:
        with self._errors(queue), self._checkout(queue) as entry:
            peeked = entry.receiver.peek_messages(
                max_message_count=max_messages, sequence_number=from_sequence_number
            )
        return [self._convert(queue, m) for m in peeked]

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Every call is an operation of its own on Service Bus: nothing to group."""
        return contextlib.nullcontext()

    def depth(self, queue: str) -> QueueDepth:
        with self._errors(queue):
            props = self._admin.get_queue_runtime_properties(base_queue_name(queue))
        active = props.active_message_count or 0
        scheduled = props.scheduled_message_count or 0
        dead = props.dead_letter_message_count or 0
        transfer = (props.transfer_message_count or 0) + (
            props.transfer_dead_letter_message_count or 0
        )
        total = props.total_message_count or 0
        deferred = max(0, total - active - scheduled - dead - transfer)
        if is_dead_letter_queue(queue):
            return QueueDepth(active=dead, scheduled=0, deferred=0, dead_lettered=0)
        return QueueDepth(active=active, scheduled=scheduled, deferred=deferred, dead_lettered=dead)

    def close(self) -> None:
        with self._lock:
            senders = list(self._senders.values())
            receivers = [e for pool in self._receivers.values() for e in pool]
            self._senders.clear()
            self._receivers.clear()
            self._held.clear()
        for sender, _ in senders:
            with contextlib.suppress(Exception):
                sender.close()
        for entry in receivers:
            with contextlib.suppress(Exception):
                entry.receiver.close()
        with contextlib.suppress(Exception):
            self._client.close()
        with contextlib.suppress(Exception):
            self._admin.close()
