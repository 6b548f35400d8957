"""How long the Service Bus adapter's receives ask the SDK to wait.

No Service Bus namespace can be reached here, so the SDK's client and receivers are
autospecced from the real ``azure-servicebus`` classes (a call with a parameter the
real method does not take fails). What the SDK does with ``max_wait_time`` is its
documented contract: it raises ``ValueError`` for 0 or less, and on an empty queue it
returns only once ``max_wait_time`` has passed. So the waits asked for are what a poll
pays: a look at an empty ``<type>-high`` before ``<type>`` costs its wait on every
hand-out of a normal-priority task."""

from __future__ import annotations

import time
from typing import Any
from unittest import mock

import pytest
from azure.core.credentials import AccessToken
from azure.servicebus import ServiceBusClient, ServiceBusReceiver
from azure.servicebus.exceptions import OperationTimeoutError
from azure.servicebus.management import ServiceBusAdministrationClient

from engine.adapters.queue_servicebus import QUICK_LOOK_SECONDS, ServiceBusTaskQueue


class _Token:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("token", int(time.time()) + 3600)


def _empty_namespace() -> tuple[ServiceBusTaskQueue, dict[str, list[float]], list[str]]:
    """The adapter over an autospecced client whose queues are all empty; the waits
    each queue's receives asked for, in order, and the receivers opened. A receiver as
    the SDK's: 0 or less is refused, and until its link is open a receive's wait bounds
    the opening, which takes longer than a quick look."""
    waits: dict[str, list[float]] = {}
    opened: list[str] = []
    client = mock.create_autospec(ServiceBusClient, instance=True)

    def receiver(queue_name: str, **kwargs: Any) -> Any:
        r = mock.create_autospec(ServiceBusReceiver, instance=True)
        state = {"open": False}

        def enter() -> Any:
            state["open"] = True
            opened.append(queue_name)
            return r

        def receive_messages(max_message_count: int | None = 1, max_wait_time: Any = None) -> Any:
            if max_wait_time is not None and max_wait_time <= 0:
                raise ValueError("The max_wait_time must be greater than 0.")
            if not state["open"] and (max_wait_time or 60.0) < 0.5:  # a link takes longer
                raise OperationTimeoutError(message="Timed out waiting for the AMQP link to open.")
            waits.setdefault(queue_name, []).append(max_wait_time)
            return []

        r.__enter__.side_effect = enter
        r.receive_messages.side_effect = receive_messages
        return r

    client.get_queue_receiver.side_effect = receiver
    admin = mock.create_autospec(ServiceBusAdministrationClient, instance=True)
    queue = ServiceBusTaskQueue(
        "ns.servicebus.windows.net", _Token(), client=client, admin_client=admin
    )
    return queue, waits, opened


def test_a_look_at_an_empty_queue_asks_for_a_short_wait_and_never_zero() -> None:
    queue, waits, _ = _empty_namespace()
    assert queue.receive_first(["parse-high", "parse"], 1, 0.0) == []
    assert list(waits) == ["parse-high", "parse"]
    for asked in (waits["parse-high"][0], waits["parse"][0]):
        # what an empty -high costs every hand-out of a normal-priority task: 0.5 s before
        assert 0 < asked <= 0.1


def test_a_long_poll_waits_on_the_last_queue_and_only_looks_at_the_first() -> None:
    queue, waits, _ = _empty_namespace()
    assert queue.receive_first(["parse-high", "parse"], 1, 2.0) == []
    assert waits == {"parse-high": [QUICK_LOOK_SECONDS], "parse": [2.0]}


@pytest.mark.parametrize("wait", [0.0, 0.01, QUICK_LOOK_SECONDS])
def test_a_receive_never_asks_for_less_than_the_sdk_takes(wait: float) -> None:
    queue, waits, _ = _empty_namespace()
    assert queue.receive("parse", 1, wait) == []
    assert waits == {"parse": [QUICK_LOOK_SECONDS]}


def test_a_quick_look_opens_the_receiver_first() -> None:
    """The SDK (7.15) bounds the opening of a receiver's link by the wait of the
    receive that needs it ("On a receiver that has not been opened yet, the first
    call's wait also bounds that initial link acquisition"): a quick look on a new
    receiver, or one whose link dropped, would time out before its link is open. The
    adapter opens it first (``__enter__``: the SDK's own retries and timeouts)."""
    queue, _, opened = _empty_namespace()
    assert queue.receive_first(["parse-high", "parse"], 1, 0.0) == []
    assert opened == ["parse-high", "parse"]
    assert queue.receive_first(["parse-high", "parse"], 1, 0.0) == []  # pooled, open
    assert opened == ["parse-high", "parse", "parse-high", "parse"]  # at once when open
