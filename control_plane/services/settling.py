"""Reads that show what a call just caused.

Conductor decides a run inside the API call: a client that reads a run right after
starting it sees its first tasks, right after terminating it sees it TERMINATED. In
Stepway the engine decides a moment after the call. Two waits close that gap, both
bounded by ``settle_seconds``:

* ``settle``: a call that steers a run (terminate, retry, restart, rerun, skip, a task
  update by reference) answers once the run store shows its effect.
* ``decided``: a start answers as soon as the run's row exists and its orchestration
  is scheduled, so that a burst of starts does not wait on the engine; instead a read
  of a run that is RUNNING, shows no task yet and was created less than
  ``settle_seconds`` ago waits until its first decision is visible (a task, or the
  run's end). Reads of every other run cost nothing more.

Both wait on the run store's ``watch``: the engine embedded in this process (``stepway
dev``) wakes them the moment its write commits; an engine in another process wakes
nobody, and they re-read the store every ``POLL_SECONDS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from control_plane.deps import Deps, Settings
from engine.ports.run_store import RunRecord, RunStatus, TaskRecord

#: how often a waiting reader re-reads the store when no write of this process wakes it
POLL_SECONDS = 0.05

Reached = Callable[[RunRecord, list[TaskRecord]], bool]


class RunSettling:
    def __init__(self, settings: Settings, deps: Deps) -> None:
        self.settings = settings
        self.deps = deps

    def settle(self, workflow_id: str, reached: Reached) -> None:
        """Wait until the run store shows what a call just caused (``reached``), at most
        ``settle_seconds``; the engine acts on the call's signal a moment later."""
        self._wait(workflow_id, reached, self.settings.settle_seconds)

    def decided(self, run: RunRecord) -> RunRecord | None:
        """``run`` as a client may read it: once its first decision is visible when it
        was started less than ``settle_seconds`` ago (the module doc); None when it was
        deleted meanwhile (a start whose orchestration could not be scheduled)."""
        if run.status != RunStatus.RUNNING:
            return run
        age = (self.deps.clock() - run.create_time) / 1000
        bound = self.settings.settle_seconds - age
        if bound <= 0:
            return run
        store = self.deps.run_store
        if store.list_tasks(run.workflow_id):
            return run
        return self._wait(run.workflow_id, _first_decision, bound)

    def _wait(self, workflow_id: str, reached: Reached, seconds: float) -> RunRecord | None:
        """The run once ``reached``, or as it is after ``seconds``; None if it is gone."""
        store = self.deps.run_store
        deadline = time.monotonic() + seconds
        with store.watch(workflow_id) as watch:
            while True:
                run = store.get_run(workflow_id)
                if run is None or reached(run, store.list_tasks(workflow_id)):
                    return run
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return run
                watch.wait(min(remaining, POLL_SECONDS))


def _first_decision(run: RunRecord, tasks: list[TaskRecord]) -> bool:
    return bool(tasks) or run.status != RunStatus.RUNNING
