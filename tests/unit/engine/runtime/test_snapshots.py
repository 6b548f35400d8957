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


def _sub(ref: str, **param: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": param,
    }


def test_a_sub_workflow_without_a_version_runs_the_latest_at_the_start(tmp_path: Path) -> None:
    """Conductor's MetadataMapperService.populateVersionForSubWorkflow: a child named
    without a version is the latest registered when the run starts, written into the
    run's definition, wherever the SUB_WORKFLOW is nested; a child given a version, by
    an expression or inline, or not registered, is left as it is; the registration is
    not changed."""
    store = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    for version in (1, 2):
        store.put_definition("child", version, {"name": "child", "version": version}, 1)
    given = wf(
        _sub("plain", name="child"),
        _sub("pinned", name="child", version=1),
        _sub("named", name="${workflow.input.child}"),
        _sub("inline", name="child", workflowDefinition={"name": "child", "tasks": []}),
        _sub("unknown", name="nobody"),
        {
            "name": "fork",
            "taskReferenceName": "fork",
            "type": "FORK_JOIN",
            "forkTasks": [
                [
                    {
                        "name": "loop",
                        "taskReferenceName": "loop",
                        "type": "DO_WHILE",
                        "loopCondition": "false",
                        "loopOver": [_sub("in_loop", name="child")],
                    }
                ],
                [
                    {
                        "name": "switch",
                        "taskReferenceName": "switch",
                        "type": "SWITCH",
                        "evaluatorType": "value-param",
                        "expression": "x",
                        "decisionCases": {"a": [_sub("in_case", name="child")]},
                        "defaultCase": [_sub("in_default", name="child")],
                    }
                ],
            ],
        },
        {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": []},
    )
    snap = snapshot_of(store, given)

    def version_of(tasks: list[dict[str, Any]], ref: str) -> Any:
        for task in tasks:
            if task["taskReferenceName"] == ref:
                return task["subWorkflowParam"].get("version")
        raise AssertionError(ref)

    tasks = snap["definition"]["tasks"]
    assert version_of(tasks, "plain") == 2
    assert version_of(tasks, "pinned") == 1
    assert version_of(tasks, "named") is None
    assert version_of(tasks, "inline") is None
    assert version_of(tasks, "unknown") is None
    loop_branch, switch_branch = tasks[5]["forkTasks"]
    assert version_of(loop_branch[0]["loopOver"], "in_loop") == 2
    assert version_of(switch_branch[0]["decisionCases"]["a"], "in_case") == 2
    assert version_of(switch_branch[0]["defaultCase"], "in_default") == 2
    assert "version" not in given["tasks"][0]["subWorkflowParam"]  # the caller's is unchanged
