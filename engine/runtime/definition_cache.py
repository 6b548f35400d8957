"""Definitions, task definitions, Deciders and instruction texts, loaded once per process.

Orchestration code reads definitions only through this read-through cache, so replays are
deterministic: a run builds its Decider from its immutable definition snapshot
(:mod:`engine.runtime.snapshots`), and offloaded payloads are immutable too
(:mod:`engine.runtime.payload_cache`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from engine.decider import Decider
from engine.language.definitions import TaskDef, WorkflowDef
from engine.language.scripting import ScriptMemo
from engine.ports.payload_store import PayloadError
from engine.ports.run_store import RunStore
from engine.runtime.payload_cache import PayloadCache
from engine.runtime.run_limits import RunLimits
from engine.runtime.snapshots import SnapshotError, read_snapshot

__all__ = ["DefinitionCache", "DefinitionNotFound"]


class DefinitionNotFound(LookupError):
    pass


@dataclass
class DefinitionCache:
    """Deciders by definition snapshot (or by name and version for runs started without
    one), and instruction texts by name.

    A Decider built from the registration reads the task definitions when it is built;
    re-registering a task definition affects runs of definitions loaded afterwards, or
    after :meth:`invalidate`.
    """

    store: RunStore
    #: where snapshots and offloaded task outputs (read by expressions) come from
    payloads: PayloadCache
    #: limits the Deciders apply (the DO_WHILE iteration limit)
    limits: RunLimits = field(default_factory=RunLimits)
    #: the largest value computed in a run (the inline threshold); None: no limit
    max_value_bytes: int | None = None
    #: the memo of SWITCH and DO_WHILE scripts every Decider built here shares
    scripts: ScriptMemo = field(default_factory=ScriptMemo)
    _deciders: dict[tuple[str, int], Decider] = field(default_factory=dict)
    _by_snapshot: dict[str, Decider] = field(default_factory=dict)
    _instructions: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def decider(self, name: str, version: int) -> Decider:
        """The Decider of the current registration of ``name``/``version``."""
        key = (name, version)
        found = self._deciders.get(key)
        if found is not None:
            return found
        try:
            snapshot = read_snapshot(self.store, name, version)
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
        if snapshot_ref is None or self.payloads.store is None:
            return self.decider(name, version)
        found = self._by_snapshot.get(snapshot_ref)
        if found is None:
            try:
                snapshot = self.payloads.read(snapshot_ref)
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
        return Decider(
            definition,
            task_defs,
            payloads=self.payloads.read,
            max_loop_iterations=self.limits.max_loop_iterations,
            # values computed in a run are bounded by the inline threshold
            max_value_bytes=self.max_value_bytes,
            scripts=self.scripts,
        )

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
