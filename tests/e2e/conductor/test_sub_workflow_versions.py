"""Which version of a child a SUB_WORKFLOW without a version runs: the latest when the
parent starts (Conductor's MetadataMapperService.populateVersionForSubWorkflow writes it
into the run's definition), not the latest when the child is created; a version
registered between two starts is what the second start runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique

pytestmark = pytest.mark.timeout(120)


def _child(name: str, task_type: str, version: int) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "tasks": [{"name": task_type, "taskReferenceName": "work", "type": "SIMPLE"}],
        "outputParameters": {"version": f"v{version}"},
    }


def test_a_child_without_a_version_is_the_latest_when_the_parent_starts(
    conductor: Conductor,
) -> None:
    gate, work = unique("gate"), unique("child_work")
    parent, child = unique("pinning_parent"), unique("pinning_child")
    conductor.taskdefs({"name": gate}, {"name": work})
    conductor.register(
        _child(child, work, 1),
        {
            "name": parent,
            "version": 1,
            "tasks": [
                {"name": gate, "taskReferenceName": "gate", "type": "SIMPLE"},
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": child},
                },
            ],
            "outputParameters": {"childVersion": "${sub.output.version}"},
        },
    )
    before = conductor.start(parent)
    conductor.wait_tasks(before, 1)
    conductor.register(_child(child, work, 2))
    after = conductor.start(parent)
    conductor.wait_tasks(after, 1)

    # both children are created only now, after version 2 exists
    for _ in range(2):
        conductor.poll_and_complete(gate)
    for _ in range(2):
        conductor.poll_and_complete(work)
    runs = {i: conductor.wait_status(i, "COMPLETED") for i in (before, after)}
    assert runs[before]["output"] == {"childVersion": "v1"}
    assert runs[after]["output"] == {"childVersion": "v2"}
    for workflow_id, version in ((before, 1), (after, 2)):
        run = runs[workflow_id]
        (sub,) = [t for t in run["tasks"] if t["referenceTaskName"] == "sub"]
        assert sub["workflowTask"]["subWorkflowParam"]["version"] == version
        assert run["workflowDefinition"]["tasks"][1]["subWorkflowParam"]["version"] == version
        assert conductor.run(sub["subWorkflowId"])["workflowVersion"] == version
