"""Conductor's official JavaScript SDK (``@io-orkes/conductor-javascript`` 4.0) against
``stepway dev``, used as a JavaScript team uses it, unmodified (``conductor_js/sdk.cjs``):
``OrkesClients`` for the clients, ``MetadataClient`` registering task and workflow
definitions, ``WorkflowExecutor`` starting, executing, reading and steering runs,
``TaskManager``/``TaskHandler`` running worker objects (``taskDefName``, ``execute``) that
poll and answer tasks, ``TaskClient`` for tasks, logs, queues and poll data.

Each test runs one scenario of the script with node (a scenario two tests assert on runs
once) and asserts both what the SDK read back (the script's JSON line) and, for the runs,
what Stepway's API answers over HTTP (the ``conductor`` fixture).

The client is installed by ``.ci/run`` (``STEPWAY_TEST_CONDUCTOR_JS`` names its
``node_modules``); elsewhere the tests are skipped. Where Stepway answers otherwise than
Conductor (conductor-oss's ``WorkflowExecutorOps``), the test asserts Conductor's answer
and is an expected failure naming Stepway's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, refs, statuses, task, types, unique

CLIENT = os.environ.get("STEPWAY_TEST_CONDUCTOR_JS")
SCRIPT = Path(__file__).parent / "conductor_js" / "sdk.cjs"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not CLIENT or shutil.which("node") is None,
        reason="Conductor's JavaScript client not installed: set STEPWAY_TEST_CONDUCTOR_JS "
        "(.ci/run installs it)",
    ),
]

#: what each scenario printed, by (platform URL, scenario): two tests asserting on one
#: scenario run it once
_ANSWERS: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}


def js(conductor: Conductor, scenario: str) -> dict[str, Any]:
    """Run ``scenario`` of the script against the platform; its JSON answer. Node's
    stderr (the SDK's log) is written to this test's stderr, shown when it fails."""
    url = f"{str(conductor.http.base_url).rstrip('/')}/api"
    key = (url, scenario)
    if key not in _ANSWERS:
        assert CLIENT is not None
        # the SDK reads CONDUCTOR_SERVER_URL and CONDUCTOR_AUTH_* before its arguments
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONDUCTOR_")}
        answer = subprocess.run(
            ["node", str(SCRIPT), url, scenario, unique(f"js_{scenario.lower()}")],
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, "NODE_PATH": CLIENT},
            check=False,
        )
        assert answer.returncode == 0, answer.stderr
        lines = [line for line in answer.stdout.splitlines() if line.startswith("{")]
        assert lines, f"no JSON line: stdout {answer.stdout!r}, stderr {answer.stderr}"
        _ANSWERS[key] = (json.loads(lines[-1]), answer.stderr)
    found, stderr = _ANSWERS[key]
    sys.stderr.write(stderr)
    return found


def rows(view: dict[str, Any]) -> list[tuple[str, str]]:
    """(reference, status) of each task of a run as the script saw it."""
    return [(t["ref"], t["status"]) for t in view["tasks"]]


def js_task(view: dict[str, Any], ref: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [t for t in view["tasks"] if t["ref"] == ref]
    assert found, f"no task {ref!r} in {[t['ref'] for t in view['tasks']]}"
    return found[-1]


# --- workers complete a workflow -----------------------------------------------------------


def test_javascript_workers_complete_a_registered_workflow(conductor: Conductor) -> None:
    """Task and workflow definitions registered with MetadataClient; a run started with
    WorkflowExecutor.startWorkflow; TaskManager's workers complete two SIMPLE tasks in
    sequence (each one's output passed to the next with ``${...}``), then a SWITCH on
    the second one's output takes the case that forks two branches, joined by a JOIN."""
    out = js(conductor, "flow")
    workflow_id = out["workflowId"]
    expected_output = {
        "sum": 6,
        "product": 18,
        "joined": {"left": {"tagged": "left:18"}, "right": {"tagged": "right:18"}},
    }
    order = ["first", "second", "route", "fan", "left", "right", "fan_join"]

    # what the SDK read back
    seen = out["run"]
    assert seen["status"] == "COMPLETED", seen["reasonForIncompletion"]
    assert seen["output"] == expected_output
    assert rows(seen) == [(ref, "COMPLETED") for ref in order]
    assert out["registered"]["refs"] == ["first", "second", "route"]
    # what the workers were given: the outputs passed on by the expressions
    assert [(e["ref"], e["input"]) for e in out["executed"]] == [
        ("first", {"a": 2, "b": 4}),
        ("left", {"side": "left", "value": 18}),
        ("right", {"side": "right", "value": 18}),
        ("second", {"x": 6, "factor": 3}),
    ]

    # what Stepway's API answers
    run = conductor.run(workflow_id)
    assert run["status"] == "COMPLETED"
    assert run["output"] == expected_output
    assert refs(run) == order
    assert statuses(run) == ["COMPLETED"] * len(order)
    worker_types = [t for t in types(run) if t.startswith("js_flow_")]
    assert [t.rsplit("_", 1)[-1] for t in worker_types] == ["add", "mul", "tag", "tag"]
    assert types(run)[2:4] == ["SWITCH", "FORK"] and types(run)[-1] == "JOIN"
    assert task(run, "route")["outputData"]["evaluationResult"] == ["even"]
    assert task(run, "fan_join")["outputData"] == expected_output["joined"]
    for ref in ("first", "second", "left", "right"):
        assert task(run, ref)["workerId"] == "js-flow-worker"
    assert task(run, "second")["outputData"] == {"product": 18, "parity": "even"}


def test_a_worker_that_throws_once_is_retried(conductor: Conductor) -> None:
    """A worker throwing an Error: the SDK answers FAILED with the message as the reason
    and the stack as a log line; the task definition's ``retryCount`` 1 gives it a second
    attempt (a new task), which completes the run. The failed attempt stays visible."""
    out = js(conductor, "failOnce")
    seen = out["run"]
    assert seen["status"] == "COMPLETED", seen["reasonForIncompletion"]
    assert seen["output"] == {"tries": 2, "n": 7}
    failed, retried = seen["tasks"]
    assert (failed["status"], failed["retryCount"], failed["reason"]) == (
        "FAILED",
        0,
        "first try fails",
    )
    assert (retried["status"], retried["retryCount"]) == ("COMPLETED", 1)
    assert retried["retriedTaskId"] == failed["taskId"] and failed["retried"] is True
    assert [a["taskId"] for a in out["attempts"]] == [failed["taskId"], retried["taskId"]]
    assert any("Error: first try fails" in line for line in out["failedLogs"])

    run = conductor.run(out["workflowId"])
    assert run["status"] == "COMPLETED"
    assert refs(run) == ["flaky", "flaky"]
    assert statuses(run) == ["FAILED", "COMPLETED"]
    assert [t["taskId"] for t in run["tasks"]] == [failed["taskId"], retried["taskId"]]
    assert run["tasks"][0]["reasonForIncompletion"] == "first try fails"
    assert run["tasks"][1]["outputData"] == {"tries": 2, "n": 7}


def test_a_worker_answering_in_progress_gets_the_task_again(conductor: Conductor) -> None:
    """A worker returning ``{status: IN_PROGRESS, callbackAfterSeconds: 2}`` (and a log
    line through its TaskContext): the same task is handed out again about two seconds
    later, and the worker's COMPLETED then ends it."""
    out = js(conductor, "inProgress")
    first, second = out["handouts"]
    assert first["taskId"] == second["taskId"]
    assert (first["pollCount"], second["pollCount"]) == (1, 2)
    assert second["afterMs"] >= 1900
    assert js_task(out["middle"], "slow")["output"] == {"progress": 50}
    assert js_task(out["middle"], "slow")["callbackAfterSeconds"] == 2
    seen = out["run"]
    assert seen["status"] == "COMPLETED"
    assert rows(seen) == [("slow", "COMPLETED")]
    assert seen["output"] == {"progress": 100}
    assert "started, checking back in 2 s" in out["logs"]

    run = conductor.run(out["workflowId"])
    assert (run["status"], statuses(run)) == ("COMPLETED", ["COMPLETED"])
    assert run["tasks"][0]["taskId"] == first["taskId"]
    assert run["tasks"][0]["pollCount"] == 2


def test_a_task_waiting_for_its_callback_reads_scheduled(conductor: Conductor) -> None:
    out = js(conductor, "inProgress")
    assert js_task(out["middle"], "slow")["status"] == "SCHEDULED"


# --- steering runs -------------------------------------------------------------------------


def test_pause_and_resume(conductor: Conductor) -> None:
    """pause() while the run waits on a WAIT task: the SDK reads PAUSED (getWorkflow and
    getWorkflowStatus); the WAIT task completed through updateTaskByRefName meanwhile
    schedules nothing; resume() reads RUNNING and the run goes on to complete."""
    out = js(conductor, "pauseResume")
    assert (out["pause"], out["afterPause"], out["statusSummary"]) == (None, "PAUSED", "PAUSED")
    assert out["completeHold"] is not None and not out["completeHold"].startswith("error")
    paused = out["whilePaused"]
    assert paused["status"] == "PAUSED"
    assert [t["ref"] for t in paused["tasks"]] == ["step", "hold"]
    assert (out["resume"], out["afterResume"]) == (None, "RUNNING")
    seen = out["run"]
    assert seen["status"] == "COMPLETED"
    assert rows(seen) == [("step", "COMPLETED"), ("hold", "COMPLETED"), ("after", "COMPLETED")]
    assert seen["output"] == {"approved": True, "n": 2}

    run = conductor.run(out["workflowId"])
    assert (run["status"], refs(run)) == ("COMPLETED", ["step", "hold", "after"])
    assert task(run, "hold")["outputData"] == {"approved": True}


@pytest.mark.xfail(
    strict=True,
    reason="Stepway records a WAIT/HUMAN task's update only when the run's orchestration "
    "applies it (TaskResults._complete_non_worker, control_plane/services/task_results.py, "
    "only signals the run), and pause() suspends the orchestration (WorkflowService.pause, "
    "control_plane/services/workflows.py): while PAUSED the task reads IN_PROGRESS with an "
    "empty output; conductor-oss's WorkflowExecutorOps.updateTask stores the task COMPLETED "
    "at once and only skips deciding a paused run",
)
def test_a_wait_task_completed_while_paused_reads_completed(conductor: Conductor) -> None:
    out = js(conductor, "pauseResume")
    hold = js_task(out["whilePaused"], "hold")
    assert (hold["status"], hold["output"]) == ("COMPLETED", {"approved": True})


def test_terminate_and_restart(conductor: Conductor) -> None:
    """terminate(id, reason): TERMINATED with the reason, the waiting task CANCELED;
    restart(id): RUNNING again, every task anew (new task ids); the run then completes."""
    out = js(conductor, "terminateRestart")
    assert rows(out["before"]) == [("step", "COMPLETED"), ("hold", "IN_PROGRESS")]
    assert out["terminate"] is None
    ended = out["terminated"]
    assert (ended["status"], ended["reasonForIncompletion"]) == ("TERMINATED", "enough for now")
    assert rows(ended) == [("step", "COMPLETED"), ("hold", "CANCELED")]
    assert not str(out["restart"]).startswith("error")
    assert out["afterRestart"] == "RUNNING"
    restarted = out["restarted"]
    assert rows(restarted) == [("step", "COMPLETED"), ("hold", "IN_PROGRESS")]
    before_ids = {t["taskId"] for t in out["before"]["tasks"]}
    assert not before_ids & {t["taskId"] for t in restarted["tasks"]}
    assert restarted["reasonForIncompletion"] is None
    seen = out["run"]
    assert (seen["status"], seen["output"]) == ("COMPLETED", {"n": 5, "approved": "yes"})

    run = conductor.run(out["workflowId"])
    assert (run["status"], statuses(run)) == ("COMPLETED", ["COMPLETED", "COMPLETED"])
    assert [t["taskId"] for t in run["tasks"]] == [t["taskId"] for t in restarted["tasks"]]


def test_retry_a_run_failed_by_a_non_retryable_error(conductor: Conductor) -> None:
    """A worker throwing NonRetryableException: FAILED_WITH_TERMINAL_ERROR, not retried
    although the task definition allows 2 retries, and the run FAILS; retry(id) makes a
    new attempt of the task (reading RUNNING right after the call), which completes."""
    out = js(conductor, "retryFailed")
    failed = out["failed"]
    assert failed["status"] == "FAILED"
    [attempt] = failed["tasks"]
    assert (attempt["status"], attempt["reason"]) == (
        "FAILED_WITH_TERMINAL_ERROR",
        "order not found yet",
    )
    assert failed["reasonForIncompletion"] == (
        f"Task {attempt['taskId']} failed with status: FAILED and reason: 'order not found yet'"
    )
    assert (out["retry"], out["afterRetry"]) == (None, "RUNNING")
    seen = out["run"]
    assert (seen["status"], seen["output"]) == ("COMPLETED", {"accepted": "A-1"})
    assert rows(seen) == [("picky", "FAILED_WITH_TERMINAL_ERROR"), ("picky", "COMPLETED")]
    old, new = seen["tasks"]
    assert (old["taskId"], old["retried"]) == (attempt["taskId"], True)
    assert (new["retriedTaskId"], new["retryCount"]) == (attempt["taskId"], 1)

    run = conductor.run(out["workflowId"])
    assert run["status"] == "COMPLETED" and run["reasonForIncompletion"] is None
    assert statuses(run) == ["FAILED_WITH_TERMINAL_ERROR", "COMPLETED"]


def test_rerun_from_a_task_with_a_new_input(conductor: Conductor) -> None:
    """reRun(id, {reRunFromTaskId, taskInput}) of a completed run: the task runs again
    with the new input and the task after it with its new output."""
    out = js(conductor, "rerun")
    assert out["before"]["output"] == {"result": 4}
    assert out["rerun"] == out["workflowId"]
    seen = out["run"]
    assert seen["status"] == "COMPLETED"
    assert seen["output"] == {"result": 20}
    assert rows(seen) == [("first", "COMPLETED"), ("second", "COMPLETED")]
    assert js_task(seen, "first")["input"] == {"n": 5}
    assert js_task(seen, "second")["input"] == {"n": 10}

    run = conductor.run(out["workflowId"])
    assert (run["status"], run["output"]) == ("COMPLETED", {"result": 20})
    assert task(run, "first")["inputData"] == {"n": 5}


def test_a_rerun_task_keeps_its_task_id(conductor: Conductor) -> None:
    out = js(conductor, "rerun")
    old_id = js_task(out["before"], "first")["taskId"]
    assert js_task(out["run"], "first")["taskId"] == old_id
    assert out["rerunTask"] == {
        "status": "COMPLETED",
        "inputData": {"n": 5},
        "outputData": {"doubled": 10},
    }


def test_steering_calls_conductor_refuses_throw(conductor: Conductor) -> None:
    """retry and restart of a running run, pause of a failed one and terminate of a
    completed one are refused (the SDK throws) and change nothing; terminating a
    TERMINATED run again is a no-op that keeps the first reason, as in Conductor. (A
    retry of a running run is a 409 here, a 404 "Workflow is still running" in
    conductor-oss: the SDK throws for both.)"""
    out = js(conductor, "refusals")
    for call in ("retryRunning", "restartRunning", "pauseEnded", "terminateCompleted"):
        assert str(out[call]).startswith("error: "), (call, out[call])
    assert "not in terminal state" in out["restartRunning"]
    assert out["running"] == {"status": "RUNNING", "reason": None}
    assert out["failed"] == "FAILED"
    assert out["completed"] == "COMPLETED"
    assert out["afterTerminateCompleted"] == {"status": "COMPLETED", "reason": None}
    assert (out["terminate"], out["terminateAgain"]) == (None, None)
    assert out["stopped"] == {"status": "TERMINATED", "reason": "first stop"}


def test_resuming_a_running_run_throws(conductor: Conductor) -> None:
    out = js(conductor, "refusals")
    assert str(out["resumeRunning"]).startswith("error: ")


def test_terminating_a_failed_run_terminates_it(conductor: Conductor) -> None:
    out = js(conductor, "refusals")
    assert out["terminateFailed"] is None
    assert out["afterTerminateFailed"] == {"status": "TERMINATED", "reason": "cleaning up"}


# --- what else a JavaScript team calls -----------------------------------------------------


def test_execute_with_the_workflow_builder_and_task_handler(conductor: Conductor) -> None:
    """The README's way: a ConductorWorkflow built with simpleTask, register(),
    execute() (POST /workflow/execute: waits for the result), startWorkflow() with a
    correlation id; workers run by the SDK's TaskHandler. Also executeWorkflow() with a
    request id and startWorkflowByName()."""
    out = js(conductor, "execute")
    assert out["built"]["status"] == "COMPLETED"
    assert out["built"]["output"] == {"greeting": "Hello, Ada"}
    assert out["direct"]["status"] == "COMPLETED"
    assert out["direct"]["output"] == {"greeting": "Hello, Bo"}
    assert out["direct"]["requestId"].endswith("-request")
    started = out["started"]
    assert (started["status"], started["output"]) == ("COMPLETED", {"greeting": "Hello, Cy"})
    assert out["byNameRun"]["status"] == "COMPLETED"
    assert out["byNameRun"]["output"] == {"greeting": "Hello, Di"}
    assert out["byNameRun"]["correlationId"].endswith("-by-name")

    for workflow_id, name in (
        (out["built"]["workflowId"], "Ada"),
        (out["direct"]["workflowId"], "Bo"),
        (started["workflowId"], "Cy"),
        (out["byName"], "Di"),
    ):
        run = conductor.run(workflow_id)
        assert run["status"] == "COMPLETED"
        assert run["input"] == {"name": name}
        assert run["output"] == {"greeting": f"Hello, {name}"}
    definition = conductor.run(started["workflowId"])["workflowDefinition"]
    assert definition["description"] == "built with the JS SDK"
    assert conductor.run(started["workflowId"])["correlationId"].endswith("-order")


def test_tasks_queues_and_runs_read_through_the_sdk(conductor: Conductor) -> None:
    """Registering a workflow definition again without overwrite throws (Conductor: 409),
    with overwrite replaces it; getTask (MetadataClient) reads the task definition; the
    queue size of a type with a run waiting (TaskClient.getQueueSizeForTask), then its
    poll data once the worker polled; the task by id (TaskClient and WorkflowExecutor),
    its logs (the worker's TaskContext line and addTaskLog's); getWorkflowStatus with
    output; search by type and status."""
    out = js(conductor, "lookups")
    assert out["register"] is None and out["overwrite"] is None
    assert str(out["registerAgain"]).startswith("error: ")
    assert "already exists" in out["registerAgain"]
    assert out["workflowDef"]["description"] == "overwritten"
    assert out["workflowDef"]["refs"] == ["job"]
    job = out["taskDef"]["name"]
    assert out["taskDef"] == {
        "name": job,
        "retryCount": 0,
        "responseTimeoutSeconds": 30,
        "description": "a JS job",
    }
    assert out["queuedBefore"] == {job: 1}
    assert out["queuedAfter"] == {job: 0}
    assert out["pollData"] == [{"queueName": job, "workerId": "js-lookups-worker", "polled": True}]
    workflow_id = out["workflowId"]
    seen = out["run"]
    assert (seen["status"], seen["output"]) == ("COMPLETED", {"y": 40})
    task_id = seen["tasks"][0]["taskId"]
    expected_task = {
        "taskId": task_id,
        "status": "COMPLETED",
        "outputData": {"y": 40},
        "workerId": "js-lookups-worker",
        "referenceTaskName": "job",
        "workflowInstanceId": workflow_id,
    }
    assert out["taskByClient"] == expected_task
    assert out["taskByExecutor"] == expected_task
    assert out["addLog"] is None
    logs = out["logs"]
    assert "doubling 20" in logs and logs[-1] == "checked by the JS team"
    assert out["status"] == {
        "workflowId": workflow_id,
        "status": "COMPLETED",
        "output": {"y": 40},
        "correlationId": out["status"]["correlationId"],
    }
    assert out["status"]["correlationId"].endswith("-c")
    assert out["search"]["totalHits"] == 1
    assert out["search"]["results"] == [
        {
            "workflowId": workflow_id,
            "status": "COMPLETED",
            "correlationId": out["status"]["correlationId"],
        }
    ]

    http_logs = conductor.http.get(f"/api/tasks/{task_id}/log").json()
    assert [entry["log"] for entry in http_logs][-2:] == ["doubling 20", "checked by the JS team"]
    run = conductor.run(workflow_id)
    assert (run["status"], run["output"]) == ("COMPLETED", {"y": 40})
    assert task(run, "job")["workerId"] == "js-lookups-worker"
