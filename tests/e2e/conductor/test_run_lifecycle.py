"""Steering runs as Conductor does (issue 12, points 3, 5 and 8).

Scenarios of the test-harness specs SimpleWorkflowSpec ("Test simple workflow with retry
at workflow level", "Test Simple workflow restart without using the latest definition",
"Test non restartable simple workflow") and WorkflowAndTaskConfigurationSpec ("Test
re-running the simple workflow multiple times after completion", "Test task skipping in
simple workflows", "Test pause and resume simple workflow"), and the endpoints of
Conductor's WorkflowResource: correlated look-ups, remove, decide, test.

Conductor answers ``start``, ``terminate``, ``retry``, ``restart``, ``rerun`` and
``skiptask`` after deciding the run, so the state read right after the call reflects
them; these tests read it without waiting.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import (
    Conductor,
    refs,
    simple,
    statuses,
    task,
    types,
    unique,
    workflow,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _two_steps(conductor: Conductor, retry_count: int = 0, **fields: Any) -> tuple[str, str, str]:
    """integration_test_wf of the specs: t1 then t2, output from both."""
    t1, t2, name = unique("integration_task_1"), unique("integration_task_2"), unique("linear")
    conductor.taskdefs(
        {"name": t1, "retryCount": retry_count, "retryDelaySeconds": 0},
        {"name": t2, "retryCount": 0},
    )
    conductor.register(
        workflow(
            name,
            [
                simple(t1, "t1", p1="${workflow.input.param1}", p3="${CPEWF_TASK_ID}"),
                simple(t2, "t2", tp1="${workflow.input.param1}", tp2="${t1.output.op}"),
            ],
            outputParameters={"o1": "${workflow.input.param1}", "o3": "${t1.output.op}"},
            **fields,
        )
    )
    return name, t1, t2


_INPUT = {"param1": "p1 value", "param2": "p2 value"}


def test_start_answers_once_the_first_task_is_scheduled(conductor: Conductor) -> None:
    """SimpleWorkflowSpec "Test simple workflow completion", first step: the state read
    straight after start shows the run RUNNING with its first task SCHEDULED."""
    name, t1, _ = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT, correlation_id="unit_test_1")
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [(t1, "SCHEDULED")]
    assert run["tasks"][0]["inputData"]["p3"] == run["tasks"][0]["taskId"]


def test_retry_resumes_a_failed_run_from_its_failed_task(conductor: Conductor) -> None:
    """SimpleWorkflowSpec "Test simple workflow with retry at workflow level"."""
    name, t1, t2 = _two_steps(conductor, retry_count=1)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_and_fail(t1, "failure...0")
    run = conductor.wait_tasks(workflow_id, 2)
    assert (run["status"], statuses(run)) == ("RUNNING", ["FAILED", "SCHEDULED"])
    assert run["tasks"][1]["inputData"]["p3"] == run["tasks"][1]["taskId"]
    conductor.poll_and_fail(t1, "failure...0")
    run = conductor.wait_status(workflow_id, "FAILED")
    assert statuses(run) == ["FAILED", "FAILED"]

    r = conductor.http.post(f"/api/workflow/{workflow_id}/retry")
    assert r.status_code == 204, r.text
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert statuses(run) == ["FAILED", "FAILED", "SCHEDULED"]
    assert run["tasks"][2]["inputData"]["p3"] == run["tasks"][2]["taskId"]

    conductor.poll_and_complete(t1, {"op": "task1.done"})
    run = conductor.wait_tasks(workflow_id, 4)
    assert statuses(run) == ["FAILED", "FAILED", "COMPLETED", "SCHEDULED"]
    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert run["failedReferenceTaskNames"] == ["t1"]
    assert types(run) == [t1, t1, t1, t2]


def test_retry_of_a_running_run_is_refused(conductor: Conductor) -> None:
    name, _, _ = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    r = conductor.http.post(f"/api/workflow/{workflow_id}/retry")
    assert r.status_code == 409, r.text


def test_restart_runs_a_failed_run_again_from_the_start(conductor: Conductor) -> None:
    """SimpleWorkflowSpec "Test Simple workflow restart without using the latest
    definition"."""
    name, t1, t2 = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_and_fail(t1, "failed..")
    run = conductor.wait_status(workflow_id, "FAILED")
    assert (run["status"], statuses(run)) == ("FAILED", ["FAILED"])

    r = conductor.http.post(f"/api/workflow/{workflow_id}/restart")
    assert r.status_code == 204, r.text
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [(t1, "SCHEDULED")]

    conductor.poll_and_complete(t1, {"op": "task1.done"})
    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"
    assert statuses(run) == ["COMPLETED", "COMPLETED"]
    assert run["output"]["o3"] == "task1.done"


