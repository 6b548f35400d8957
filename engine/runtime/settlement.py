"""Settling the deferred message of a WORKER task attempt that is over.

The Task API defers a message when it hands the attempt out, so the message stays
invisible until someone fetches it by sequence number (kept on the attempt's lease) and
completes or dead-letters it. This module is the one owner of that step; it is called
at the moment an attempt ends, by the component that learns of the end:

* the Task API, when the lease holder posts COMPLETED (nothing is left to decide:
  complete);
* the engine, for every end the Decider decides: a retry replaces the attempt
  (complete), attempts are exhausted or the failure is terminal or the attempt timed
  out (dead-letter, with the reason), the task was canceled (complete).

A message already settled (or requeued for a callback) is skipped.
"""

from __future__ import annotations

import logging

from engine.ports.queue import QueueError, TaskQueue
from engine.ports.run_store import Lease, RunStore

__all__ = ["DEAD_LETTER_REASON", "MessageSettlement", "release_slot"]

log = logging.getLogger(__name__)

#: the dead-letter reason code of an attempt the engine ended as a failure
DEAD_LETTER_REASON = "RetriesExhausted"


class MessageSettlement:
    def __init__(self, run_store: RunStore, queue: TaskQueue) -> None:
        self.run_store = run_store
        self.queue = queue

    def settle_attempt(
        self, task_id: str, attempt: int, *, dead_letter_reason: str | None = None
    ) -> None:
        """Complete (or, with a reason, dead-letter) the message of an attempt, found
        through its lease; nothing when it was never handed out."""
        lease = self.run_store.get_lease(task_id, attempt)
        if lease is not None:
            self.settle(lease, dead_letter_reason=dead_letter_reason)

    def settle(self, lease: Lease, *, dead_letter_reason: str | None = None) -> None:
        if lease.sequence_number is None or not lease.queue_name:
            return
        try:
            settled = self.queue.settle_deferred(
                lease.queue_name,
                lease.sequence_number,
                None if dead_letter_reason is None else DEAD_LETTER_REASON,
                (dead_letter_reason or "")[:1000],
            )
        except QueueError as exc:
            log.info("deferred message of %s not settled: %s", lease.task_id, exc)
            return
        if not settled:
            log.info("deferred message of %s already settled", lease.task_id)


def release_slot(run_store: RunStore, task_id: str, attempt: int) -> None:
    """Release the lease of an attempt a worker holds, and with it the concurrency slot it
    holds (``Lease.slot``), when the engine, not the worker, ends it. Call only after a
    status write of this attempt applied: that write happens once, and a lease is released
    once, so the slot the Task API took at hand-out is given back once, by whoever ended
    the attempt."""
    run_store.release_lease(task_id, attempt)
