"""Definition snapshots: the task definitions a run executes with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.adapters.run_store_sql import SqlRunStore
from engine.runtime.snapshots import snapshot_of


def wf(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"name": "wf", "version": 1, "tasks": list(tasks)}


def test_a_snapshot_names_the_registered_definitions_and_defaults_the_rest(
    tmp_path: Path,
) -> None:
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    store.put_task_def("known", {"name": "known", "retryCount": 0}, 1)
    store.put_task_def("other", {"name": "other", "retryCount": 1}, 1)
    snap = snapshot_of(
        store,
        wf(
            {"name": "known", "taskReferenceName": "a", "type": "SIMPLE"},
            {"name": "unknown", "taskReferenceName": "b", "type": "SIMPLE"},
        ),
    )
    assert set(snap["taskDefs"]) == {"known", "unknown"}
    assert snap["taskDefs"]["known"]["retryCount"] == 0
    assert snap["taskDefs"]["unknown"]["retryCount"] == 3  # Conductor's default TaskDef


def test_a_definition_making_tasks_while_it_runs_gets_every_registered_definition(
    tmp_path: Path,
) -> None:
    """Which types a FORK_JOIN_DYNAMIC or DYNAMIC runs is known only when it runs."""
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    store.put_task_def("forked", {"name": "forked", "retryCount": 0}, 1)
    snap = snapshot_of(
        store,
        wf(
            {
                "name": "dyn",
                "taskReferenceName": "dyn",
                "type": "DYNAMIC",
                "dynamicTaskNameParam": "t",
            }
        ),
    )
    assert snap["taskDefs"]["forked"]["retryCount"] == 0