def test_restart_of_a_terminated_run_hands_its_first_task_out_again(
    conductor: Conductor,
) -> None:
    name, t1, _ = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    first = conductor.poll_one(t1)
    r = conductor.http.delete(f"/api/workflow/{workflow_id}", params={"reason": "stop"})
    assert r.status_code == 200, r.text
    conductor.wait_status(workflow_id, "TERMINATED")

    r = conductor.http.post(f"/api/workflow/{workflow_id}/restart")
    assert r.status_code == 204, r.text
    again = conductor.poll_one(t1, seconds=10)
    assert again["taskId"] != first["taskId"]
    assert again["workflowInstanceId"] == workflow_id


def test_a_completed_run_of_a_non_restartable_definition_does_not_restart(
    conductor: Conductor,
) -> None:
    """SimpleWorkflowSpec "Test non restartable simple workflow", last step (Conductor
    answers 404; Stepway 409: the run exists, its definition forbids it)."""
    name, t1, t2 = _two_steps(conductor, restartable=False)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_and_complete(t1, {"op": "task1.done"})
    conductor.poll_and_complete(t2)
    assert conductor.wait_status(workflow_id, "COMPLETED")["status"] == "COMPLETED"
    r = conductor.http.post(f"/api/workflow/{workflow_id}/restart")
    assert r.status_code == 409, r.text
    assert "restartable" in r.json()["message"]


def test_rerun_a_completed_run_from_a_task_and_from_the_start(conductor: Conductor) -> None:
    """WorkflowAndTaskConfigurationSpec "Test re-running the simple workflow multiple
    times after completion"."""
    name, t1, t2 = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_and_complete(t1, {"op": "task1.done"})
    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "COMPLETED")

    rerun = {"reRunFromWorkflowId": workflow_id, "reRunFromTaskId": run["tasks"][1]["taskId"]}
    r = conductor.http.post(f"/api/workflow/{workflow_id}/rerun", json=rerun)
    assert (r.status_code, r.text) == (200, workflow_id)
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [
        (t1, "COMPLETED"),
        (t2, "SCHEDULED"),
    ]
    polled = conductor.poll_and_complete(t2)
    assert polled["inputData"] == {"tp1": "p1 value", "tp2": "task1.done"}
    assert conductor.wait_status(workflow_id, "COMPLETED")["output"]["o3"] == "task1.done"

    r = conductor.http.post(
        f"/api/workflow/{workflow_id}/rerun", json={"reRunFromWorkflowId": workflow_id}
    )
    assert (r.status_code, r.text) == (200, workflow_id)
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [(t1, "SCHEDULED")]
    conductor.poll_and_complete(t1, {"op": "again"})
    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], statuses(run)) == ("COMPLETED", ["COMPLETED", "COMPLETED"])
    assert run["output"]["o3"] == "again"


def test_rerun_with_large_inputs(conductor: Conductor) -> None:
    """A rerun's ``taskInput`` and ``workflowInput`` of 3 MB each go to the payload store
    as a start's large input does: the worker gets them whole and the run completes.
    Inline, they rode in the run's messages and failed it ('the dispatch of a task would
    be an orchestration message of 6001456 bytes')."""
    name, t1, t2 = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_and_complete(t1, {"op": "task1.done"})
    conductor.poll_and_complete(t2)
    run = conductor.wait_status(workflow_id, "COMPLETED")

    blob = "x" * 3_000_000
    rerun = {
        "reRunFromTaskId": run["tasks"][1]["taskId"],
        "taskInput": {"blob": blob, "n": 1},
        "workflowInput": {"param1": "big", "blob": blob},
    }
    r = conductor.http.post(f"/api/workflow/{workflow_id}/rerun", json=rerun)
    assert (r.status_code, r.text) == (200, workflow_id)
    polled = conductor.poll_one(t2)
    assert polled["inputData"] == {"blob": blob, "n": 1}
    conductor.complete(polled)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert run["input"] == {"param1": "big", "blob": blob}

    r = conductor.http.post(
        f"/api/workflow/{workflow_id}/rerun", json={"workflowInput": {"param1": blob}}
    )
    assert (r.status_code, r.text) == (200, workflow_id)
    assert conductor.poll_one(t1)["inputData"]["p1"] == blob


