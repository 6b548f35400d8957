"""The definition a run executes, for its Conductor JSON: ``workflowDefinition`` of the
run and ``workflowTask`` of each task.

A run started with a snapshot (``engine.runtime.snapshots``) reads it from the payload
store; snapshots are immutable, so they are kept (a bounded number, least recently used
first out). A run without one reads its registration.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from control_plane.deps import Deps
from control_plane.services.wire import read_offloaded
from engine.language.definitions import TaskType, WorkflowDef, WorkflowTask, walk_tasks
from engine.ports.run_store import RunRecord, TaskRecord

__all__ = ["RunDefinition", "RunDefinitions", "forked_tasks"]

_ITERATION = re.compile(r"(__\d+)+$")


#: dynamic forks' rows whose forked tasks a definition keeps parsed (a run read renders
#: them on every read; a fork of thousands of tasks would be parsed again each time)
FORKS_KEPT = 256


@dataclass
class RunDefinition:
    definition: dict[str, Any]
    #: the WorkflowTask JSON of each reference name of the definition
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the forked WorkflowTask JSON of dynamic forks' rows read, by row (task id,
    #: attempt, update time), the least recently read first out
    _forked: OrderedDict[tuple[str, int, int], dict[str, dict[str, Any]]] = field(
        default_factory=OrderedDict, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def workflow_task(self, ref: str) -> dict[str, Any] | None:
        """The WorkflowTask of a task instance (``x__2``, iteration 2 of ``x``, is ``x``)."""
        found = self.tasks.get(ref)
        if found is None:
            found = self.tasks.get(_ITERATION.sub("", ref))
        return found

    def with_forked(self, rows: Iterable[TaskRecord]) -> RunDefinition:
        """This definition with the tasks the run's dynamic forks made
        (:func:`forked_tasks`), as Conductor's forked tasks carry their WorkflowTasks.
        Itself when the run forked none."""

        def dynamic_fork(ref: str) -> bool:
            own = self.workflow_task(ref)
            return own is not None and own.get("type") == TaskType.FORK_JOIN_DYNAMIC

        forked: dict[str, dict[str, Any]] = {}
        for row in rows:
            inputs = row.input_data
            if not isinstance(inputs, dict) or "forkedTaskDefs" not in inputs:
                continue
            key = (row.task_id, row.attempt, row.update_time or 0)
            with self._lock:
                made = self._forked.get(key)
                if made is not None:
                    self._forked.move_to_end(key)
            if made is None:
                made = {}
                for task in forked_tasks([row], dynamic_fork):
                    made.setdefault(
                        task.task_reference_name,
                        task.model_dump(mode="json", by_alias=True, exclude_none=True),
                    )
                with self._lock:
                    self._forked[key] = made
                    while len(self._forked) > FORKS_KEPT:
                        self._forked.popitem(last=False)
            for ref, task_json in made.items():
                forked.setdefault(ref, task_json)
        if not forked:
            return self
        return RunDefinition(self.definition, {**forked, **self.tasks})


def forked_tasks(
    rows: Iterable[TaskRecord], dynamic_fork: Callable[[str], bool]
) -> Iterator[WorkflowTask]:
    """The WorkflowTasks a run's dynamic forks made, nested ones included: each
    FORK_JOIN_DYNAMIC's row lists its forked tasks (``forkedTaskDefs``).
    ``dynamic_fork``: whether a definition's task reference is a FORK_JOIN_DYNAMIC (a
    row of another task whose input has that key is not one)."""
    for row in rows:
        inputs = row.input_data
        specs = inputs.get("forkedTaskDefs") if isinstance(inputs, dict) else None
        if not isinstance(specs, list) or not dynamic_fork(
            _ITERATION.sub("", row.reference_task_name)
        ):
            continue
        for spec in specs:
            try:
                parsed = WorkflowTask.model_validate(spec)
            except ValueError:
                continue
            for location in walk_tasks([parsed], "$", ()):
                yield location.task


def _index(definition_json: dict[str, Any]) -> RunDefinition:
    found = RunDefinition(definition_json)
    try:
        parsed = WorkflowDef.model_validate(definition_json)
    except ValueError:
        return found
    for location in parsed.walk():
        task = location.task
        found.tasks[task.task_reference_name] = task.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    return found


class RunDefinitions:
    def __init__(self, deps: Deps, size: int = 256) -> None:
        self.deps = deps
        self.size = size
        self._cache: OrderedDict[str, RunDefinition] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, run: RunRecord) -> RunDefinition | None:
        ref = run.definition_ref
        if ref:
            with self._lock:
                found = self._cache.get(ref)
                if found is not None:
                    self._cache.move_to_end(ref)
                    return found
            snapshot = read_offloaded(self.deps.payloads, ref, None)
            if isinstance(snapshot, dict) and isinstance(snapshot.get("definition"), dict):
                found = _index(snapshot["definition"])
                with self._lock:
                    self._cache[ref] = found
                    while len(self._cache) > self.size:
                        self._cache.popitem(last=False)
                return found
        record = self.deps.run_store.get_definition(run.name, run.version)
        return _index(record.definition) if record is not None else None
