"""Reconcile on read: a run the store shows RUNNING or PAUSED whose orchestration ended
in the durable backend without the interpreter recording it (a history limit, a
terminate by an operator using the backend directly) is recorded FAILED with that
reason by the read that notices it, so no run shows RUNNING forever. No sweeper.

Asking is a call to the backend (a gRPC round trip: about 0.7 ms of CPU in ``stepway
dev``, a network round trip to the Durable Task Scheduler on Azure), and a client that
follows a run reads it over and over. So a process asks about a run at most once per
``reconcile_interval_ms``: after the backend answered that the run's orchestration is
going, reads within the interval take the store's word. A run ended outside the
interpreter is then noticed by the first read after the interval, at most that much
later than by every read asking. 0 asks on every read.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from control_plane.deps import Deps, Settings
from engine.ports.run_store import RunRecord, RunStatus, RunUpdate

log = logging.getLogger(__name__)

#: runs remembered as going; past it the least recently asked are forgotten (asked again)
_REMEMBERED = 10_000


class RunReconciling:
    def __init__(
        self,
        settings: Settings,
        deps: Deps,
        start_pending: Callable[[str], bool],
        remembered: int = _REMEMBERED,
    ) -> None:
        self.settings = settings
        self.deps = deps
        self._start_pending = start_pending
        self._remembered = remembered
        #: run -> when (ms, the API's clock) the backend last said its orchestration went on
        self._going: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def current(self, run: RunRecord, reread: Callable[[], RunRecord]) -> RunRecord:
        """``run`` as it stands: recorded FAILED when its orchestration ended in the
        backend (``reread`` reads it again after that write)."""
        workflow_id = run.workflow_id
        if run.status.is_terminal:
            with self._lock:
                self._going.pop(workflow_id, None)
            return run
        now = self.deps.clock()
        interval = self.settings.reconcile_interval_ms
        if interval > 0:
            with self._lock:
                asked = self._going.get(workflow_id)
            if asked is not None and 0 <= now - asked < interval:
                return run
        try:
            reason = self.deps.signals.ended_outside(workflow_id)
        except Exception:  # the backend is unreachable: report what the store says
            log.warning("could not read the orchestration state of %s", workflow_id)
            return run
        if reason is None:
            if interval > 0:
                self._remember(workflow_id, now)
            return run
        if self._start_pending(workflow_id):
            return run  # its orchestration is still to be scheduled
        self.deps.run_store.update_run(
            workflow_id,
            RunUpdate(status=RunStatus.FAILED, reason_for_incompletion=reason, end_time=now),
            now,
        )
        with self._lock:
            self._going.pop(workflow_id, None)
        return reread()

    def _remember(self, workflow_id: str, now: int) -> None:
        with self._lock:
            self._going[workflow_id] = now
            self._going.move_to_end(workflow_id)
            while len(self._going) > self._remembered:
                self._going.popitem(last=False)
