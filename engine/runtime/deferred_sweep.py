"""The sweep of deferred messages: settles the message of every handed-out attempt that
is over and that no one settled.

A message is settled when its attempt ends, by the component that learns of the end
(``engine/runtime/settlement.py``). A queue that is unavailable at that moment (the Task
API then logs it and lets the result stand) leaves the message deferred: invisible,
never handed out again and never removed. On Service Bus it counts towards the queue's
size (as active) until its time to live, often never; on SQLite it stays in the file.
The sweep finds them: the run store lists the attempts that are over whose lease's
message is not marked settled (``RunStore.unsettled_attempts``), and each message is
completed or dead-lettered as the engine settles it
(:func:`~engine.runtime.settlement.dead_letter_reason_of`), then marked settled.

A round (:meth:`DeferredSweep.run_once`):

* takes only attempts whose lease was taken and whose task row was last written
  ``grace_ms`` or longer ago, leaving the regular settlement its moment (the Task API
  right after a result, the engine as it decides an end, a hand-out deferring the
  message it has just leased);
* is one indexed query when there is nothing to settle;
* reads at most ``max_batches`` batches of ``batch`` attempts; the next round goes on
  after the last one read, and starts over once it reached the end. So the leases
  written before the store recorded settlements (run store revision 0007; the queue is
  asked about each once) are walked over several rounds, and an attempt whose queue
  answers an error (left for the next pass) holds up no other;
* ends at once when the queue or the run store is unavailable (raised to the caller),
  or when asked to stop.

:class:`SweepThread` runs a round every ``interval_seconds`` in a process that holds the
queue (the engine's ``activities`` and ``all`` roles, ``stepway dev``): it is owned by
the process's :class:`~engine.runtime.services.EngineServices` and stopped with them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from engine.ports.queue import QueueUnavailable, TaskQueue
from engine.ports.run_store import RunStore, RunStoreUnavailable
from engine.runtime.settlement import MessageSettlement, dead_letter_reason_of

__all__ = [
    "DEFAULT_GRACE_MS",
    "DEFAULT_INTERVAL_SECONDS",
    "DeferredSweep",
    "SweepThread",
]

log = logging.getLogger(__name__)

#: how often a process sweeps (``STEPWAY_DEFERRED_SWEEP_SECONDS``)
DEFAULT_INTERVAL_SECONDS = 60.0
#: how long after an attempt's last write (and its hand-out) the sweep may settle it
DEFAULT_GRACE_MS = 60_000
#: attempts read per query, and queries per round
DEFAULT_BATCH = 100
DEFAULT_MAX_BATCHES = 10


class DeferredSweep:
    """Rounds of settling the deferred messages of attempts that are over."""

    def __init__(
        self,
        run_store: RunStore,
        queue: TaskQueue,
        *,
        grace_ms: int = DEFAULT_GRACE_MS,
        batch: int = DEFAULT_BATCH,
        max_batches: int = DEFAULT_MAX_BATCHES,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.run_store = run_store
        self.settlement = MessageSettlement(run_store, queue, clock)
        #: epoch ms (the settlement's clock: the wall clock unless given)
        self.clock = self.settlement.clock
        self.grace_ms = grace_ms
        self.batch = batch
        self.max_batches = max_batches
        #: where the next round goes on (the key of the last attempt read)
        self._after: tuple[int, str, int] | None = None

    def run_once(self, stop: threading.Event | None = None) -> int:
        """One round; how many messages it settled (or found settled already). Raises
        :class:`~engine.ports.queue.QueueUnavailable` and
        :class:`~engine.ports.run_store.RunStoreUnavailable`: the round ends there, and
        the next one reads the same attempts again."""
        before = self.clock() - self.grace_ms
        settled = 0
        for _ in range(self.max_batches):
            found = self.run_store.unsettled_attempts(before, limit=self.batch, after=self._after)
            for ended in found:
                if stop is not None and stop.is_set():
                    return settled
                reason = dead_letter_reason_of(ended)
                if self.settlement.settle(ended.lease, dead_letter_reason=reason):
                    settled += 1
                self._after = ended.key
            if len(found) < self.batch:
                self._after = None  # the end: the next round starts over
                break
        return settled


class SweepThread:
    """A daemon thread running a round of ``sweep`` at once and then every
    ``interval_seconds`` until :meth:`stop`. A round that fails (the queue or the run
    store unavailable, or anything else) is logged, and the next one runs on time."""

    def __init__(self, sweep: DeferredSweep, interval_seconds: float) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        self.sweep = sweep
        self.interval_seconds = interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="stepway-deferred-sweep", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the message being settled, if any; wait at most ``timeout``
        seconds (a queue call in flight is bounded by its own timeout) and never
        longer: the thread is a daemon, it does not keep the process alive."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                settled = self.sweep.run_once(self._stop)
            except (QueueUnavailable, RunStoreUnavailable) as exc:
                log.warning(
                    "deferred messages not swept (next round in %g s): %s",
                    self.interval_seconds,
                    exc,
                )
            except Exception:
                log.exception(
                    "sweep of deferred messages failed (next round in %g s)",
                    self.interval_seconds,
                )
            else:
                if settled:
                    log.info("settled %d deferred message(s) of attempts that are over", settled)
            self._stop.wait(self.interval_seconds)
