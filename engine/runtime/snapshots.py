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

from engine.language.definitions import TaskDef, TaskType, WorkflowDef
from engine.ports.payload_store import PayloadStore
from engine.ports.run_store import DefinitionRecord, RunStore
from protocol.payload_keys import definition_snapshot_key

__all__ = [
    "SnapshotError",
    "build_snapshot",
    "publish_snapshot",
    "publish_snapshot_of",
    "read_definition",
    "read_snapshot",
    "snapshot_key",
    "snapshot_of",
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
    """The definition of ``record`` and the task definitions it names
    (``definition``: ``record`` already parsed, if the caller has it); see
    :func:`snapshot_of`."""
    return snapshot_of(store, record.definition, definition)


def snapshot_of(
    store: RunStore, definition_json: dict[str, Any], definition: WorkflowDef | None = None
) -> dict[str, Any]:
    """A definition (registered or given inline) with the task definitions its tasks
    name: the registered ones, and for a WORKER task with neither a registered nor an
    inline ``taskDefinition`` Conductor's default (``new TaskDef(name)``, as Conductor's
    MetadataMapperService populates it: 3 retries, FIXED 60 s, response timeout 3600 s,
    TIME_OUT_WF). A definition with FORK_JOIN_DYNAMIC or DYNAMIC tasks gets every
    registered task definition."""
    parsed = definition or WorkflowDef.model_validate(definition_json)
    task_defs: dict[str, Any] = {}
    dynamic = (TaskType.FORK_JOIN_DYNAMIC, TaskType.DYNAMIC)
    if any(location.task.type in dynamic for location in parsed.walk()):
        # the task types it runs are known only when it runs: every registered one, as
        # registered when the run starts (Conductor reads them when it schedules the task)
        for record in store.list_task_defs():
            task_defs[record.name] = record.definition
    for location in parsed.walk():
        task = location.task
        if task.name in task_defs:
            continue
        td = store.get_task_def(task.name)
        if td is not None:
            task_defs[task.name] = td.definition
        elif task.type == TaskType.WORKER and task.task_definition is None:
            task_defs[task.name] = TaskDef(name=task.name).to_json_dict()
    return {"definition": definition_json, "taskDefs": task_defs}


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
    return publish_snapshot_of(store, payloads, record.definition, definition)


def publish_snapshot_of(
    store: RunStore,
    payloads: PayloadStore | None,
    definition_json: dict[str, Any],
    definition: WorkflowDef | None = None,
) -> str | None:
    """Store the snapshot of a definition, registered or not (one given inline in a
    start request or a SUB_WORKFLOW's ``workflowDefinition``), and return its reference;
    None without a payload store."""
    if payloads is None:
        return None
    snapshot = snapshot_of(store, definition_json, definition)
    key = snapshot_key(snapshot)
    if not payloads.exists(key):
        payloads.put(key, json.dumps(snapshot, sort_keys=True).encode(), "application/json")
    return key
