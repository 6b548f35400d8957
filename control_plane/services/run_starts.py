"""Starts answered once stored: the start path where every adapter is local
(``Deps.local_adapters``).

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

Nothing answered is lost:

* a process that stops between the two leaves the pending starts in the store; the next
  one schedules them (:meth:`RunStarts.recover`, at start-up), and a start scheduled
  twice counts once (``start_new_run``);
* a start whose orchestration cannot be scheduled (the backend is unreachable) is tried
  again, after 0.5 s doubling to 30 s; after ``MAX_ATTEMPTS`` its run is FAILED with
  the backend's error as the reason (a restart or retry runs it), never left RUNNING;
* until its orchestration exists, a run reads RUNNING (the repair on read that fails a
  run whose orchestration is gone asks :meth:`RunStarts.pending` first), and a signal
  to it (pause, resume, terminate, skip) schedules it first (:meth:`RunStarts.scheduled`).

No process-global state: each :class:`RunStarts` belongs to one app's workflow service.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import anyio

from control_plane.api.errors import ApiError
from control_plane.deps import Deps
from engine.ports.run_store import CreateRunResult, NewRun, RunStatus, RunUpdate

log = logging.getLogger(__name__)

#: how long the starter waits before trying a failed schedule again: first, at most
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
#: a start that failed this many times fails its run (30 s apart at the end: about 2.5 min)
MAX_ATTEMPTS = 10
#: pending starts read from the store at once by :meth:`RunStarts.recover`
RECOVER_PAGE = 500

_Waiting = tuple[NewRun, dict[str, Any], "asyncio.Future[str]"]


class RunStarts:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        # the event loop's: starts waiting to be stored, and the task storing them
        self._waiting: list[_Waiting] = []
        self._store_task: asyncio.Task[None] | None = None
        # the starter's: runs stored whose orchestration is not scheduled yet (their
        # orchestration inputs), and the starter thread while it runs
        self._lock = threading.Lock()
        self._unscheduled: dict[str, dict[str, Any]] = {}
        self._starter: threading.Thread | None = None
        self._attempts: dict[str, int] = {}

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
                    _fail(batch, ApiError(503, f"could not store the run: {exc}", retryable=True))
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

    def _schedule_later(self, starts: dict[str, dict[str, Any]]) -> None:
        if not starts:
            return
        with self._lock:
            self._unscheduled.update(starts)
            if self._starter is None:
                self._starter = threading.Thread(
                    target=self._run_starter, name="stepway-run-starter", daemon=True
                )
                self._starter.start()

    def _run_starter(self) -> None:
        retry = RETRY_FIRST_SECONDS
        while True:
            with self._lock:
                if not self._unscheduled:
                    self._starter = None
                    return
                starts = dict(self._unscheduled)
            retry = self._schedule_or_wait(starts, retry)

    def _schedule_or_wait(self, starts: dict[str, dict[str, Any]], retry: float) -> float:
        """Schedule ``starts``; when none could be, wait ``retry`` seconds first. The
        next wait."""
        if self._schedule(starts):
            return RETRY_FIRST_SECONDS
        time.sleep(retry)
        return min(retry * 2, RETRY_MAX_SECONDS)

    def _schedule(self, starts: dict[str, dict[str, Any]]) -> bool:
        """Schedule these orchestrations; a start that failed ``MAX_ATTEMPTS`` times
        fails its run. False when none was scheduled or failed (try again later)."""
        done: list[str] = []
        given_up: dict[str, Exception] = {}
        for workflow_id, run_input in starts.items():
            try:
                self._deps.signals.start_new_run(workflow_id, run_input)
            except Exception as exc:
                with self._lock:
                    attempts = self._attempts[workflow_id] = self._attempts.get(workflow_id, 0) + 1
                if attempts >= MAX_ATTEMPTS:
                    given_up[workflow_id] = exc
                else:
                    log.warning(
                        "could not schedule run %s yet (attempt %d): %s", workflow_id, attempts, exc
                    )
                continue
            done.append(workflow_id)
        for workflow_id, error in given_up.items():
            self._fail_run(workflow_id, error)
        try:
            self._deps.run_store.delete_pending_starts([*done, *given_up])
        except Exception:  # a later recover schedules them once more: counted once
            log.exception("could not delete %d pending start(s)", len(done) + len(given_up))
        with self._lock:
            for workflow_id in (*done, *given_up):
                self._unscheduled.pop(workflow_id, None)
                self._attempts.pop(workflow_id, None)
        return bool(done or given_up)

    def _fail_run(self, workflow_id: str, exc: Exception) -> None:
        log.error(
            "giving up the start of run %s after %d attempts: %s", workflow_id, MAX_ATTEMPTS, exc
        )
        now = self._deps.clock()
        self._deps.run_store.update_run(
            workflow_id,
            RunUpdate(
                status=RunStatus.FAILED,
                reason_for_incompletion=f"its orchestration could not be scheduled: {exc}",
                end_time=now,
            ),
            now,
        )

    # --- for reads, signals and start-up -----------------------------------------------

    def pending(self, workflow_id: str) -> bool:
        """Whether the run's orchestration is still to be scheduled."""
        with self._lock:
            if workflow_id in self._unscheduled:
                return True
        return self._deps.run_store.has_pending_start(workflow_id)

    def scheduled(self, workflow_id: str) -> None:
        """Schedule the run's orchestration now if this process still has it to schedule
        (a signal to the run needs it); raises what the backend raised."""
        with self._lock:
            run_input = self._unscheduled.get(workflow_id)
        if run_input is None:
            return
        self._deps.signals.start_new_run(workflow_id, run_input)
        self._deps.run_store.delete_pending_starts([workflow_id])
        with self._lock:
            self._unscheduled.pop(workflow_id, None)
            self._attempts.pop(workflow_id, None)

    def recover(self) -> threading.Thread:
        """Schedule, in a thread of its own, the pending starts a process that stopped
        left in the store, page by page; the thread (it ends when none is left)."""
        thread = threading.Thread(target=self._recover, name="stepway-run-recovery", daemon=True)
        thread.start()
        return thread

    def _recover(self) -> None:
        retry = RETRY_FIRST_SECONDS
        while True:
            try:
                page = self._deps.run_store.pending_starts(limit=RECOVER_PAGE)
            except Exception:
                log.exception("could not read the pending starts")
                return
            if not page:
                return
            log.info("scheduling %d run(s) whose start was stored but not scheduled", len(page))
            retry = self._schedule_or_wait({p.workflow_id: p.run_input for p in page}, retry)


def _fail(waiting: list[_Waiting], error: ApiError) -> None:
    for _, _, stored in waiting:
        if not stored.done():
            stored.set_exception(error)
