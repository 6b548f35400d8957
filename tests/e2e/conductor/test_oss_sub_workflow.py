"""conductor-oss's e2e ``SubWorkflowTimeoutRetryTests`` and ``SubWorkflowVersionTests``
(``e2e/src/test/java/io/conductor/e2e/control/``) over HTTP against Stepway
(``SubWorkflowTests``: ``test_oss_sub_workflow_domains.py``; ``SubWorkflowInlineTests``:
``test_oss_sub_workflow_inline.py``).

The Java tests complete tasks with ``TaskClient.updateTask`` from the run's task ids
(nobody polls them); so do these. Names and task types are the tests' own (``unique``);
the resource's JSON (``metadata/sub_workflow_tests.json``) is written out below with those
names, leaving out the fields that hold their defaults."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, simple, unique, workflow

OWNER = "test@conductor.io"


def _update(
    conductor: Conductor,
    workflow_id: str,
    task_id: str,
    status: str = "COMPLETED",
    output: dict[str, Any] | None = None,
) -> Any:
    """``TaskClient.updateTask(TaskResult)`` for a task id read from the run (the Java
    tests answer tasks nobody polled)."""
    return conductor.update({"workflowInstanceId": workflow_id, "taskId": task_id}, status, output)


def _first_task_id(conductor: Conductor, workflow_id: str) -> str:
    """The Java tests' ``awaitFirstTaskId``."""
    run = conductor.wait_tasks(workflow_id, 1)
    assert run["tasks"], run["status"]
    task_id: str = run["tasks"][0]["taskId"]
    return task_id


def _sub_workflow_id(conductor: Conductor, workflow_id: str, index: int = 0) -> str:
    """The Java tests' ``awaitSubWorkflowId``: ``tasks[index].subWorkflowId`` once set."""
    run = conductor.wait(
        workflow_id,
        lambda r: len(r["tasks"]) > index and bool(r["tasks"][index].get("subWorkflowId")),
    )
    child: str = run["tasks"][index].get("subWorkflowId")
    assert child, [(t["taskType"], t["status"]) for t in run["tasks"]]
    return child


# --- SubWorkflowTimeoutRetryTests ------------------------------------------------------


def test_sub_workflow_timeout_then_retry_of_the_child(conductor: Conductor) -> None:
    # SubWorkflowTimeoutRetryTests.test: metadata/sub_workflow_tests.json's
    # integration_test_wf_with_sub_wf (timeoutSeconds 5, TIME_OUT_WF) and sub_workflow
    # (integration_test_wf, registered there too, is not used by the test: left out)
    task1, inner = unique("integration_task_1"), unique("simple_task_in_sub_wf")
    child, parent = unique("sub_workflow"), unique("integration_test_wf_with_sub_wf")
    conductor.register(
        workflow(
            child,
            [simple(inner, "t1")],
            ownerEmail=OWNER,
            timeoutPolicy="ALERT_ONLY",
            timeoutSeconds=0,
        ),
        workflow(
            parent,
            [
                simple(
                    task1,
                    "t1",
                    p1="${workflow.input.param1}",
                    p2="${workflow.input.param2}",
                    someNullKey=None,
                ),
                {
                    "name": "sub_workflow_task",
                    "taskReferenceName": "t2",
                    "type": "SUB_WORKFLOW",
                    "inputParameters": {
                        "param1": "${workflow.input.param1}",
                        "param2": "${workflow.input.param2}",
                        "subwf": "${workflow.input.nextSubwf}",
                    },
                    "subWorkflowParam": {"name": "${workflow.input.subwf}", "version": 1},
                    "retryCount": 0,
                },
            ],
            inputParameters=["param1", "param2"],
            failureWorkflow="$workflow.input.failureWfName",
            ownerEmail=OWNER,
            timeoutPolicy="TIME_OUT_WF",
            timeoutSeconds=5,
        ),
    )
    workflow_id = conductor.start(
        parent,
        {"param1": "p1 value", "subwf": child},
        version=1,
        correlation_id="wf_with_subwf_test_1",
    )
    # pollAndCompleteTask: the run's integration_task_1 answered COMPLETED, unpolled
    run = conductor.wait_tasks(workflow_id, 1)
    t1 = next(t for t in run["tasks"] if t["taskDefName"] == task1)
    r = _update(conductor, workflow_id, t1["taskId"], output={})
    assert r.status_code == 200, r.text

    run = conductor.wait_task(workflow_id, "t2", "IN_PROGRESS", seconds=10)
    assert len(run["tasks"]) == 2
    assert run["tasks"][0]["status"] == "COMPLETED"
    assert run["tasks"][1]["taskType"] == "SUB_WORKFLOW"
    assert run["tasks"][1]["status"] == "IN_PROGRESS"
    sub_workflow_id = run["tasks"][1]["subWorkflowId"]
    assert sub_workflow_id
    assert conductor.run(sub_workflow_id)["status"] == "RUNNING"

    # the Java test sleeps 7 s (> the 5 s timeout), then calls the decider
    r = conductor.http.put(f"/api/workflow/decide/{workflow_id}")
    assert r.status_code < 300, r.text
    run = conductor.wait_status(workflow_id, "TIMED_OUT")
    assert len(run["tasks"]) == 2
    assert run["status"] == "TIMED_OUT"
    assert run["tasks"][0]["status"] == "COMPLETED"
    assert run["tasks"][1]["status"] == "CANCELED"
    # the sub-workflow is terminated
    assert conductor.wait_status(sub_workflow_id, "TERMINATED")["status"] == "TERMINATED"

    # retryLastFailedTask(subWorkflowId): the child is RUNNING, its canceled task retried
    r = conductor.http.post(f"/api/workflow/{sub_workflow_id}/retry")
    assert r.status_code < 300, r.text
    sub = conductor.wait_tasks(sub_workflow_id, 2)
    assert sub["status"] == "RUNNING"
    assert sub["tasks"][0]["status"] == "CANCELED"
    assert sub["tasks"][1]["status"] == "SCHEDULED"


