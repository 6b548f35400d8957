"""Definitions, task definitions, Deciders and instruction texts, loaded once per process.

Orchestration code reads definitions only through this read-through cache, so replays are
deterministic: a run builds its Decider from its immutable definition snapshot
(:mod:`engine.runtime.snapshots`), and offloaded payloads are immutable too.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from engine.decider import Decider
from engine.language.definitions import TaskDef, WorkflowDef
from engine.ports.payload_store import PayloadError, PayloadStore
from engine.ports.run_store import RunStore
from engine.runtime.snapshots import SnapshotError, build_snapshot

__all__ = ["PAYLOAD_CACHE_ENTRIES", "DefinitionCache", "DefinitionNotFound"]

#: offloaded payloads kept in memory per process (oldest dropped first)
PAYLOAD_CACHE_ENTRIES = 256


class DefinitionNotFound(LookupError):
    pass


@dataclass
class DefinitionCache:
    """Definitions, task definitions, Deciders and instruction texts, loaded once per process.

    Keyed by name and version; task definitions are read when a definition is first loaded
    and kept with its Decider (re-registering a task definition affects runs of definitions
    loaded afterwards, or after :meth:`invalidate`).
    """

    store: RunStore
    #: where offloaded task outputs are read from when an expression references them
    payloads: PayloadStore | None = None
    _deciders: dict[tuple[str, int], Decider] = field(default_factory=dict)
    _by_snapshot: dict[str, Decider] = field(default_factory=dict)
    _instructions: dict[str, str] = field(default_factory=dict)
    _payload_cache: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def decider(self, name: str, version: int) -> Decider:
        """The Decider of the current registration of ``name``/``version``."""
        key = (name, version)
        found = self._deciders.get(key)
        if found is not None:
            return found
        try:
            snapshot = build_snapshot(self.store, name, version)
        except SnapshotError as exc:
            raise DefinitionNotFound(str(exc)) from None
        decider = self._build(snapshot)
        with self._lock:
            self._deciders.setdefault(key, decider)
        return self._deciders[key]

    def decider_for(self, name: str, version: int, snapshot_ref: str | None) -> Decider:
        """The Decider a run executes: built from the snapshot taken when it started
        (immutable, so every replay in every process sees the same definition), or from
        the registration for runs started without one."""
        if snapshot_ref is None or self.payloads is None:
            return self.decider(name, version)
        found = self._by_snapshot.get(snapshot_ref)
        if found is None:
            try:
                snapshot = self.load_payload(snapshot_ref)
            except PayloadError as exc:
                raise DefinitionNotFound(
                    f"definition snapshot {snapshot_ref!r} of {name!r} v{version}: {exc}"
                ) from None
            with self._lock:
                found = self._by_snapshot.setdefault(snapshot_ref, self._build(snapshot))
        return found

    def _build(self, snapshot: dict[str, Any]) -> Decider:
        definition = WorkflowDef.model_validate(snapshot["definition"])
        task_defs = {
            name: TaskDef.model_validate(data)
            for name, data in (snapshot.get("taskDefs") or {}).items()
        }
        return Decider(definition, task_defs, payloads=self.load_payload)

    def load_payload(self, reference: str) -> Any:
        """An offloaded JSON payload. References name immutable objects, so the value is
        cached for the life of the process (bounded) and every replay sees the same one."""
        with self._lock:
            if reference in self._payload_cache:
                return self._payload_cache[reference]
        if self.payloads is None:
            raise RuntimeError(f"payload {reference!r} is offloaded but no payload store is set")
        value = json.loads(self.payloads.get(reference))
        with self._lock:
            self._payload_cache[reference] = value
            while len(self._payload_cache) > PAYLOAD_CACHE_ENTRIES:
                self._payload_cache.pop(next(iter(self._payload_cache)))
        return value

    def latest_version(self, name: str) -> int:
        record = self.store.get_definition(name, None)
        if record is None:
            raise DefinitionNotFound(f"workflow definition {name!r} not found")
        return record.version

    def instruction(self, name: str) -> str | None:
        text = self._instructions.get(name)
        if text is None:
            record = self.store.get_instruction(name)
            if record is None:
                return None
            text = record.text
            self._instructions[name] = text
        return text

    def invalidate(self, name: str | None = None) -> None:
        with self._lock:
            if name is None:
                self._deciders.clear()
                self._instructions.clear()
            else:
                for key in [k for k in self._deciders if k[0] == name]:
                    del self._deciders[key]
