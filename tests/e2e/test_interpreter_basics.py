"""The interpreter over the real gRPC backend: sequences, inline control flow, WORKER tasks."""

from __future__ import annotations

import time
from typing import Any

import pytest

from engine.decider import Decider
from engine.language.definitions import RunStatus, TaskStatus


def test_inline_steps_and_a_worker_task(platform: Any) -> None:
    platform.register_task_def({"name": "greet", "retryCount": 0, "responseTimeoutSeconds": 30})
    platform.register(
        {
            "name": "hello",
            "tasks": [
                {
                    "name": "set",
                    "taskReferenceName": "set",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"who": "${workflow.input.name}"},
                },
                {
                    "name": "greet",
                    "taskReferenceName": "greet",
                    "type": "SIMPLE",
                    "inputParameters": {"name": "${workflow.variables.who}"},
                },
                {
                    "name": "route",
                    "taskReferenceName": "route",
                    "type": "SWITCH",
                    "evaluatorType": "javascript",
                    "expression": "$.len > 5 ? 'long' : 'short'",
                    "inputParameters": {"len": "${greet.output.length}"},
                    "decisionCases": {
                        "long": [
                            {
                                "name": "l",
                                "taskReferenceName": "long",
                                "type": "INLINE",
                                "inputParameters": {
                                    "evaluatorType": "javascript",
                                    "expression": "'long: ' + $.t",
                                    "t": "${greet.output.text}",
                                },
                            }
                        ]
                    },
                    "defaultCase": [
                        {
                            "name": "s",
                            "taskReferenceName": "short",
                            "type": "INLINE",
                            "inputParameters": {
                                "evaluatorType": "javascript",
                                "expression": "'short'",
                            },
                        }
                    ],
                },
            ],
            "outputParameters": {
                "text": "${greet.output.text}",
                "verdict": "${long.output.result}",
            },
        }
    )
    workflow_id = platform.start("hello", {"name": "Ada Lovelace"})
    body = platform.take("greet")
    assert body["input"] == {"name": "Ada Lovelace"}
    assert body["attempt"] == 1
    platform.complete(body, {"text": "Hello Ada Lovelace", "length": 18})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output == {"text": "Hello Ada Lovelace", "verdict": "long: Hello Ada Lovelace"}
    rows = platform.tasks(workflow_id)
    assert rows["greet"].status == TaskStatus.COMPLETED
    assert rows["route"].status == TaskStatus.COMPLETED
    assert "short" not in rows


def test_worker_failure_is_retried_then_dead_lettered(platform: Any) -> None:
    platform.register_task_def(
        {"name": "flaky", "retryCount": 1, "retryDelaySeconds": 0, "responseTimeoutSeconds": 30}
    )
    platform.register(
        {
            "name": "retrying",
            "tasks": [{"name": "flaky", "taskReferenceName": "flaky", "type": "WORKER"}],
        }
    )
    workflow_id = platform.start("retrying")
    first = platform.take("flaky")
    platform.complete(first, status="FAILED", reason="boom 1")
    second = platform.take("flaky")
    # the retry is a new task (Conductor): its own id, attempt 2
    assert second["attempt"] == 2 and second["taskId"] != first["taskId"]
    platform.complete(second, status="FAILED", reason="boom 2")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert "boom 2" in (run.reason_for_incompletion or "")
    assert run.failed_reference_task_names == ["flaky"]
    dead = platform.services.queue.peek("flaky/$deadletterqueue", 10)
    assert [m.json()["attempt"] for m in dead] == [2]
    depth = platform.services.queue.depth("flaky")
    assert (depth.active, depth.scheduled, depth.deferred) == (0, 0, 0)


def test_wait_human_and_terminate(platform: Any) -> None:
    platform.register(
        {
            "name": "approval",
            "tasks": [
                {
                    "name": "pause",
                    "taskReferenceName": "pause",
                    "type": "WAIT",
                    "inputParameters": {"duration": "1s"},
                },
                {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
                {
                    "name": "after",
                    "taskReferenceName": "after",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"approved": "${approve.output.approved}"},
                },
            ],
        }
    )
    workflow_id = platform.start("approval")
    platform.complete_ref(workflow_id, "approve", {"approved": True})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert run.variables == {"approved": True}

    second = platform.start("approval")
    platform.terminate(second, "operator said stop")
    run = platform.wait(second)
    assert run.status == RunStatus.TERMINATED
    assert "operator said stop" in (run.reason_for_incompletion or "")


