"""engine.language.recursion: definitions that can start themselves are found, with the
chain that leads back, among the registered definitions and the new ones."""

from __future__ import annotations

from typing import Any

from engine.language.definitions import WorkflowDef
from engine.language.recursion import recursion_issues, started_workflows


def sub(ref: str, name: str) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": name},
    }


def start(ref: str, name: str) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "START_WORKFLOW",
        "inputParameters": {"startWorkflow": {"name": name, "input": {}}},
    }


def wf(name: str, *tasks: dict[str, Any], version: int = 1) -> WorkflowDef:
    return WorkflowDef.model_validate({"name": name, "version": version, "tasks": list(tasks)})


def test_a_definition_that_names_itself_is_found_at_the_task_that_does() -> None:
    issues = recursion_issues([wf("a", sub("x", "other"), sub("y", "a"))], {})
    assert list(issues) == [0]
    (issue,) = issues[0]
    assert issue.path == "$.tasks[1].subWorkflowParam.name"
    assert issue.message == (
        "workflow 'a' can start itself (a -> a); a definition must not reach itself through "
        "SUB_WORKFLOW or START_WORKFLOW tasks"
    )


def test_a_chain_through_registered_definitions_is_found() -> None:
    registered = {"b": [wf("b", sub("c", "c"))], "c": [wf("c", start("s", "a"))]}
    issues = recursion_issues([wf("a", sub("b", "b"))], registered)
    assert "a -> b -> c -> a" in issues[0][0].message


def test_any_registered_version_counts() -> None:
    registered = {"b": [wf("b", version=1), wf("b", sub("back", "a"), version=2)]}
    assert recursion_issues([wf("a", sub("b", "b"))], registered)


def test_nested_tasks_and_start_workflow_are_followed() -> None:
    loop = {
        "name": "loop",
        "taskReferenceName": "loop",
        "type": "DO_WHILE",
        "loopCondition": "false",
        "loopOver": [start("again", "a")],
    }
    issues = recursion_issues([wf("a", loop)], {})
    assert issues[0][0].path == "$.tasks[0].loopOver[0].inputParameters.startWorkflow.name"


def test_chains_without_a_loop_and_names_given_by_expressions_pass() -> None:
    registered = {"b": [wf("b", sub("c", "c"))], "c": [wf("c")]}
    assert recursion_issues([wf("a", sub("b", "b"))], registered) == {}
    dynamic = wf("a", start("s", "${workflow.input.next}"))
    assert started_workflows(dynamic) == []
    assert recursion_issues([dynamic], {}) == {}


def test_two_new_definitions_that_start_each_other_are_both_refused() -> None:
    issues = recursion_issues([wf("a", sub("b", "b")), wf("b", sub("a", "a"))], {})
    assert sorted(issues) == [0, 1]
