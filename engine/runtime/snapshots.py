"""Definition snapshots: what a run executes, fixed when it starts.

A published ``name``/``version`` can be overwritten (Conductor's ``PUT
/api/metadata/workflow``), and task definitions can be re-registered. A run in flight
must replay exactly what it started with, in any engine process, at any later time. So
when a run starts, the definition and the task definitions it uses are stored once in
the payload store under the hash of their content (``definitions/<sha256>.json``,
immutable), and the run carries that reference; the interpreter builds its Decider from
the snapshot, never from the current registration.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from engine.language.definitions import WorkflowDef
from engine.ports.payload_store import PayloadStore
from engine.ports.run_store import RunStore
from protocol.payload_keys import definition_snapshot_key


class SnapshotError(LookupError):
    pass


def build_snapshot(store: RunStore, name: str, version: int) -> dict[str, Any]:
    """The definition and the registered task definitions it names."""
    record = store.get_definition(name, version)
    if record is None:
        raise SnapshotError(f"workflow definition {name!r} version {version} not found")
    definition = WorkflowDef.model_validate(record.definition)
    task_defs: dict[str, Any] = {}
    for location in definition.walk():
        task_name = location.task.name
        if task_name not in task_defs:
            td = store.get_task_def(task_name)
            if td is not None:
                task_defs[task_name] = td.definition
    return {"definition": record.definition, "taskDefs": task_defs}


def snapshot_key(snapshot: dict[str, Any]) -> str:
    canonical = json.dumps(snapshot, sort_keys=True, separators=(",", ":"))
    return definition_snapshot_key(hashlib.sha256(canonical.encode()).hexdigest())


def publish_snapshot(
    store: RunStore, payloads: PayloadStore | None, name: str, version: int
) -> str | None:
    """Store the snapshot of ``name``/``version`` (once per content) and return its
    reference; None without a payload store (the run then reads the registration).
    Raises :class:`SnapshotError` when the definition does not exist."""
    snapshot = build_snapshot(store, name, version)
    if payloads is None:
        return None
    key = snapshot_key(snapshot)
    if not payloads.exists(key):
        payloads.put(key, json.dumps(snapshot, sort_keys=True).encode(), "application/json")
    return key