def test_human_task_row_carries_its_instruction_text(platform: Any) -> None:
    platform.services.run_store.put_instruction("check_it", 1, "Check the totals.", 1)
    platform.register(
        {
            "name": "instructed",
            "tasks": [
                {
                    "name": "review",
                    "taskReferenceName": "review",
                    "type": "HUMAN",
                    "inputParameters": {"instructions": "check_it", "amount": 5},
                }
            ],
        }
    )
    workflow_id = platform.start("instructed")
    platform.complete_ref(workflow_id, "review", {"ok": True})
    platform.wait(workflow_id)
    row = platform.tasks(workflow_id)["review"]
    assert row.input_data == {
        "instructions": "check_it",
        "amount": 5,
        "instructionsText": "Check the totals.",
    }
    # the text is read by the activity: the orchestration history keeps only the name
    assert "Check the totals." not in str(platform.client.get_orchestration_history(workflow_id))


def test_a_run_whose_definition_is_gone_ends_failed_not_running(platform: Any) -> None:
    # the run row and the orchestration exist, the definition does not (deleted meanwhile)
    workflow_id = platform.start("never_registered")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert "never_registered" in (run.reason_for_incompletion or "")


def test_a_transient_run_store_error_in_dispatch_is_retried(platform: Any) -> None:
    platform.register_task_def({"name": "steady", "retryCount": 0})
    platform.register(
        {
            "name": "steady_run",
            "tasks": [{"name": "steady", "taskReferenceName": "steady", "type": "WORKER"}],
        }
    )
    store = platform.services.run_store
    real_upsert = store.upsert_task
    failures = []

    def flaky_upsert(task: Any, now: int) -> bool:
        if task.task_type == "WORKER" and not failures:
            failures.append(task.task_id)
            raise RuntimeError("database is locked")
        return real_upsert(task, now)

    store.upsert_task = flaky_upsert
    try:
        workflow_id = platform.start("steady_run")
        body = platform.take("steady")
        platform.complete(body, {"ok": True})
        run = platform.wait(workflow_id)
    finally:
        store.upsert_task = real_upsert
    assert failures, "the dispatch never hit the injected error"
    assert run.status == RunStatus.COMPLETED
    assert platform.tasks(workflow_id)["steady"].attempt == 1


def test_a_dynamic_fork_cannot_stand_in_for_a_later_human_approval(platform: Any) -> None:
    """A forked task named like the HUMAN step after the fork fails the fork and the run;
    it does not replace the approval (which the run would then never wait for)."""
    platform.register(
        {
            "name": "approve_flow",
            "tasks": [
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {
                        "tasks": "${workflow.input.tasks}",
                        "inputs": "${workflow.input.inputs}",
                    },
                    "dynamicForkTasksParam": "tasks",
                    "dynamicForkTasksInputParamName": "inputs",
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
                {"name": "approval", "taskReferenceName": "approve", "type": "HUMAN"},
                {
                    "name": "lodge",
                    "taskReferenceName": "lodge",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "ok": "${approve.output.approved}",
                        "expression": "'lodged, approved=' + $.ok",
                    },
                },
            ],
            "outputParameters": {"result": "${lodge.output.result}"},
        }
    )
    smuggled = {"name": "n", "taskReferenceName": "approve", "type": "SET_VARIABLE"}
    hostile = platform.start("approve_flow", {"tasks": [smuggled], "inputs": {}})
    run = platform.wait(hostile)
    assert run.status == RunStatus.FAILED
    assert "'approve'" in (run.reason_for_incompletion or ""), run.reason_for_incompletion
    rows = platform.tasks(hostile)
    assert rows["fork"].status == TaskStatus.FAILED
    assert "approve" not in rows and "lodge" not in rows

    # the same definition with a harmless forked task waits for the approval
    benign = {"name": "n", "taskReferenceName": "check", "type": "NOOP"}
    workflow_id = platform.start("approve_flow", {"tasks": [benign], "inputs": {}})
    platform.complete_ref(workflow_id, "approve", {"approved": True})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output == {"result": "lodged, approved=true"}
    assert platform.tasks(workflow_id)["approve"].task_type == "HUMAN"


