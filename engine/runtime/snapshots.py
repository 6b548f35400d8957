"""Definition snapshots: what a run executes, fixed when it starts.

A published ``name``/``version`` can be overwritten (Conductor's ``PUT
/api/metadata/workflow``), and task definitions can be re-registered. A run in flight
must replay exactly what it started with, in any engine process, at any later time. So
when a run starts, the definition and the task definitions it uses are stored once in
the payload store under the hash of their content (``definitions/<sha256>.json``,
immutable), and the run carries that reference; the interpreter builds its Decider from
the snapshot, never from the current registration.

Whoever starts a run has read the definition already (to check the input, to learn the
latest version): the snapshot is built from that record, so a start reads the
definition once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from engine.language.definitions import WorkflowDef
from engine.ports.payload_store import PayloadStore
from engine.ports.run_store import DefinitionRecord, RunStore
from protocol.payload_keys import definition_snapshot_key

__all__ = [
    "SnapshotError",
    "build_snapshot",
    "publish_snapshot",
    "read_definition",
    "read_snapshot",
    "snapshot_key",
]


class SnapshotError(LookupError):
    pass


def read_definition(store: RunStore, name: str, version: int | None) -> DefinitionRecord:
    """The registered definition (the latest version when ``version`` is None)."""
    record = store.get_definition(name, version)
    if record is None:
        which = f" version {version}" if version is not None else ""
        raise SnapshotError(f"workflow definition {name!r}{which} not found")
    return record


def build_snapshot(
    store: RunStore, record: DefinitionRecord, definition: WorkflowDef | None = None
) -> dict[str, Any]:
    """The definition of ``record`` and the registered task definitions it names
    (``definition``: ``record`` already parsed, if the caller has it)."""
    parsed = definition or WorkflowDef.model_validate(record.definition)
    task_defs: dict[str, Any] = {}
    for location in parsed.walk():
        task_name = location.task.name
        if task_name not in task_defs:
            td = store.get_task_def(task_name)
            if td is not None:
                task_defs[task_name] = td.definition
    return {"definition": record.definition, "taskDefs": task_defs}


def read_snapshot(store: RunStore, name: str, version: int) -> dict[str, Any]:
    """The snapshot of the current registration of ``name``/``version``."""
    return build_snapshot(store, read_definition(store, name, version))


def snapshot_key(snapshot: dict[str, Any]) -> str:
    canonical = json.dumps(snapshot, sort_keys=True, separators=(",", ":"))
    return definition_snapshot_key(hashlib.sha256(canonical.encode()).hexdigest())


def publish_snapshot(
    store: RunStore,
    payloads: PayloadStore | None,
    record: DefinitionRecord,
    definition: WorkflowDef | None = None,
) -> str | None:
    """Store the snapshot of ``record`` (once per content) and return its reference;
    None without a payload store (the run then reads the registration)."""
    if payloads is None:
        return None
    snapshot = build_snapshot(store, record, definition)
    key = snapshot_key(snapshot)
    if not payloads.exists(key):
        payloads.put(key, json.dumps(snapshot, sort_keys=True).encode(), "application/json")
    return key
