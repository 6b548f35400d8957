"""Every task type in one run, and TERMINATE inside a fork, over the real gRPC backend."""

from __future__ import annotations

from typing import Any

from engine.language.definitions import RunStatus, TaskStatus


def _worker(ref: str, name: str | None = None, **params: Any) -> dict[str, Any]:
    return {
        "name": name or ref,
        "taskReferenceName": ref,
        "type": "WORKER",
        "inputParameters": params,
    }


def _inline(ref: str, expression: str, **params: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "INLINE",
        "inputParameters": {"evaluatorType": "javascript", "expression": expression, **params},
    }


def test_every_task_type_in_one_run(platform: Any) -> None:
    for name in ("prep", "left", "right", "loopwork", "childwork"):
        platform.register_task_def({"name": name, "retryCount": 0})
    platform.register(
        {"name": "child", "tasks": [_worker("childwork", n="${workflow.input.n}")],
         "outputParameters": {"doubled": "${childwork.output.doubled}"}}
    )  # fmt: skip
    platform.register(
        {
            "name": "everything",
            "tasks": [
                {
                    "name": "set",
                    "taskReferenceName": "set",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"who": "${workflow.input.who}"},
                },
                {
                    "name": "route",
                    "taskReferenceName": "route",
                    "type": "SWITCH",
                    "evaluatorType": "value-param",
                    "expression": "kind",
                    "inputParameters": {"kind": "${workflow.input.kind}"},
                    "decisionCases": {"a": [_worker("prep", who="${workflow.variables.who}")]},
                    "defaultCase": [_inline("never", "'no'")],
                },
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [_worker("left", x="${prep.output.x}")],
                        [_worker("right", x="${prep.output.x}")],
                    ],
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "$.loop['iteration'] < 3",
                    "loopOver": [
                        {
                            "name": "ifork",
                            "taskReferenceName": "ifork",
                            "type": "FORK_JOIN",
                            "forkTasks": [
                                [_inline("sq", "$.i * $.i", i="${loop.output.iteration}")],
                                [_worker("loopwork", i="${loop.output.iteration}")],
                            ],
                        },
                        {"name": "ijoin", "taskReferenceName": "ijoin", "type": "JOIN"},
                    ],
                },
                {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
                {
                    "name": "pause",
                    "taskReferenceName": "pause",
                    "type": "WAIT",
                    "inputParameters": {"duration": "1s"},
                },
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "inputParameters": {"n": "${left.output.y}"},
                    "subWorkflowParam": {"name": "child", "version": 1},
                },
                {
                    "name": "set2",
                    "taskReferenceName": "set2",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"approved": "${approve.output.ok}"},
                },
            ],
            "outputParameters": {
                "left": "${left.output.y}",
                "right": "${right.output.y}",
                "iterations": "${loop.output.iteration}",
                "lastSquare": "${sq.output.result}",
                "child": "${sub.output.doubled}",
                "approved": "${workflow.variables.approved}",
                "who": "${workflow.variables.who}",
            },
        }
    )
    workflow_id = platform.start("everything", {"who": "ada", "kind": "a"})
    prep = platform.take("prep")
    assert prep["input"] == {"who": "ada"}
    platform.complete(prep, {"x": 20})
    left, right = platform.take("left"), platform.take("right")
    assert left["input"] == right["input"] == {"x": 20}
    platform.complete(right, {"y": 2})
    platform.complete(left, {"y": 1})
    for i in range(1, 4):
        body = platform.take("loopwork")
        assert body["input"] == {"i": i}
        assert body["taskRef"] == f"loopwork__{i}"
        platform.complete(body, {"i": i})
    platform.complete_ref(workflow_id, "approve", {"ok": True})
    child_task = platform.take("childwork")
    assert child_task["input"] == {"n": 1}
    assert child_task["workflowId"] != workflow_id
    platform.complete(child_task, {"doubled": 2})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {
        "left": 1,
        "right": 2,
        "iterations": 3,
        "lastSquare": 9,
        "child": 2,
        "approved": True,
        "who": "ada",
    }
    assert run.variables == {"who": "ada", "approved": True}
    rows = platform.tasks(workflow_id)
    expected = {
        "set", "route", "prep", "fork", "left", "right", "join", "loop", "approve", "pause",
        "sub", "set2",
        *(f"{r}__{i}" for r in ("ifork", "sq", "loopwork", "ijoin") for i in (1, 2, 3)),
    }  # fmt: skip
    assert set(rows) == expected
    assert {ref: row.status for ref, row in rows.items()} == dict.fromkeys(
        expected, TaskStatus.COMPLETED
    )
    assert rows["join"].output_data == {"left": {"y": 1}, "right": {"y": 2}}
    assert rows["loop"].output_data["iteration"] == 3
    assert rows["loop"].output_data["3"]["loopwork"] == {"i": 3}
    assert rows["loopwork__2"].iteration == 2
    assert rows["approve"].output_data == {"ok": True}
    assert rows["sub"].output_data["doubled"] == 2
    child_id = rows["sub"].output_data["subWorkflowId"]
    child = platform.services.run_store.get_run(child_id)
    assert child is not None and child.status == RunStatus.COMPLETED
    assert child.parent_workflow_id == workflow_id
    assert child.output == {"doubled": 2}
    assert rows["pause"].end_time - rows["pause"].scheduled_time >= 900
    for queue in ("prep", "left", "right", "loopwork", "childwork"):
        depth = platform.services.queue.depth(queue)
        assert (depth.active, depth.scheduled, depth.deferred) == (0, 0, 0), queue


def test_terminate_inside_a_fork_cancels_the_sibling(platform: Any) -> None:
    platform.register_task_def({"name": "slow", "retryCount": 0})
    platform.register(
        {
            "name": "stopper",
            "tasks": [
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [_worker("slow")],
                        [
                            {"name": "gate", "taskReferenceName": "gate", "type": "HUMAN"},
                            {
                                "name": "stop",
                                "taskReferenceName": "stop",
                                "type": "TERMINATE",
                                "inputParameters": {
                                    "terminationStatus": "FAILED",
                                    "terminationReason": "gate said ${gate.output.why}",
                                    "workflowOutput": {"stopped": True},
                                },
                            },
                        ],
                    ],
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
                _worker("never", name="slow"),
            ],
        }
    )
    workflow_id = platform.start("stopper")
    slow = platform.take("slow")
    platform.complete_ref(workflow_id, "gate", {"why": "no"})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert run.reason_for_incompletion == "gate said no"
    assert run.output == {"stopped": True}
    rows = platform.tasks(workflow_id)
    assert rows["slow"].status == TaskStatus.CANCELED
    assert rows["stop"].status == TaskStatus.COMPLETED
    assert rows["gate"].status == TaskStatus.COMPLETED
    assert "never" not in rows
    depth = platform.services.queue.depth("slow")
    assert (depth.active, depth.scheduled, depth.deferred) == (0, 0, 0)
    # a late result of the canceled task changes nothing
    platform.complete(slow, {"late": True})
    assert platform.tasks(workflow_id)["slow"].status == TaskStatus.CANCELED