def test_a_wait_past_100_years_fails_its_task_and_the_run_keeps_its_rows(platform: Any) -> None:
    """An expression giving a WAIT duration past the engine's bound (100 years) fails the
    WAIT task, with the value and the limit as its reason. It used to be scheduled, then
    crashed the run arming its timer ("interpreter error: ValueError: year 273792727 is
    out of range"): the run ended FAILED without its task rows, the rows of a fork stayed
    IN_PROGRESS, and the child run of a parallel branch was left running."""
    platform.register(
        {"name": "child_waits", "tasks": [{"name": "h", "taskReferenceName": "h", "type": "HUMAN"}]}
    )
    platform.register(
        {
            "name": "wait_too_long",
            "tasks": [
                {
                    "name": "f",
                    "taskReferenceName": "f",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [
                            {
                                "name": "s",
                                "taskReferenceName": "s",
                                "type": "SUB_WORKFLOW",
                                "subWorkflowParam": {"name": "child_waits", "version": 1},
                            }
                        ],
                        [
                            {"name": "p", "taskReferenceName": "p", "type": "NOOP"},
                            {
                                "name": "w",
                                "taskReferenceName": "w",
                                "type": "WAIT",
                                "inputParameters": {"duration": "${workflow.input.d}"},
                            },
                        ],
                    ],
                },
                {"name": "j", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["s", "w"]},
            ],
        }
    )
    workflow_id = platform.start("wait_too_long", {"d": "99999999999d"})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED, run.reason_for_incompletion
    assert "interpreter error" not in (run.reason_for_incompletion or "")
    rows = platform.tasks(workflow_id)
    assert set(rows) >= {"f", "s", "p", "w", "j"}, sorted(rows)
    wait = rows["w"]
    assert wait.status == TaskStatus.FAILED
    reason = wait.reason_for_incompletion or ""
    assert "'99999999999d'" in reason and "at most 36500 days (100 years)" in reason, reason
    # the run ended: nothing of it is left waiting
    assert not [r for r in rows.values() if not r.status.is_terminal], {
        ref: r.status for ref, r in rows.items()
    }
    # a child run the fork started (the engine names it <taskId>-<attempt>) is ended with it
    child = platform.services.run_store.get_run(f"{rows['s'].task_id}-1")
    assert rows["s"].status == TaskStatus.CANCELED
    if child is not None:  # not started when the WAIT fails in the fork's first step
        assert platform.wait(child.workflow_id).status == RunStatus.TERMINATED


#: a parent whose FORK holds a SUB_WORKFLOW (its child waits on a HUMAN), a HUMAN that
#: stays open and a HUMAN whose result the tests make the Decider fail on
_DEFECT_CHILD = {
    "name": "defect_child",
    "tasks": [{"name": "h", "taskReferenceName": "h", "type": "HUMAN"}],
}
_DEFECT_PARENT = {
    "name": "defect_parent",
    "tasks": [
        {
            "name": "f",
            "taskReferenceName": "f",
            "type": "FORK_JOIN",
            "forkTasks": [
                [
                    {
                        "name": "s",
                        "taskReferenceName": "s",
                        "type": "SUB_WORKFLOW",
                        "subWorkflowParam": {"name": "defect_child", "version": 1},
                    }
                ],
                [{"name": "held", "taskReferenceName": "held", "type": "HUMAN"}],
                [{"name": "trigger", "taskReferenceName": "trigger", "type": "HUMAN"}],
            ],
        },
        {
            "name": "j",
            "taskReferenceName": "j",
            "type": "JOIN",
            "joinOn": ["s", "held", "trigger"],
        },
    ],
}
_DEFECT = "interpreter error: RuntimeError: injected defect"


