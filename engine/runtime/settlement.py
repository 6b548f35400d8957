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

A message already settled (or requeued for a callback) is skipped. Once the queue has
settled a message, or answered that it is not deferred any more, the lease records it
(``Lease.settled_at``). A queue that cannot settle it at that moment leaves it deferred
and unrecorded: the sweep of deferred messages (``engine/runtime/deferred_sweep.py``)
settles it later, as :func:`dead_letter_reason_of` says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from engine.language.definitions import TaskStatus
from engine.ports.queue import QueueError, QueueUnavailable, TaskQueue
from engine.ports.run_store import EndedAttempt, Lease, RunStore, RunStoreUnavailable

__all__ = [
    "DEAD_LETTER_REASON",
    "FAILED_STATUSES",
    "MessageSettlement",
    "dead_letter_reason",
    "dead_letter_reason_of",
    "release_slot",
]

log = logging.getLogger(__name__)

#: the dead-letter reason code of an attempt the engine ended as a failure
DEAD_LETTER_REASON = "RetriesExhausted"

#: final statuses of a WORKER attempt whose message goes to the dead-letter queue when no
#: retry replaced it (COMPLETED_WITH_ERRORS: an optional task whose attempts are exhausted)
FAILED_STATUSES = frozenset(
    {
        TaskStatus.FAILED,
        TaskStatus.FAILED_WITH_TERMINAL_ERROR,
        TaskStatus.TIMED_OUT,
        TaskStatus.COMPLETED_WITH_ERRORS,
    }
)


def dead_letter_reason(status: TaskStatus, retried: bool, reason: str | None) -> str | None:
    """How the message of a WORKER attempt that is over is settled: None to complete it
    (a retry replaced it, or it completed, was skipped or canceled), else the reason to
    dead-letter it with (its final failure: the row's reason, or its status). The one
    rule of the engine (``engine/runtime/activities.py``) and of the sweep."""
    if retried or status not in FAILED_STATUSES:
        return None
    return reason or status.value


def dead_letter_reason_of(ended: EndedAttempt) -> str | None:
    """:func:`dead_letter_reason` of an attempt the sweep found (one a later attempt
    replaced is completed)."""
    replaced = ended.retried or ended.row_attempt > ended.lease.attempt
    return dead_letter_reason(ended.status, replaced, ended.reason_for_incompletion)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class MessageSettlement:
    def __init__(
        self,
        run_store: RunStore,
        queue: TaskQueue,
        clock: Callable[[], int] | None = None,
        *,
        mark_later: bool = False,
    ) -> None:
        self.run_store = run_store
        self.queue = queue
        #: epoch ms of ``Lease.settled_at``
        self.clock = clock or _wall_clock_ms
        #: record settlements with other marks (``RunStore.mark_settled_later``): the
        #: Task API's results, each of which would otherwise pay a transaction for it
        self.mark_later = mark_later

    def settle_ended(
        self, task_id: str, attempt: int, *, dead_letter_reason: str | None = None
    ) -> None:
        """:meth:`settle_attempt` for an attempt the engine has just ended, as it writes
        the run's records: a queue that is unavailable now leaves the message deferred
        and its lease unmarked, for the sweep of deferred messages, and is logged. Settling
        is housekeeping; the records and the run go on (an outage raised from here would
        fail the activity writing them, and after its retries the run)."""
        try:
            self.settle_attempt(task_id, attempt, dead_letter_reason=dead_letter_reason)
        except QueueUnavailable as exc:
            log.warning(
                "the deferred message of task %s attempt %d is left for the sweep: %s",
                task_id,
                attempt,
                exc,
            )

    def settle_attempt(
        self, task_id: str, attempt: int, *, dead_letter_reason: str | None = None
    ) -> None:
        """Complete (or, with a reason, dead-letter) the message of an attempt, found
        through its lease; nothing when it was never handed out."""
        lease = self.run_store.get_lease(task_id, attempt)
        if lease is not None:
            self.settle(lease, dead_letter_reason=dead_letter_reason)

    def settle(self, lease: Lease, *, dead_letter_reason: str | None = None) -> bool:
        """Complete (or, with a reason, dead-letter) the lease's deferred message, and
        record on the lease that it is settled. Whether nothing is left deferred: True
        when the queue settled it, answered that it is not deferred any more, or the
        lease names no message or says it is settled already; False when the queue
        answered an error (logged; it stays deferred and unrecorded, for the sweep). A
        queue that is unavailable raises :class:`~engine.ports.queue.QueueUnavailable`
        as it does elsewhere, nothing recorded."""
        if lease.sequence_number is None or not lease.queue_name:
            return True
        if lease.settled_at is not None:
            return True
        try:
            settled = self.queue.settle_deferred(
                lease.queue_name,
                lease.sequence_number,
                None if dead_letter_reason is None else DEAD_LETTER_REASON,
                (dead_letter_reason or "")[:1000],
            )
        except QueueError as exc:
            log.info("deferred message of %s not settled: %s", lease.task_id, exc)
            return False
        if not settled:
            log.info("deferred message of %s already settled", lease.task_id)
        mark = self.run_store.mark_settled_later if self.mark_later else self._mark_now
        mark(lease.task_id, lease.attempt, lease.sequence_number, self.clock())
        return True

    def _mark_now(self, task_id: str, attempt: int, sequence_number: int, now: int) -> None:
        try:
            self.run_store.mark_settled(task_id, attempt, sequence_number, now)
        except RunStoreUnavailable as exc:
            # the message is settled; unrecorded, the sweep asks the queue again, which
            # answers that it is not deferred, and records it then
            log.info("settlement of the message of %s not recorded: %s", task_id, exc)


def release_slot(run_store: RunStore, task_id: str, attempt: int) -> None:
    """Release the lease of an attempt a worker holds, and with it the concurrency slot it
    holds (``Lease.slot``), when the engine, not the worker, ends it. Call only after a
    status write of this attempt applied: that write happens once, and a lease is released
    once, so the slot the Task API took at hand-out is given back once, by whoever ended
    the attempt."""
    run_store.release_lease(task_id, attempt)
