"""Two helpers of the embedded backend (engine/adapters/backend/embedded.py): which
execution of an orchestration instance is current, and one thread for every durable
timer.

**Executions.** An instance that continues as new starts a new execution with a fresh
history, and its task ids start again from the beginning. What the previous execution
scheduled (an activity, a timer, a sub-orchestration) may still complete afterwards. The
Durable Task Framework addresses every message to an instance *and* an execution
(``OrchestrationInstance.ExecutionId`` of its task messages), so a backend can drop one
whose execution is no longer current; the engine assumes the Durable Task Scheduler does
(not verifiable here: the service is closed; where it did not, a late answer could reach
a run on Azure). The in-memory backend addresses everything by instance id alone, so the
completion landed in the new execution, where its task id names another task.
:class:`Executions` numbers the executions so that the backend can tell.

**Timers.** Upstream starts a thread per durable timer that sleeps until the timer is
due; an engine that arms an hour-long deadline on every step keeps thousands of threads
asleep. :class:`TimerQueue` keeps them in one heap served by one thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable

from durabletask.testing.in_memory_backend import OrchestrationInstance

__all__ = ["EXECUTION_EVENTS", "Executions", "TimerQueue"]

_log = logging.getLogger(__name__)

#: history events that answer something one execution scheduled (its activities,
#: timers and sub-orchestrations); events addressed to the instance itself (raised
#: events, terminate, suspend, resume) belong to whichever execution is current
EXECUTION_EVENTS = frozenset(
    {
        "taskCompleted",
        "taskFailed",
        "timerFired",
        "subOrchestrationInstanceCompleted",
        "subOrchestrationInstanceFailed",
    }
)


class Executions:
    """A number for the current execution of each instance. It changes when the instance
    continues as new (:meth:`renew`) or when the instance id is used by a new instance
    (another object under the same id). The caller holds the backend's lock."""

    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self._current: dict[str, tuple[weakref.ref[OrchestrationInstance], int]] = {}

    def current(self, instance: OrchestrationInstance) -> int:
        entry = self._current.get(instance.instance_id)
        if entry is None or entry[0]() is not instance:
            return self.renew(instance)
        return entry[1]

    def renew(self, instance: OrchestrationInstance) -> int:
        number = next(self._numbers)
        self._current[instance.instance_id] = (weakref.ref(instance), number)
        return number

    def forget(self, instance_id: str) -> None:
        """The instance was purged: its id starts afresh if it is used again."""
        self._current.pop(instance_id, None)

    def __len__(self) -> int:
        return len(self._current)


class TimerQueue:
    """Callbacks run when their wall-clock time (epoch seconds) comes, in that order, by
    one thread started on the first :meth:`schedule`. A callback that raises is logged.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)

    def schedule(self, due: float, callback: Callable[[], None]) -> None:
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._heap, (due, next(self._order), callback))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    wait = self._heap[0][0] - time.time() if self._heap else None
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopped:
                    return
                _, _, callback = heapq.heappop(self._heap)
            try:
                callback()
            except Exception:
                _log.exception("a durable timer's callback failed")

    def stop(self) -> None:
        """Drop every pending callback and end the thread."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
