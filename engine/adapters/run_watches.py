"""Readers waiting for a run to change, woken by the writes of this process.

A reader that waits for what a call caused (the first decision of a run just started,
the end of a run just terminated) would otherwise poll the run store. The run store
adapter tells a :class:`RunWatches` which runs each write transaction touched
(``touched``) and, once the transaction committed (``committed``), wakes the readers
watching those runs. A transaction that rolls back wakes nobody (``discarded``).

Only writes made through the same adapter object wake a reader: the embedded engine of
``stepway dev`` shares the control plane's run store, so its decisions wake the API's
readers at once; an engine in another process wakes nobody, and readers fall back to
re-reading the store after their timeout.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Watch:
    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def wait(self, timeout: float) -> bool:
        fired = self._event.wait(timeout)
        # cleared before the caller re-reads: a write committed after this wakes the
        # next wait, one committed before it is in what the caller reads next
        self._event.clear()
        return fired


class RunWatches:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, set[threading.Event]] = {}
        # the runs the current transaction of each thread touched
        self._pending = threading.local()

    def touched(self, workflow_id: str) -> None:
        """The current transaction of this thread writes to ``workflow_id``."""
        ids: set[str] | None = getattr(self._pending, "ids", None)
        if ids is None:
            ids = self._pending.ids = set()
        ids.add(workflow_id)

    def committed(self) -> None:
        """This thread's transaction committed: wake the readers of the runs it touched."""
        ids: set[str] | None = getattr(self._pending, "ids", None)
        if not ids:
            return
        self._pending.ids = None
        if not self._events:  # nobody waits (the usual case): no lock taken
            return
        with self._lock:
            for workflow_id in ids:
                for event in self._events.get(workflow_id, ()):
                    event.set()

    def discarded(self) -> None:
        """This thread's transaction rolled back: what it touched did not change."""
        self._pending.ids = None

    @contextmanager
    def watch(self, workflow_id: str) -> Iterator[_Watch]:
        event = threading.Event()
        with self._lock:
            self._events.setdefault(workflow_id, set()).add(event)
        try:
            yield _Watch(event)
        finally:
            with self._lock:
                waiting = self._events.get(workflow_id)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._events[workflow_id]
