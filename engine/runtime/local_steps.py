"""How much of a process's orchestration work the built-in steps done in work items may
take (``engine.runtime.interpreter.LocalBuiltin``, ``RunActivities.builtin_here``).

An orchestration work item holds one of the process's few orchestration threads (CPUs +
4 by default, ``engine/app/host.py``) for as long as it runs, and a built-in step done
in it (an HTTP call waiting for its answer, a script evaluated) holds the thread that
long, and the run's next events (a terminate among them) wait for it. So that no
definition can stall a run or the other runs of the process, a step done in a work item

* is waited for ``within_seconds`` (:data:`WITHIN_SECONDS`) at most. A script's
  evaluation is bounded by it (``ActivityDeps.within_seconds``) and one past it raises
  :class:`NotHere`: the built-in activity evaluates it again with the full limits (a
  script is pure). An HTTP call runs on a thread of the gate's (:meth:`LocalSteps.hand_over`)
  and one with no answer by then goes on there while the work item leaves the step to the
  built-in activity, which takes that call's result (:meth:`LocalSteps.take`) instead of
  calling again, so the call is made once. Only GET, HEAD and OPTIONS are called here
  (others raise :class:`NotHere`): safe methods, so that an activity run by another
  process, which cannot take the call, may make it again;

and :class:`LocalSteps` lets a process do one only

* while fewer than ``slots`` are in flight (half the orchestration threads: the other
  half keep deciding, terminates among them), and
* for a task (by type, name and reference in its definition) that was not cut short nor
  took ``within_seconds`` before: such a task goes to the built-in activity from then
  on, in this process, whose threads are meant to wait.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

__all__ = ["WITHIN_SECONDS", "LocalSteps", "NotHere"]

T = TypeVar("T")

#: how long a built-in step may take in a work item; a task whose step took that long goes
#: to the activity from then on
WITHIN_SECONDS = 0.25
#: slow tasks remembered per process; past it the longest known is forgotten (and found
#: slow again the next time it is)
_REMEMBERED = 1024
#: threads of the calls handed over (:meth:`LocalSteps.hand_over`): calls past it wait for
#: one (and so are left to their activities, which wait for them in turn)
_CALL_THREADS = 32
#: seconds a call handed over and done is kept for an activity that has not taken it (one
#: run by another process, or never run: the run ended)
_UNTAKEN_SECONDS = 300.0


class NotHere(Exception):
    """A built-in step cannot be done in the work item: its call or evaluation went past
    ``within_seconds``, or its HTTP method is not safe to make again (its task is left
    to the activity from then on: ``remember``); or, for now, no evaluator process is
    idle. The built-in activity does it instead."""

    def __init__(self, reason: str, *, remember: bool = True) -> None:
        super().__init__(reason)
        self.remember = remember


class LocalSteps:
    """The gate of one engine process's built-in steps done in work items."""

    def __init__(self, slots: int, within_seconds: float = WITHIN_SECONDS) -> None:
        self.slots = max(1, slots)
        self.within_seconds = within_seconds
        self._free = threading.BoundedSemaphore(self.slots)
        self._slow: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._lock = threading.Lock()
        self._calls: ThreadPoolExecutor | None = None
        #: calls handed over, by key, with when they were
        self._handed: dict[Hashable, tuple[Future[Any], float]] = {}

    def is_slow(self, task: tuple[str, ...]) -> bool:
        with self._lock:
            return task in self._slow

    def run(self, task: tuple[str, ...], work: Callable[[], T]) -> T | None:
        """What ``work`` (the step of ``task``) returned; None when it raised
        :class:`NotHere`, and without running it when no slot is free or ``task`` was
        cut short or slow before."""
        if self.is_slow(task) or not self._free.acquire(blocking=False):
            return None
        began = time.monotonic()
        cut = False
        try:
            return work()
        except NotHere as exc:
            cut = exc.remember
            return None
        finally:
            self._free.release()
            if cut or time.monotonic() - began >= self.within_seconds:
                self._remember_slow(task)

    def hand_over(self, key: Hashable, work: Callable[[], T]) -> T:
        """What ``work`` (a call) returned, run on a thread of the gate's and waited for
        ``within_seconds``; past it :class:`NotHere`, the call going on and its outcome
        kept for :meth:`take` under ``key``."""
        with self._lock:
            if self._calls is None:
                self._calls = ThreadPoolExecutor(_CALL_THREADS, "stepway-local-call")
            calls = self._calls
        future = calls.submit(work)
        try:
            return future.result(timeout=self.within_seconds)
        except FutureTimeout:
            now = time.monotonic()
            with self._lock:
                for old in [
                    k
                    for k, (f, at) in self._handed.items()
                    if f.done() and now - at > _UNTAKEN_SECONDS
                ]:
                    del self._handed[old]
                self._handed[key] = (future, now)
            raise NotHere(f"no answer within {self.within_seconds:g} s") from None

    def take(self, key: Hashable) -> Future[Any] | None:
        """The call handed over under ``key`` (:meth:`hand_over`), once, or None."""
        with self._lock:
            handed = self._handed.pop(key, None)
        return handed[0] if handed is not None else None

    def _remember_slow(self, task: tuple[str, ...]) -> None:
        with self._lock:
            self._slow[task] = None
            while len(self._slow) > _REMEMBERED:
                self._slow.popitem(last=False)
