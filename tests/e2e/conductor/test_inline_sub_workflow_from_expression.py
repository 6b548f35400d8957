"""conductor-oss's test-harness ``InlineSubWorkflowFromExpressionSpec``: a SUB_WORKFLOW
whose ``subWorkflowParam.workflowDefinition`` is the text ``${wf_builder.output.result}``
runs the definition an earlier worker task returned (Conductor's SubWorkflowTaskMapper
resolves it against the run), unregistered: a DO_WHILE of an INLINE and a javascript
SWITCH whose ``true`` case is a worker task and whose default is an INLINE, then an INLINE
summary mapped to the child's output, which flows back to the parent.

With ``iterations`` 2 and ``threshold`` 5: iteration 1 computes 5 (not above 5: the
INLINE branch, no worker), iteration 2 computes 10 (the worker branch, ``category``
``high``); the child outputs ``loopsDone`` 2 and ``allDone`` true, and so does the
parent."""

from __future__ import annotations

from tests.e2e.conductor.harness import Conductor, unique
from tests.e2e.conductor.sub_workflow_shapes import complex_dynamic_plan_wf


def test_a_sub_workflow_definition_from_an_expression_runs(conductor: Conductor) -> None:
    task_type, parent = unique("integration_task_1"), unique("inline_subwf_expr_parent")
    conductor.register(
        {
            "name": parent,
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": "test@harness.com",
            "inputParameters": ["iterations", "threshold"],
            "tasks": [
                {
                    "name": task_type,
                    "taskReferenceName": "wf_builder",
                    "type": "SIMPLE",
                    "inputParameters": {
                        "tp1": "${workflow.input.threshold}",
                        "tp2": "${workflow.input.iterations}",
                    },
                },
                {
                    "name": "exec_plan",
                    "taskReferenceName": "exec",
                    "type": "SUB_WORKFLOW",
                    "inputParameters": {
                        "threshold": "${workflow.input.threshold}",
                        "iterations": "${workflow.input.iterations}",
                    },
                    "subWorkflowParam": {
                        "name": "complex_dynamic_plan_wf",
                        "version": 1,
                        "workflowDefinition": "${wf_builder.output.result}",
                    },
                },
            ],
            "outputParameters": {
                "loopsDone": "${exec.output.loopsDone}",
                "allDone": "${exec.output.allDone}",
            },
        }
    )
    workflow_id = conductor.start(parent, {"iterations": 2, "threshold": 5})
    run = conductor.wait_tasks(workflow_id, 1)
    assert [(t["referenceTaskName"], t["status"]) for t in run["tasks"]] == [
        ("wf_builder", "SCHEDULED")
    ]
    conductor.poll_and_complete(
        task_type, {"result": complex_dynamic_plan_wf(task_type)}, "test.builder.worker"
    )

    run = conductor.wait_task(workflow_id, "exec", "IN_PROGRESS")
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [
        (task_type, "COMPLETED"),
        ("SUB_WORKFLOW", "IN_PROGRESS"),
    ]
    child_id = run["tasks"][1]["subWorkflowId"]
    child = conductor.wait(
        child_id, lambda r: any(t["referenceTaskName"] == "high_task__2" for t in r["tasks"])
    )
    assert child["status"] == "RUNNING"
    assert child["workflowName"] == "complex_dynamic_plan_wf"
    # the child's input is the task's inputParameters (Conductor's workflowInput), not
    # the keys naming the child the task's input carries besides
    # conductor-oss's SubWorkflow.start marks a child of a given definition dynamic
    assert child["input"] == {
        "threshold": 5,
        "iterations": 2,
        "_systemMetadata": {"dynamic": True},
    }
    assert run["tasks"][1]["inputData"]["subWorkflowName"] == "complex_dynamic_plan_wf"
    high = [t for t in child["tasks"] if t["taskType"] == task_type]
    assert [(t["status"], t["inputData"]["category"]) for t in high] == [("SCHEDULED", "high")]
    # iteration 1 took the INLINE branch: 1 x 5 is not above 5
    low = [t for t in child["tasks"] if t["referenceTaskName"] == "low_result__1"]
    assert [t["outputData"]["result"] for t in low] == [{"label": "low", "product": 5}]

    polled = conductor.poll_one(task_type, "test.high.worker")
    assert polled["inputData"]["product"] == 10
    conductor.complete(polled, {"label": "high", "done": True})

    child = conductor.wait_status(child_id, "COMPLETED")
    assert child["status"] == "COMPLETED", child.get("reasonForIncompletion")
    assert child["output"] == {"loopsDone": 2, "allDone": True}
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run.get("reasonForIncompletion")
    assert run["tasks"][1]["status"] == "COMPLETED"
    assert run["output"] == {"loopsDone": 2, "allDone": True}