# --- SubWorkflowVersionTests -----------------------------------------------------------


def _register_workflow_with_sub_workflow_def(
    conductor: Conductor, parent: str, child: str, task_name: str
) -> None:
    """RegistrationUtil.registerWorkflowWithSubWorkflowDef: the parent (one SUB_WORKFLOW
    of ``child`` version 1, priority 12) registered before the child (one SIMPLE task),
    then the task definitions (retryCount 0)."""
    task_def = {"name": task_name, "retryCount": 0, "ownerEmail": OWNER}
    sub_def = {"name": child, "retryCount": 0, "ownerEmail": OWNER}
    conductor.register(
        workflow(
            parent,
            [
                {
                    "name": child,
                    "taskReferenceName": child,
                    "type": "SUB_WORKFLOW",
                    "taskDefinition": sub_def,
                    "subWorkflowParam": {"name": child, "version": 1, "priority": 12},
                    "inputParameters": {"subWorkflowName": child, "subWorkflowVersion": "1"},
                }
            ],
            inputParameters=["value", "inlineValue"],
            description="Workflow to test retry",
            timeoutSeconds=600,
            timeoutPolicy="TIME_OUT_WF",
            ownerEmail=OWNER,
        )
    )
    conductor.register(
        workflow(
            child,
            [
                {
                    **simple(task_name, task_name, evaluatorType="graaljs", expression="true;"),
                    "taskDefinition": task_def,
                }
            ],
            inputParameters=["value", "inlineValue"],
            description="Sub Workflow to test retry",
            timeoutSeconds=600,
            timeoutPolicy="TIME_OUT_WF",
            ownerEmail=OWNER,
        )
    )
    conductor.taskdefs(task_def, sub_def)


def _definition(conductor: Conductor, name: str, version: int | None = None) -> dict[str, Any]:
    params = {"version": version} if version is not None else {}
    r = conductor.http.get(f"/api/metadata/workflow/{name}", params=params)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def test_sub_workflow_null_version(conductor: Conductor) -> None:
    # SubWorkflowVersionTests.testSubWorkflowNullVersion (Jackson leaves a null out)
    task_name, parent, child = unique("T"), unique("P"), unique("S")
    _register_workflow_with_sub_workflow_def(conductor, parent, child, task_name)
    definition = _definition(conductor, parent, 1)
    definition["tasks"][0]["subWorkflowParam"].pop("version", None)
    conductor.register(definition)

    workflow_id = conductor.start(parent, version=1)
    sub_workflow_id = _sub_workflow_id(conductor, workflow_id)
    r = _update(conductor, sub_workflow_id, _first_task_id(conductor, sub_workflow_id))
    assert r.status_code == 200, r.text
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"


def test_sub_workflow_empty_version(conductor: Conductor) -> None:
    # SubWorkflowVersionTests.testSubWorkflowEmptyVersion
    task_name, parent, child = unique("T"), unique("P"), unique("S")
    _register_workflow_with_sub_workflow_def(conductor, parent, child, task_name)
    definition = _definition(conductor, parent, 1)
    child_def = _definition(conductor, child)  # getWorkflowDef(name, null): the latest
    conductor.register({**child_def, "version": 1})
    conductor.register({**child_def, "version": 2})
    # a new SubWorkflowParams with only the name
    definition["tasks"][0]["subWorkflowParam"] = {"name": child}
    conductor.register(definition)

    workflow_id = conductor.start(parent, version=1)
    sub_workflow_id = _sub_workflow_id(conductor, workflow_id)
    r = _update(conductor, sub_workflow_id, _first_task_id(conductor, sub_workflow_id))
    assert r.status_code == 200, r.text
    # the sub-workflow ran the latest version
    run = conductor.wait_status(workflow_id, "COMPLETED", seconds=10)
    assert run["status"] == "COMPLETED"
    assert run["tasks"][0]["workflowTask"]["subWorkflowParam"].get("version") == 2


