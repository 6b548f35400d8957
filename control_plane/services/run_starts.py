"""Starts answered once stored: the start path where every adapter is local
(``Deps.local_adapters``), and elsewhere the starts whose scheduling ran out of time
(``keep_trying``: the backend may have carried it out, so the run is kept and its start
tried again rather than undone).

Under a burst of starts, a start that writes its run row and then schedules its
orchestration before it answers waits twice behind the runs already going: for the
run store's write lock, and for the durable backend, which those runs keep busy. Here a
start is prepared on the event loop (definition, input, the run row), then joins the
starts waiting to be stored: one thread writes them all in ONE run-store transaction,
each run row with its *pending start* (the orchestration's input), and they are
answered. The starter thread then schedules their orchestrations
(``RunSignals.start_new_run``) and deletes their pending starts, one transaction for
those it scheduled together. A read of a run started a moment ago still waits for its
first decision (:mod:`control_plane.services.settling`), as with the start that answers
once scheduled.

A batch the run store cannot store is answered 503 (retryable) for an outage of the
store, else 500 (not retryable), without the store's error text
(``failure_of`` in control_plane/api/errors.py). Nothing answered is lost:

* a process that stops between the two leaves the pending starts in the store; the next
  one schedules them (:meth:`RunStarts.recover`, at start-up), and a start scheduled
  twice counts once (``start_new_run``). An app that stops (``StepwayApp.close``) stops
  its starter (:meth:`RunStarts.close`): what it could not schedule stays pending so;
* a start whose orchestration cannot be scheduled (the backend is unreachable, or refuses
  that run) is tried again after its own wait: ``Settings.start_retry_first_seconds``
  (0.5 s), doubling after each refusal up to ``start_retry_max_seconds`` (30 s), whatever
  the other starts do; the starts that came after it are not held up by it. After
  ``start_max_attempts`` (10) refusals its run is FAILED (a restart or retry runs it),
  never left RUNNING; the reason names the backend's outage, or for any other error only
  its class (its text, which may hold the backend's internals, goes to the log);
* except a start the backend may have carried out: one kept because its call ran out
  of time (``keep_trying``), one a stopped process left (it may have been scheduled
  just before the stop) and one an attempt of which ran out of time. Failing its run
  could contradict an orchestration that runs, and whose end later overwrites the
  FAILED row. After ``start_max_attempts`` refusals such a start fails its run only
  if the backend answers that it holds no orchestration of the run and the last
  attempt did not run out of time; while the backend cannot tell, the start is tried
  again every ``start_retry_max_seconds`` and the run reads RUNNING (logged as an
  error each time);
* until its orchestration exists, a run reads RUNNING (the repair on read that fails a
  run whose orchestration is gone asks :meth:`RunStarts.pending` first), and a signal
  to it (pause, resume, terminate, skip) schedules it first (:meth:`RunStarts.scheduled`).

No process-global state: each :class:`RunStarts` belongs to one app's workflow service.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from typing import Any, Literal

import anyio

from control_plane.api.errors import ApiError, failure_of
from control_plane.deps import Deps, Settings
from engine.ports.run_signals import RunSignalsUnavailable
from engine.ports.run_store import CreateRunResult, NewRun, RunStatus, RunUpdate

log = logging.getLogger(__name__)

#: pending starts read from the store at once by :meth:`RunStarts.recover`; it reads no
#: more while this many starts wait to be tried again
RECOVER_PAGE = 500

_Waiting = tuple[NewRun, dict[str, Any], "asyncio.Future[str]"]


class RunStarts:
    def __init__(self, settings: Settings, deps: Deps) -> None:
        self._deps = deps
        self._retry_first = settings.start_retry_first_seconds
        self._retry_max = settings.start_retry_max_seconds
        self._max_attempts = settings.start_max_attempts
        # the event loop's: starts waiting to be stored, and the task storing them
        self._waiting: list[_Waiting] = []
        self._store_task: asyncio.Task[None] | None = None
        # the starter's, under ``_changed``: runs stored whose orchestration is not
        # scheduled yet (their orchestration inputs), the refusals of those refused and
        # when (time.monotonic) each of these may be tried again, and the starter thread
        # while it runs. ``_changed`` is notified whenever they change.
        self._changed = threading.Condition()
        self._unscheduled: dict[str, dict[str, Any]] = {}
        self._attempts: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}
        #: the unscheduled starts the backend may have carried out (module docstring)
        self._maybe_started: set[str] = set()
        self._starter: threading.Thread | None = None
        self._recovery: threading.Thread | None = None
        #: set by :meth:`close`: the starter and the recovery stop, and start no more
        self._closed = False

    # --- the event loop's side ---------------------------------------------------------

    async def start(self, run: NewRun, run_input: dict[str, Any]) -> str:
        """Store ``run`` with its pending start (``run_input``) together with the starts
        that arrive meanwhile; its id once stored (an existing run's id when its
        idempotency key was used before: nothing is started then)."""
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[str] = loop.create_future()
        self._waiting.append((run, run_input, stored))
        if self._store_task is None or self._store_task.done():
            # kept: the loop holds only a weak reference to a task
            self._store_task = loop.create_task(self._store_waiting())
        return await stored

    async def _store_waiting(self) -> None:
        batch: list[_Waiting] = []
        try:
            await asyncio.sleep(0)  # the starts of this turn of the loop come along
            while self._waiting:
                batch, self._waiting = self._waiting, []
                items = [(run, run_input) for run, run_input, _ in batch]
                try:
                    results = await anyio.to_thread.run_sync(self._store, items)
                except Exception as exc:
                    log.exception("could not store %d run(s)", len(batch))
                    _fail(batch, failure_of("could not store the run", exc))
                else:
                    for (_, _, stored), result in zip(batch, results, strict=True):
                        if not stored.done():
                            stored.set_result(result.workflow_id)
                batch = []
        finally:
            gone = ApiError(503, "the server stopped before the run was stored", retryable=True)
            _fail(batch + self._waiting, gone)
            self._waiting = []

    def _store(self, items: list[tuple[NewRun, dict[str, Any]]]) -> list[CreateRunResult]:
        store = self._deps.run_store
        with store.batch():
            results = [store.create_run(run, start=run_input) for run, run_input in items]
        self._schedule_later(
            {
                result.workflow_id: run_input
                for (_, run_input), result in zip(items, results, strict=True)
                if result.created
            }
        )
        return results

    # --- the starter -------------------------------------------------------------------

    def _schedule_later(
        self, starts: dict[str, dict[str, Any]], *, maybe_started: bool = False
    ) -> None:
        """Hand these starts to the starter; ``maybe_started``: the backend may have
        carried them out already (module docstring)."""
        if not starts:
            return
        with self._changed:
            self._unscheduled.update(starts)
            if maybe_started:
                self._maybe_started.update(starts)
            self._changed.notify_all()
            if self._starter is None and not self._closed:
                self._starter = threading.Thread(
                    target=self._run_starter, name="stepway-run-starter", daemon=True
                )
                self._starter.start()

    def _run_starter(self) -> None:
        """Try the starts that are due (new ones, and refused ones whose wait is over)
        until none is left; in between, sleep until the next is due or a start arrives."""
        while True:
            with self._changed:
                while True:
                    if not self._unscheduled or self._closed:
                        self._starter = None
                        return
                    now = time.monotonic()
                    due = {
                        workflow_id: run_input
                        for workflow_id, run_input in self._unscheduled.items()
                        if self._retry_at.get(workflow_id, now) <= now
                    }
                    if due:
                        break
                    # every start left waits for its retry (its own entry in _retry_at)
                    self._changed.wait(min(self._retry_at.values()) - now)
            self._schedule(due)

    def _retry_delay(self, attempts: int) -> float:
        """How long a start refused ``attempts`` times waits before its next try."""
        return min(self._retry_first * 2.0 ** (attempts - 1), self._retry_max)

    def _schedule(self, starts: dict[str, dict[str, Any]]) -> None:
        """Schedule these orchestrations. A refused start waits its own retry delay
        before its next try; one refused ``start_max_attempts`` times fails its run,
        unless the backend may have carried it out (:meth:`_give_up`)."""
        done: list[str] = []
        given_up: dict[str, Exception] = {}
        for workflow_id, run_input in starts.items():
            try:
                self._deps.signals.start_new_run(workflow_id, run_input)
            except Exception as exc:
                lost = isinstance(exc, RunSignalsUnavailable) and exc.maybe_done
                with self._changed:
                    if workflow_id not in self._unscheduled:
                        continue  # scheduled meanwhile (``scheduled``)
                    attempts = self._attempts[workflow_id] = self._attempts.get(workflow_id, 0) + 1
                    delay = self._retry_delay(attempts)
                    self._retry_at[workflow_id] = time.monotonic() + delay
                    if lost:
                        self._maybe_started.add(workflow_id)
                    maybe_started = workflow_id in self._maybe_started
                    self._changed.notify_all()
                if attempts < self._max_attempts:
                    log.warning(
                        "could not schedule run %s yet (attempt %d, next in %.1f s): %s",
                        workflow_id,
                        attempts,
                        delay,
                        exc,
                    )
                elif not maybe_started:
                    given_up[workflow_id] = exc
                else:
                    verdict = self._give_up(workflow_id, attempts, delay, exc, lost)
                    if verdict == "fail":
                        given_up[workflow_id] = exc
                    elif verdict == "scheduled":
                        done.append(workflow_id)
                continue
            done.append(workflow_id)
        for workflow_id, error in list(given_up.items()):
            try:
                self._fail_run(workflow_id, error)
            except Exception:  # its start stays: tried again after its retry delay
                log.exception("could not fail run %s whose start was given up", workflow_id)
                del given_up[workflow_id]
        if not done and not given_up:
            return
        try:
            self._done([*done, *given_up])
        except Exception:  # a later recover schedules them once more: counted once
            log.exception("could not delete %d pending start(s)", len(done) + len(given_up))
            self._forget([*done, *given_up])

    def _give_up(
        self, workflow_id: str, attempts: int, delay: float, exc: Exception, lost: bool
    ) -> Literal["scheduled", "fail", "wait"]:
        """What becomes of a start the backend may have carried out, refused
        ``start_max_attempts`` times or more: ``"scheduled"`` when the backend holds
        its orchestration, ``"fail"`` when it answers that it holds none and this
        attempt's answer was not lost to its deadline, else ``"wait"``: tried again
        after ``delay``, the run left RUNNING."""
        try:
            held = self._deps.signals.has_orchestration(workflow_id)
        except Exception as check:
            log.error(
                "could not schedule run %s (attempt %d, next in %.1f s): %s; its "
                "orchestration may exist and the durable backend cannot tell (%s), so the "
                "run stays RUNNING until it can",
                workflow_id,
                attempts,
                delay,
                exc,
                check,
            )
            return "wait"
        if held:
            log.info("run %s: its orchestration exists at the durable backend", workflow_id)
            return "scheduled"
        if lost:
            log.error(
                "could not schedule run %s (attempt %d, next in %.1f s): %s; its "
                "orchestration may still be created by this attempt",
                workflow_id,
                attempts,
                delay,
                exc,
            )
            return "wait"
        return "fail"

    def _done(self, workflow_ids: list[str]) -> None:
        """The bookkeeping of starts whose orchestration is scheduled (or whose run was
        failed): their pending starts deleted, then forgotten here. Raises what the run
        store raised (they are then still here)."""
        self._deps.run_store.delete_pending_starts(workflow_ids)
        self._forget(workflow_ids)

    def _forget(self, workflow_ids: list[str]) -> None:
        """Drop these starts from the starter's memory: nothing left to schedule."""
        with self._changed:
            for workflow_id in workflow_ids:
                self._unscheduled.pop(workflow_id, None)
                self._attempts.pop(workflow_id, None)
                self._retry_at.pop(workflow_id, None)
                self._maybe_started.discard(workflow_id)
            self._changed.notify_all()

    def _fail_run(self, workflow_id: str, exc: Exception) -> None:
        log.error(
            "giving up the start of run %s after %d attempts: %s",
            workflow_id,
            self._max_attempts,
            exc,
            exc_info=exc,
        )
        now = self._deps.clock()
        # the reason names an outage, or only the class of any other error (its text,
        # the backend's, is in the log)
        reason = failure_of("its orchestration could not be scheduled", exc).message
        self._deps.run_store.update_run(
            workflow_id,
            RunUpdate(status=RunStatus.FAILED, reason_for_incompletion=reason, end_time=now),
            now,
        )

    def keep_trying(self, workflow_id: str, run_input: dict[str, Any]) -> bool:
        """Keep the start of a run already stored whose scheduling may or may not have
        been carried out (its call ran out of time): the run gets a pending start and
        the starter tries it until the backend has it (a start it had already counts
        once, ``start_new_run``). False when the pending start could not be stored (the
        caller then undoes the start)."""
        try:
            stored = self._deps.run_store.add_pending_start(
                workflow_id, run_input, self._deps.clock()
            )
        except Exception:
            log.exception("could not keep the start of run %s", workflow_id)
            return False
        if stored:
            self._schedule_later({workflow_id: run_input}, maybe_started=True)
        return stored

    # --- for reads, signals and start-up -----------------------------------------------

    def pending(self, workflow_id: str) -> bool:
        """Whether the run's orchestration is still to be scheduled."""
        with self._changed:
            if workflow_id in self._unscheduled:
                return True
        return self._deps.run_store.has_pending_start(workflow_id)

    def scheduled(self, workflow_id: str) -> None:
        """Schedule the run's orchestration now if this process still has it to schedule
        (a signal to the run needs it); raises what the backend raised."""
        with self._changed:
            run_input = self._unscheduled.get(workflow_id)
        if run_input is None:
            return
        self._deps.signals.start_new_run(workflow_id, run_input)
        self._done([workflow_id])

    def recover(self) -> threading.Thread:
        """Hand the starter, in a thread of its own, the pending starts a process that
        stopped left in the store, page by page; the thread (it ends when none is left)."""
        thread = threading.Thread(target=self._recover, name="stepway-run-recovery", daemon=True)
        with self._changed:
            if self._closed:
                raise RuntimeError("these run starts are closed")
            self._recovery = thread
        thread.start()
        return thread

    def close(self, timeout: float = 10.0) -> None:
        """Stop the starter and the recovery once what they are doing now is done (at
        most ``timeout`` seconds each), and start neither again: the app stops. Starts
        not scheduled yet keep their pending start in the store, for the next process
        to schedule (:meth:`recover`)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            threads = [t for t in (self._starter, self._recovery) if t is not None]
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def _recover(self) -> None:
        """Each page holds the oldest pending starts this process does not have yet; the
        next is read once the starter tried each of them (a refused one then waits its
        own retry, as any start). While ``RECOVER_PAGE`` starts wait for a retry, no
        more are read (they are held in memory until scheduled)."""
        while True:
            with self._changed:
                while len(self._retry_at) >= RECOVER_PAGE and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                known = set(self._unscheduled)
            limit = RECOVER_PAGE + len(known)
            try:
                page = self._deps.run_store.pending_starts(limit=limit)
            except Exception:
                log.exception("could not read the pending starts")
                return
            fresh = {p.workflow_id: p.run_input for p in page if p.workflow_id not in known}
            if fresh:
                log.info(
                    "scheduling %d run(s) whose start was stored but not scheduled", len(fresh)
                )
                # a process that stopped may have scheduled them before deleting them
                self._schedule_later(fresh, maybe_started=True)
                with self._changed:
                    self._changed.wait_for(functools.partial(self._tried, fresh))
                    if self._closed:
                        return
            if len(page) < limit:  # none left that this process does not have
                return

    def _tried(self, starts: dict[str, Any]) -> bool:
        """Whether the starter tried each of these starts, or this is closed (under
        ``_changed``)."""
        return self._closed or all(
            w not in self._unscheduled or w in self._retry_at for w in starts
        )


def _fail(waiting: list[_Waiting], error: ApiError) -> None:
    for _, _, stored in waiting:
        if not stored.done():
            stored.set_exception(error)
