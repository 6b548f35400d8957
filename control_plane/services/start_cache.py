"""What starting a run can reuse: the parsed definition of a registration, the
validator of its ``inputSchema`` and the reference of its snapshot.

A start still asks the run store which registration is current (a registration
overwritten a moment ago is what the next start runs), but only for its version and
``update_time`` (``RunStore.definition_stamp``); it reads and decodes the definition, parses
it and builds, hashes and stores its snapshot (``engine.runtime.snapshots``) only once per
registration: the entries are keyed by the row's ``update_time``. The snapshot also
holds the task definitions the workflow names; its reference is reused for
``taskdef_cache_seconds`` at most, and not at all after a task definition was registered
through this process (``TaskDefCache.generation``), the same freshness the Task API gives
task definitions.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import jsonschema

from control_plane.deps import Deps, Settings
from control_plane.services.stamp_reads import Stamp
from control_plane.services.task_support import TaskDefCache
from engine.language.definitions import WorkflowDef, schema_document
from engine.ports.run_store import DefinitionRecord
from engine.runtime.snapshots import publish_snapshot

#: registrations remembered (least recently used first out)
_ENTRIES = 256

_Key = tuple[str, int, int]


def input_validator(wf: WorkflowDef) -> jsonschema.Draft202012Validator | None:
    """The validator of a run's input, None when the workflow has no input schema."""
    schema = schema_document(wf.input_schema)
    return jsonschema.Draft202012Validator(schema) if schema else None


class StartCache:
    def __init__(self, settings: Settings, deps: Deps, taskdefs: TaskDefCache) -> None:
        self.settings = settings
        self.deps = deps
        self.taskdefs = taskdefs
        self._parsed: OrderedDict[_Key, WorkflowDef] = OrderedDict()
        self._records: OrderedDict[_Key, DefinitionRecord] = OrderedDict()
        self._snapshots: OrderedDict[_Key, tuple[float, int, str | None]] = OrderedDict()
        self._validators: OrderedDict[_Key, jsonschema.Draft202012Validator | None] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(record: DefinitionRecord) -> _Key:
        return record.name, record.version, record.update_time

    def record(self, name: str, version: int | None, stamp: Stamp) -> DefinitionRecord | None:
        """The current registration of ``name`` (its latest version when ``version`` is
        None), of which ``stamp`` is what the run store said is current
        (``definition_stamp``; None: there is none): read whole only when its
        ``update_time`` is not the one remembered."""
        store = self.deps.run_store
        if stamp is None:
            return None
        key = (name, *stamp)
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                self._records.move_to_end(key)
                return record
        record = store.get_definition(name, stamp[0])
        if record is None:
            return None  # deleted in between
        with self._lock:
            self._records[self._key(record)] = record
            if len(self._records) > _ENTRIES:
                self._records.popitem(last=False)
        return record

    def parsed(self, record: DefinitionRecord) -> WorkflowDef:
        key = self._key(record)
        with self._lock:
            wf = self._parsed.get(key)
            if wf is not None:
                self._parsed.move_to_end(key)
                return wf
        wf = WorkflowDef.model_validate(record.definition)
        with self._lock:
            self._parsed[key] = wf
            if len(self._parsed) > _ENTRIES:
                self._parsed.popitem(last=False)
        return wf

    def validator(
        self, record: DefinitionRecord, wf: WorkflowDef
    ) -> jsonschema.Draft202012Validator | None:
        """``input_validator`` of the registration, built once."""
        key = self._key(record)
        with self._lock:
            if key in self._validators:
                self._validators.move_to_end(key)
                return self._validators[key]
        validator = input_validator(wf)
        with self._lock:
            self._validators[key] = validator
            if len(self._validators) > _ENTRIES:
                self._validators.popitem(last=False)
        return validator

    def snapshot(self, record: DefinitionRecord, wf: WorkflowDef) -> str | None:
        """The reference of the snapshot a run of ``record`` starts with."""
        key, now, generation = self._key(record), time.monotonic(), self.taskdefs.generation
        with self._lock:
            cached = self._snapshots.get(key)
        if (
            cached is not None
            and cached[1] == generation
            and now - cached[0] < self.settings.taskdef_cache_seconds
        ):
            return cached[2]
        ref = publish_snapshot(self.deps.run_store, self.deps.payloads, record, wf)
        with self._lock:
            self._snapshots[key] = (now, generation, ref)
            self._snapshots.move_to_end(key)
            if len(self._snapshots) > _ENTRIES:
                self._snapshots.popitem(last=False)
        return ref
