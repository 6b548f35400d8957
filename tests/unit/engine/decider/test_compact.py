"""Decider.compact: the state carried into continue_as_new keeps only its live part, and a
run driven with compaction after every outcome ends exactly as one without it."""

from __future__ import annotations

from typing import Any

from engine.decider import Decider, RunState, TaskOutcome
from engine.language.definitions import RunStatus, TaskStatus, WorkflowDef


def _t(ref: str, type: str = "WORKER", **kw: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": type, **kw}


def _drive(d: Decider, compact: bool) -> tuple[RunState, int]:
    """Complete every scheduled task with {"v": <ref>}; returns the end state and the
    largest number of task instances the state held after a compaction."""
    state = d.start(workflow_id="wf", input={"k": 1}, now_ms=0)
    decision = d.decide(state, 1)
    waiting = {a.task_id: a for a in decision.actions}
    most = 0
    now = 2
    while waiting and decision.finished is None:
        task_id, action = next(iter(waiting.items()))
        del waiting[task_id]
        out = {"v": action.ref, "i": now}
        state = d.on_outcome(
            decision.state,
            TaskOutcome(task_id=task_id, attempt=1, status=TaskStatus.COMPLETED, output=out),
            now,
        )
        if compact:
            d.compact(state)
            state = RunState.model_validate(state.model_dump(mode="json"))
            most = max(most, len(state.tasks))
        decision = d.decide(state, now)
        waiting.update({a.task_id: a for a in decision.actions})
        now += 1
    return decision.state, most


def _definition() -> WorkflowDef:
    return WorkflowDef.model_validate(
        {
            "name": "wf",
            "tasks": [
                _t("first"),
                *[_t(f"s{i}") for i in range(30)],
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "$.loop['iteration'] < 5",
                    "loopOver": [
                        {
                            "name": "fork",
                            "taskReferenceName": "fork",
                            "type": "FORK_JOIN",
                            "forkTasks": [[_t("a"), _t("a2")], [_t("b")]],
                        },
                        {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
                        _t("body", inputParameters={"prev": "${b.output.v}"}),
                    ],
                },
                _t("last", inputParameters={"f": "${first.output.v}", "s3": "${s3.output.v}"}),
            ],
            "outputParameters": {
                "first": "${first.output.v}",
                "loop": "${loop.output.iteration}",
                "join": "${join.output}",
                "last": "${last.input}",
            },
        }
    )


def test_compaction_keeps_the_run_result_and_bounds_the_state() -> None:
    plain, _ = _drive(Decider(_definition()), compact=False)
    compacted, most = _drive(Decider(_definition()), compact=True)
    assert plain.status == compacted.status == RunStatus.COMPLETED
    assert compacted.output == plain.output
    assert compacted.output["last"] == {"f": "first", "s3": "s3"}
    assert compacted.output["loop"] == 5
    assert len(plain.tasks) == 1 + 30 + 1 + 5 * 6 + 1
    assert most <= 12, most


def test_computed_roots_disable_compaction() -> None:
    d = Decider(
        WorkflowDef.model_validate(
            {
                "name": "wf",
                "tasks": [
                    _t("a"),
                    _t("b"),
                    _t("c", inputParameters={"x": "${${workflow.input.which}.output}"}),
                ],
            }
        )
    )
    state = d.start(workflow_id="wf", input={"which": "a"}, now_ms=0)
    decision = d.decide(state, 1)
    for _ in range(2):
        action = decision.actions[0]
        state = d.on_outcome(
            decision.state,
            TaskOutcome(task_id=action.task_id, attempt=1, status=TaskStatus.COMPLETED),
            2,
        )
        decision = d.decide(state, 2)
    d.compact(decision.state)
    assert set(decision.state.tasks) == {"a", "b", "c"}
