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

import copy
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
    registered task definition. A SUB_WORKFLOW naming a registered child without a
    version runs the version that is the latest now, written into the snapshot's
    definition (Conductor's MetadataMapperService.populateVersionForSubWorkflow)."""
    parsed = definition or WorkflowDef.model_validate(definition_json)
    definition_json = _sub_workflow_versions_pinned(store, definition_json, parsed)
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


def _sub_workflow_versions_pinned(
    store: RunStore, definition_json: dict[str, Any], parsed: WorkflowDef
) -> dict[str, Any]:
    """``definition_json`` with the latest registered version written into each
    SUB_WORKFLOW's ``subWorkflowParam`` that names its child by a plain name, gives no
    version and no inline definition (a copy; the same object when there is none). A
    child not registered yet is left as it is: its version is the latest when the child
    is created, as before."""
    latest: dict[str, int | None] = {}
    pins: dict[str, int] = {}
    for location in parsed.walk():
        task, param = location.task, location.task.sub_workflow_param
        if (
            task.type != TaskType.SUB_WORKFLOW
            or param is None
            or param.version is not None
            or param.workflow_definition is not None
            or "${" in param.name
        ):
            continue
        if param.name not in latest:
            stamp = store.definition_stamp(param.name)  # the version, not the definition
            latest[param.name] = stamp[0] if stamp is not None else None
        version = latest[param.name]
        if version is not None:
            pins[task.task_reference_name] = version
    if not pins:
        return definition_json
    pinned = copy.deepcopy(definition_json)
    _pin_in(pinned.get("tasks"), pins)
    return pinned


def _pin_in(tasks: Any, pins: dict[str, int]) -> None:
    """Write ``pins`` (version by task reference) into the SUB_WORKFLOW tasks of a task
    list of a definition's JSON, nested lists included (as ``WorkflowTask.children``)."""
    if not isinstance(tasks, list):
        return
    for task in tasks:
        if not isinstance(task, dict):
            continue
        ref, param = task.get("taskReferenceName"), task.get("subWorkflowParam")
        if ref in pins and isinstance(param, dict):
            param["version"] = pins[ref]
        cases = task.get("decisionCases")
        for nested in cases.values() if isinstance(cases, dict) else ():
            _pin_in(nested, pins)
        _pin_in(task.get("defaultCase"), pins)
        for branch in task.get("forkTasks") or ():
            _pin_in(branch, pins)
        _pin_in(task.get("loopOver"), pins)


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