@pytest.mark.parametrize(
    "fork_task_def",
    [
        pytest.param("dt1", id="as_java"),
        pytest.param("dynamicFork", id="fork_task_def_named_after_the_fork"),
    ],
)
def test_dynamic_sub_workflow(conductor: Conductor, fork_task_def: str) -> None:
    # SubWorkflowVersionTests.testDynamicSubWorkflow. "as_java" registers the fork with
    # the Java test's taskDefinition (dt1's); the second case names it after the fork, so
    # that the rest of the test runs.
    # The Java test completes the forked SUB_WORKFLOW task itself with updateTask; Stepway
    # refuses an update of a SUB_WORKFLOW task (409: it ends with its child run;
    # docs/conductor-compatibility.md, Task API "POST /tasks"): the test asserts that, then
    # completes the child's task instead.
    dt1, dt2, it2, it3 = (unique(n) for n in ("dt1", "dt2", "integration_task_2", "it3"))
    wf, sub_name, test_task = unique("DynamicFanInOutTest_Version"), unique("sub"), unique("t")
    task_def = {"name": dt1, "ownerEmail": OWNER}
    fork_def = task_def if fork_task_def == "dt1" else {**task_def, "name": "dynamicFork"}
    # registerWorkflowDef: the workflow, then the task definitions
    conductor.register(
        workflow(
            wf,
            [
                {**simple(dt1, "dt1"), "taskDefinition": task_def},
                {
                    "name": "dynamicFork",
                    "taskReferenceName": "dynamicFork",
                    "type": "FORK_JOIN_DYNAMIC",
                    "taskDefinition": fork_def,
                    "inputParameters": {
                        "dynamicTasks": "${dt1.output.dynamicTasks}",
                        "dynamicTasksInput": "${dt1.output.dynamicTasksInput}",
                    },
                    "dynamicForkTasksParam": "dynamicTasks",
                    "dynamicForkTasksInputParamName": "dynamicTasksInput",
                },
                {"name": "join_dynamic", "taskReferenceName": "join_dynamic", "type": "JOIN"},
            ],
            ownerEmail=OWNER,
            inputParameters=["value", "inlineValue"],
            description="Workflow to test retry",
        )
    )
    conductor.taskdefs(*({"name": n, "ownerEmail": OWNER} for n in (dt1, dt2, it3, it2)))
    # registerSubWorkflow
    conductor.register(
        workflow(
            sub_name,
            [
                {
                    **simple(test_task, test_task, evaluatorType="graaljs", expression="true;"),
                    "taskDefinition": {"name": test_task, "ownerEmail": OWNER, "retryCount": 0},
                }
            ],
            ownerEmail=OWNER,
            inputParameters=["value", "inlineValue"],
            description="Sub Workflow to test retry",
            timeoutSeconds=600,
            timeoutPolicy="TIME_OUT_WF",
        )
    )

    workflow_id = conductor.start(wf, version=1)
    run = conductor.run(workflow_id)
    dynamic = {
        "name": it2,
        "taskReferenceName": "xdt1",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": sub_name},
    }
    output = {"dynamicTasks": [dynamic], "dynamicTasksInput": {"xdt1": {"k1": "v1"}}}
    r = _update(conductor, workflow_id, run["tasks"][0]["taskId"], output=output)
    assert r.status_code == 200, r.text

    run = conductor.wait(
        workflow_id,
        lambda r: (
            len(r["tasks"]) == 4
            and [t["status"] for t in r["tasks"]]
            == ["COMPLETED", "COMPLETED", "IN_PROGRESS", "IN_PROGRESS"]
        ),
        seconds=10,
    )
    assert run["status"] == "RUNNING"
    assert len(run["tasks"]) == 4
    assert [t["status"] for t in run["tasks"]] == [
        "COMPLETED",
        "COMPLETED",
        "IN_PROGRESS",
        "IN_PROGRESS",
    ]

    # documented difference: the SUB_WORKFLOW task takes no update; its child's task does
    r = _update(conductor, workflow_id, run["tasks"][2]["taskId"])
    assert r.status_code == 409, r.text
    child_id = run["tasks"][2]["subWorkflowId"]
    r = _update(conductor, child_id, _first_task_id(conductor, child_id))
    assert r.status_code == 200, r.text

    run = conductor.wait_status(workflow_id, "COMPLETED", seconds=10)
    assert len(run["tasks"]) == 4
    assert run["status"] == "COMPLETED"
    assert [t["status"] for t in run["tasks"]] == ["COMPLETED"] * 4
    assert run["tasks"][2]["inputData"].get("subWorkflowVersion") == 1