def test_skip_a_task_the_run_has_not_reached_yet(conductor: Conductor) -> None:
    """WorkflowAndTaskConfigurationSpec "Test task skipping in simple workflows"."""
    t1, t2, t3, name = (unique(f"integration_task_{i}") for i in (1, 2, 3, 0))
    conductor.register(workflow(name, [simple(t1, "t1"), simple(t2, "t2"), simple(t3, "t3")]))
    workflow_id = conductor.start(name, _INPUT)
    conductor.wait_tasks(workflow_id, 1)

    r = conductor.http.put(f"/api/workflow/{workflow_id}/skiptask/t2")
    assert r.status_code == 200, r.text
    run = conductor.run(workflow_id)
    assert run["status"] == "RUNNING"
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [
        (t2, "SKIPPED"),
        (t1, "SCHEDULED"),
    ]
    conductor.poll_and_complete(t1, {"op": "task1.done"})
    run = conductor.wait_tasks(workflow_id, 3)
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [
        (t2, "SKIPPED"),
        (t1, "COMPLETED"),
        (t3, "SCHEDULED"),
    ]
    conductor.poll_and_complete(t3)
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], len(run["tasks"])) == ("COMPLETED", 3)


def test_a_skipped_tasks_large_input_and_output_are_kept_whole(conductor: Conductor) -> None:
    """A skip's ``taskInput`` and ``taskOutput`` of 3 MB each go to the payload store as
    a worker's large input and output do: the later task reads from both, the run
    completes, and the skipped task's input and output read back whole. Inline, either
    failed the run (its records above the 1 MiB message limit)."""
    t1, t3, name = unique("task_a"), unique("task_c"), unique("skip_large")
    conductor.register(
        workflow(
            name,
            [
                simple(t1, "t1"),
                simple(t1, "t2"),
                simple(t3, "t3", k="${t2.output.k}", j="${t2.input.j}"),
            ],
            outputParameters={"k": "${t2.output.k}"},
        )
    )
    workflow_id = conductor.start(name)
    conductor.wait_tasks(workflow_id, 1)
    blob = "x" * 3_000_000
    r = conductor.http.put(
        f"/api/workflow/{workflow_id}/skiptask/t2",
        json={"taskInput": {"blob": blob, "j": 3}, "taskOutput": {"blob": blob, "k": 7}},
    )
    assert r.status_code == 200, r.text
    conductor.poll_and_complete(t1)
    assert conductor.poll_one(t3)["inputData"] == {"k": 7, "j": 3}
    run = conductor.wait(workflow_id, lambda r: len(r["tasks"]) == 3)
    skipped = task(run, "t2")
    assert skipped["status"] == "SKIPPED"
    assert conductor.task_output(skipped["taskId"])["blob"] == blob
    assert skipped["inputData"] == {"blob": blob, "j": 3}
    assert skipped["externalInputPayloadStoragePath"]
    r = conductor.http.post(f"/api/tasks/{workflow_id}/t3/COMPLETED", json={})
    assert r.status_code == 200, r.text
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED", run["reasonForIncompletion"]
    assert run["output"] == {"k": 7}


def test_a_paused_run_schedules_nothing_until_resumed(conductor: Conductor) -> None:
    """WorkflowAndTaskConfigurationSpec "Test pause and resume simple workflow"."""
    name, t1, t2 = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.wait_tasks(workflow_id, 1)
    assert conductor.http.put(f"/api/workflow/{workflow_id}/pause").status_code == 200
    conductor.poll_and_complete(t1, {"op": "task1.done"})
    run = conductor.wait_task(workflow_id, "t1", "COMPLETED")
    assert run["status"] == "PAUSED"
    assert statuses(run) == ["COMPLETED"]
    assert conductor.poll(t2, seconds=1) is None

    assert conductor.http.put(f"/api/workflow/{workflow_id}/resume").status_code == 200
    polled = conductor.poll_and_complete(t2)
    assert polled["inputData"] == {"tp1": "p1 value", "tp2": "task1.done"}
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert (run["status"], statuses(run)) == ("COMPLETED", ["COMPLETED", "COMPLETED"])


