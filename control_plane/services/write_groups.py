"""The Task API's store work of the requests of one turn of the event loop, in one
transaction per store.

Where the run store and the queue are local files (``Deps.local_adapters``: SQLite, as
in ``stepway dev``), a worker's result and its next task are checked and written on the
event loop itself (control_plane/api/tasks.py): each request paid six SQLite write
transactions of its own, and their BEGIN and COMMIT, the WAL append of each commit and
the wrappers around them were a third of the Task API's CPU a hand-off
(docs/benchmarks.md). Under load the loop reads several requests in one turn; here the
store work of the requests that arrive in one turn (a result's check and record, a
message settled, a poll that hands out what is there) runs in one queue transaction
and one run-store transaction (``TaskQueue.batch``, ``RunStore.batch``): the first
request schedules the group behind the callbacks already ready (``call_soon``) and every
request that asks before it runs joins it.

What each request sees is what it would see alone:

* its work runs in the order the requests asked, each seeing the writes of those
  before it;
* a request whose work raises (a 409, a 404 ...) gets its error, and the writes it made
  before raising stand, as they would alone; the others go on. A queue call that fails
  undoes only its own writes (a savepoint);
* the queue's transaction begins with the group's first queue write, so a group that
  writes no message (results whose messages are settled later) takes no queue lock,
  and a queue that cannot be written now fails only the requests that write it, as
  alone (a result whose message cannot be completed still stands: the sweep,
  engine/runtime/deferred_sweep.py, completes it);
* an outage of the run store raised by a request's work, or a commit that fails, fails
  every request of the group with that error (503): the run store's writes are rolled
  back unless it committed, and the queue's then too. The run store commits FIRST: a
  queue commit that fails after it leaves its messages as they were (a message received
  comes back, and a hand-out of a task handed out already is dropped; a message not
  completed stays deferred for the sweep), never a message deferred for a task the run
  store does not hold as handed out, which nothing would settle;
* every answer (and every event raised on a run) comes after both commits.

The locks are taken in the order the engine's writers take them when they hold both
(engine/runtime/activities.py settles a message inside its run-store batch): the run
store's first, then the queue file's; so the run store's transaction is opened first and
committed first, not nested in the usual way. A group holds them for its requests' work
only (capped at ``max_group`` requests); the event loop runs nothing else meanwhile, as
before.

Nothing here is shared between apps or loops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from engine.ports.queue import TaskQueue
from engine.ports.run_store import RunStore, RunStoreUnavailable

__all__ = ["MAX_GROUP", "WriteGroups"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the most requests whose work shares one transaction (the rest form the next group)
MAX_GROUP = 32

#: errors of a request's work that fail the whole group: the run store's transaction,
#: which every request of the group writes in, may be lost
_OUTAGES = (RunStoreUnavailable,)

_Waiting = tuple[Callable[[], Any], "asyncio.Future[Any]"]


class WriteGroups:
    def __init__(self, run_store: RunStore, queue: TaskQueue, *, max_group: int = MAX_GROUP):
        if max_group < 1:
            raise ValueError("max_group must be at least 1")
        self._store = run_store
        self._queue = queue
        self._max_group = max_group
        #: the work waiting for the next group, in the order it was asked for
        self._waiting: list[_Waiting] = []
        #: stats for tests and benchmarks: groups run, and requests' work run in them
        self.groups = 0
        self.members = 0

    async def run(self, work: Callable[[], T]) -> T:
        """``work()`` in the next group (see the module doc); its result, or its error."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._run_waiting)
        self._waiting.append((work, done))
        return await done

    def _run_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        for start in range(0, len(waiting), self._max_group):
            try:
                self._run_group(waiting[start : start + self._max_group])
            except BaseException as exc:  # the process is stopping: no request waits on
                _fail(waiting[start:], exc)
                raise

    def _run_group(self, group: list[_Waiting]) -> None:
        self.groups += 1
        self.members += len(group)
        try:
            outcomes = self._in_transactions(group)
        except Exception as exc:
            _fail(group, exc)
            return
        for (ok, value), (_, done) in zip(outcomes, group, strict=True):
            if done.done():  # its request was canceled meanwhile
                continue
            if ok:
                done.set_result(value)
            else:
                done.set_exception(value)

    def _in_transactions(self, group: list[_Waiting]) -> list[tuple[bool, Any]]:
        """Each request's work, in one run-store and one queue transaction: the run
        store's opened first and committed first (module doc)."""
        store_batch = self._store.batch()
        store_batch.__enter__()
        try:
            queue_batch = self._queue.batch()
            queue_batch.__enter__()
        except BaseException as exc:
            _abandon(store_batch, exc)
            raise
        try:
            outcomes = [_outcome(work) for work, _ in group]
        except BaseException as exc:
            _abandon(queue_batch, exc)
            _abandon(store_batch, exc)
            raise
        try:
            store_batch.__exit__(None, None, None)
        except BaseException as exc:
            _abandon(queue_batch, exc)
            raise
        queue_batch.__exit__(None, None, None)
        return outcomes


def _fail(waiting: list[_Waiting], exc: BaseException) -> None:
    for _, done in waiting:
        if not done.done():
            done.set_exception(exc)


def _outcome(work: Callable[[], Any]) -> tuple[bool, Any]:
    """(True, what ``work`` returned) or (False, what it raised); an outage raises."""
    try:
        return True, work()
    except _OUTAGES:
        raise
    except Exception as exc:
        return False, exc


def _abandon(batch: AbstractContextManager[None], exc: BaseException) -> None:
    """Roll ``batch`` back for ``exc`` (which the caller raises); a rollback that fails
    too is logged."""
    try:
        batch.__exit__(type(exc), exc, exc.__traceback__)
    except Exception:  # a batch that rolled back re-raises nothing (it answers False)
        log.warning("a rollback of grouped writes failed", exc_info=True)