def _run_to_the_defect(platform: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """Start the parent, wait until its child's HUMAN and its own ``held`` are open, then
    make the Decider raise on the outcome of ``trigger``: (parent id, child id)."""
    platform.register(_DEFECT_CHILD)
    platform.register(_DEFECT_PARENT)
    workflow_id = platform.start("defect_parent")
    store = platform.services.run_store
    deadline = time.monotonic() + 20
    child_id = ""
    while time.monotonic() < deadline:
        rows = platform.tasks(workflow_id)
        if {"s", "held", "trigger"} <= set(rows) and rows["s"].status == TaskStatus.IN_PROGRESS:
            child_id = f"{rows['s'].task_id}-1"
            child_rows = platform.tasks(child_id)
            if "h" in child_rows and not child_rows["h"].status.is_terminal:
                break
        time.sleep(0.05)
    else:
        raise AssertionError("the child's HUMAN never became pending")
    assert store.get_run(child_id) is not None
    real = Decider.on_outcome

    def on_outcome(self: Decider, state: Any, outcome: Any, now_ms: int) -> Any:
        if state.pending.get(outcome.task_id) == "trigger":
            raise RuntimeError("injected defect")
        return real(self, state, outcome, now_ms)

    monkeypatch.setattr(Decider, "on_outcome", on_outcome)
    platform.complete_ref(workflow_id, "trigger", {"ok": True})
    return workflow_id, child_id


def test_a_defect_ends_the_run_failed_as_a_terminate_ends_it(
    platform: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect (an unexpected exception in the Decider) ends the run FAILED with the
    interpreter's reason, and like a terminate: every task row present and ended
    (CANCELED, as Conductor cancels the non-terminal tasks of a run that failed), the
    child run TERMINATED with its own rows ended. It used to record the run FAILED
    alone: the fork's rows stayed IN_PROGRESS and the child ran on."""
    workflow_id, child_id = _run_to_the_defect(platform, monkeypatch)
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert run.reason_for_incompletion == _DEFECT
    rows = platform.tasks(workflow_id)
    assert set(rows) == {"f", "s", "held", "trigger", "j"}, sorted(rows)
    assert {ref: row.status for ref, row in rows.items()} == {
        "f": TaskStatus.COMPLETED,
        "s": TaskStatus.CANCELED,
        "held": TaskStatus.CANCELED,
        "trigger": TaskStatus.CANCELED,
        "j": TaskStatus.CANCELED,
    }
    child = platform.wait(child_id)
    assert child.status == RunStatus.TERMINATED
    child_rows = platform.tasks(child_id)
    assert set(child_rows) == {"h"}
    assert child_rows["h"].status == TaskStatus.CANCELED


def test_a_defect_whose_ending_fails_too_still_records_the_run_failed(
    platform: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If ending the run as a terminated one raises as well (the Decider's state may be
    inconsistent after the defect), the run is still recorded FAILED, never RUNNING."""

    def fail(self: Decider, state: Any, reason: str, now_ms: int) -> Any:
        raise RuntimeError("the ending is broken too")

    monkeypatch.setattr(Decider, "fail", fail, raising=False)
    workflow_id, _ = _run_to_the_defect(platform, monkeypatch)
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert run.reason_for_incompletion == _DEFECT


def test_a_defect_before_the_first_decision_records_the_run_failed(
    platform: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect in the Decider's start (or in building the run's own Decider) escaped the
    interpreter: the orchestration failed and the run stayed RUNNING in the store (and in
    every search) until a read of it reconciled it. It is recorded FAILED with the
    interpreter's reason; nothing was scheduled, so nothing else is ended."""
    human = {"name": "h", "taskReferenceName": "h", "type": "HUMAN"}
    platform.register({"name": "start_defect", "tasks": [human]})

    def start(self: Decider, **kwargs: Any) -> Any:
        raise RuntimeError("the start is broken")

    monkeypatch.setattr(Decider, "start", start)
    workflow_id = platform.start("start_defect", {})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert run.reason_for_incompletion == "interpreter error: RuntimeError: the start is broken"
    assert platform.tasks(workflow_id) == {}
