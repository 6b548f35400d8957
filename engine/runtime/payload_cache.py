"""Offloaded JSON payloads read by the engine, kept in memory per process.

References name immutable objects (a payload is written once under its reference and
never changes), so a value read once is the value every replay in every process sees:
reading through this cache is as deterministic as the orchestration must be.
"""

from __future__ import annotations

import threading
from typing import Any

from engine.ports.payload_store import PayloadStore
from protocol.limits import loads_limited

__all__ = ["PAYLOAD_CACHE_ENTRIES", "PayloadCache"]

#: offloaded payloads kept in memory per process (oldest dropped first)
PAYLOAD_CACHE_ENTRIES = 256


class PayloadCache:
    def __init__(self, store: PayloadStore | None, entries: int = PAYLOAD_CACHE_ENTRIES) -> None:
        self.store = store
        self.entries = entries
        self._values: dict[str, Any] = {}
        self._lock = threading.Lock()

    def read(self, reference: str) -> Any:
        """The JSON value stored under ``reference``."""
        with self._lock:
            if reference in self._values:
                return self._values[reference]
        if self.store is None:
            raise RuntimeError(f"payload {reference!r} is offloaded but no payload store is set")
        # a payload is JSON a worker or an outside service may have written: bounded depth
        value = loads_limited(self.store.get(reference), what=f"payload {reference!r}")
        with self._lock:
            self._values[reference] = value
            while len(self._values) > self.entries:
                self._values.pop(next(iter(self._values)))
        return value