def test_terminate_answers_once_the_run_is_terminated(conductor: Conductor) -> None:
    name, t1, _ = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_one(t1)
    r = conductor.http.delete(f"/api/workflow/{workflow_id}", params={"reason": "no longer needed"})
    assert r.status_code == 200, r.text
    run = conductor.run(workflow_id)
    assert run["status"] == "TERMINATED"
    assert run["reasonForIncompletion"] == "no longer needed"
    assert statuses(run) == ["CANCELED"]
    # Conductor: terminating a TERMINATED run again is a no-op
    again = conductor.http.delete(f"/api/workflow/{workflow_id}")
    assert again.status_code == 200, again.text


def test_terminating_a_completed_run_is_refused(conductor: Conductor) -> None:
    name, t1, t2 = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_and_complete(t1)
    conductor.poll_and_complete(t2)
    conductor.wait_status(workflow_id, "COMPLETED")
    r = conductor.http.delete(f"/api/workflow/{workflow_id}")
    assert r.status_code == 409, r.text


def test_terminating_a_failed_run_makes_it_terminated(conductor: Conductor) -> None:
    """Conductor's terminateWorkflow refuses only a COMPLETED run: a FAILED one becomes
    TERMINATED with the reason given, its tasks and end time as they were."""
    name, t1, _ = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.fail(conductor.poll_one(t1), "broken", terminal=True)
    failed = conductor.wait_status(workflow_id, "FAILED")
    r = conductor.http.delete(f"/api/workflow/{workflow_id}", params={"reason": "cleaned up"})
    assert r.status_code == 200, r.text
    run = conductor.run(workflow_id)
    assert (run["status"], run["reasonForIncompletion"]) == ("TERMINATED", "cleaned up")
    assert run["endTime"] == failed["endTime"]
    assert statuses(run) == statuses(failed)
    # and it can be retried as a terminated run can
    r = conductor.http.post(f"/api/workflow/{workflow_id}/retry")
    assert r.status_code == 204, r.text
    assert conductor.wait_status(workflow_id, "RUNNING")["status"] == "RUNNING"


def test_remove_deletes_a_finished_run(conductor: Conductor) -> None:
    name, t1, t2 = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    conductor.poll_and_complete(t1)
    conductor.poll_and_complete(t2)
    conductor.wait_status(workflow_id, "COMPLETED")
    r = conductor.http.delete(f"/api/workflow/{workflow_id}/remove")
    assert r.status_code == 200, r.text
    assert conductor.http.get(f"/api/workflow/{workflow_id}").status_code == 404


def test_decide_is_accepted(conductor: Conductor) -> None:
    """``PUT /workflow/decide/{id}`` (Stepway decides on every event: nothing to do)."""
    name, _, _ = _two_steps(conductor)
    workflow_id = conductor.start(name, _INPUT)
    r = conductor.http.put(f"/api/workflow/decide/{workflow_id}")
    assert r.status_code == 200, r.text


def test_runs_by_correlation_id(conductor: Conductor) -> None:
    """``GET /workflow/{name}/correlated/{correlationId}`` and ``POST
    /workflow/{name}/correlated``: running runs only unless ``includeClosed``; tasks only
    with ``includeTasks``."""
    name, t1, t2 = _two_steps(conductor)
    done = conductor.start(name, _INPUT, correlation_id="order-1")
    conductor.poll_and_complete(t1)
    conductor.poll_and_complete(t2)
    conductor.wait_status(done, "COMPLETED")
    running = conductor.start(name, _INPUT, correlation_id="order-1")
    other = conductor.start(name, _INPUT, correlation_id="order-2")

    r = conductor.http.get(f"/api/workflow/{name}/correlated/order-1")
    assert r.status_code == 200, r.text
    assert [w["workflowId"] for w in r.json()] == [running]
    assert "tasks" not in r.json()[0] or r.json()[0]["tasks"] == []

    r = conductor.http.get(
        f"/api/workflow/{name}/correlated/order-1",
        params={"includeClosed": True, "includeTasks": True},
    )
    assert sorted(w["workflowId"] for w in r.json()) == sorted([done, running])
    completed = next(w for w in r.json() if w["workflowId"] == done)
    assert refs(completed) == ["t1", "t2"]

    r = conductor.http.post(
        f"/api/workflow/{name}/correlated",
        params={"includeClosed": True},
        json=["order-1", "order-2", "order-3"],
    )
    assert r.status_code == 200, r.text
    found = {key: sorted(w["workflowId"] for w in runs) for key, runs in r.json().items()}
    assert found == {"order-1": sorted([done, running]), "order-2": [other], "order-3": []}


def test_workflow_test_runs_a_definition_with_mocked_task_outputs(
    conductor: Conductor,
) -> None:
    """TestWorkflowSpec "Run Workflow Test with simple tasks": task1 completes with its
    mock at once, task2 (no mock) is scheduled for a worker."""
    t1, t2 = unique("task1"), unique("task2")
    definition = workflow(unique("test_workflow"), [simple(t1, "task1"), simple(t2, "task2")])
    r = conductor.http.post(
        "/api/workflow/test",
        json={
            "name": definition["name"],
            "version": 1,
            "input": {"var": "var_test_value"},
            "workflowDef": definition,
            "taskRefToMockOutput": {"task1": [{"status": "COMPLETED", "output": {"key": "value"}}]},
        },
    )
    assert r.status_code == 200, r.text
    run = conductor.wait_tasks(r.json()["workflowId"], 2)
    assert run["status"] == "RUNNING"
    assert [(t["taskType"], t["status"]) for t in run["tasks"]] == [
        (t1, "COMPLETED"),
        (t2, "SCHEDULED"),
    ]
    assert task(run, "task1")["outputData"] == {"key": "value"}


def test_running_ids_task_pages_and_terminate_remove(conductor: Conductor) -> None:
    """WorkflowResource ``GET /running/{name}``, ``GET /{id}/tasks`` and
    ``DELETE /{id}/terminate-remove``."""
    a, name = unique("paged"), unique("paged_wf")
    conductor.register(workflow(name, [simple(a, "a")]))
    first, second = conductor.start(name), conductor.start(name)
    running = conductor.http.get(f"/api/workflow/running/{name}", params={"version": 1}).json()
    assert sorted(running) == sorted([first, second])
    assert conductor.http.get(f"/api/workflow/running/{name}", params={"version": 2}).json() == []

    page = conductor.http.get(f"/api/workflow/{first}/tasks", params={"count": 1}).json()
    assert page["totalHits"] == 1 and page["results"][0]["referenceTaskName"] == "a"
    none = conductor.http.get(f"/api/workflow/{first}/tasks", params={"status": "COMPLETED"})
    assert none.json() == {"totalHits": 0, "results": []}

    for workflow_id in (first, second):
        r = conductor.http.delete(f"/api/workflow/{workflow_id}/terminate-remove")
        assert r.status_code == 200, r.text
        assert conductor.http.get(f"/api/workflow/{workflow_id}").status_code == 404
    assert conductor.http.get(f"/api/workflow/running/{name}").json() == []


def test_a_human_task_completed_by_reference_synchronously(conductor: Conductor) -> None:
    """TaskResource ``POST /{workflowId}/{taskRefName}/{status}/sync``: answers with the
    run, which shows the result; 404 when no such task is running."""
    name = unique("human_sync_wf")
    conductor.register(
        workflow(name, [{"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"}])
    )
    workflow_id = conductor.start(name)
    r = conductor.http.post(f"/api/tasks/{workflow_id}/approve/COMPLETED/sync", json={"ok": 1})
    assert r.status_code == 200, r.text
    run = r.json()
    assert task(run, "approve")["status"] == "COMPLETED"
    assert task(run, "approve")["outputData"] == {"ok": 1}
    r = conductor.http.post(f"/api/tasks/{workflow_id}/approve/COMPLETED/sync", json={})
    assert r.status_code == 404
    assert r.json()["message"] == (
        f"Found no running task approve of workflow {workflow_id} to update"
    )
