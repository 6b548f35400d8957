"""Property-based tests of the Decider: random well-formed definitions, random outcomes.

Whatever the definition (nested sequences, SWITCH, FORK_JOIN + JOIN, DO_WHILE with a
bounded condition, WORKER tasks with retries/timeouts/optional, inline tasks, TERMINATE)
and whatever order outcomes arrive in (completed, failed, terminal error, timed out,
duplicates and stale attempts, state carried through JSON), the Decider

* never schedules the same task attempt twice,
* never loses a branch: a COMPLETED run ran every task of every taken path, and every task
  it created is terminal at the end,
* never ends a run while tasks are pending: the finishing decision cancels everything
  still outstanding and leaves nothing pending,
* finishes within a bounded number of steps.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.decider import Decider, RunState, ScheduleTask, TaskOutcome
from engine.language.definitions import RunStatus, TaskDef, TaskStatus, WorkflowDef, WorkflowTask

MAX_DEPTH = 2
MAX_STEPS = 2_000

OUTCOMES = [
    TaskStatus.COMPLETED,
    TaskStatus.COMPLETED,
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
    TaskStatus.FAILED_WITH_TERMINAL_ERROR,
    TaskStatus.TIMED_OUT,
]


@st.composite
def definitions(draw: st.DrawFn) -> tuple[WorkflowDef, dict[str, TaskDef]]:
    counter = itertools.count()
    task_defs: dict[str, TaskDef] = {}

    def worker() -> dict[str, Any]:
        ref = f"w{next(counter)}"
        task_defs[ref] = TaskDef(
            name=ref,
            retry_count=draw(st.integers(0, 2)),
            retry_logic=draw(st.sampled_from(["FIXED", "LINEAR_BACKOFF", "EXPONENTIAL_BACKOFF"])),
            retry_delay_seconds=draw(st.integers(0, 3)),
            timeout_policy=draw(st.sampled_from(["RETRY", "TIME_OUT_WF", "ALERT_ONLY"])),
            timeout_seconds=draw(st.sampled_from([0, 60])),
        )
        return {
            "name": ref,
            "taskReferenceName": ref,
            "type": "WORKER",
            "optional": draw(st.booleans()),
        }

    def seq(depth: int, minimum: int = 0) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(minimum, 3))):
            kinds = ["worker", "worker", "worker", "set", "inline", "terminate"]
            if depth < MAX_DEPTH:
                kinds += ["switch", "fork", "loop"]
            kind = draw(st.sampled_from(kinds))
            n = next(counter)
            if kind == "worker":
                tasks.append(worker())
            elif kind == "set":
                tasks.append(
                    {
                        "name": "set",
                        "taskReferenceName": f"v{n}",
                        "type": "SET_VARIABLE",
                        "inputParameters": {f"k{n}": n},
                    }
                )
            elif kind == "inline":
                tasks.append(
                    {
                        "name": "inline",
                        "taskReferenceName": f"i{n}",
                        "type": "INLINE",
                        "inputParameters": {"expression": "$.x + 1", "x": n},
                    }
                )
            elif kind == "terminate":
                if draw(st.integers(0, 4)) == 0:  # rare, it ends the run
                    tasks.append(
                        {
                            "name": "terminate",
                            "taskReferenceName": f"t{n}",
                            "type": "TERMINATE",
                            "inputParameters": {
                                "terminationStatus": draw(
                                    st.sampled_from(["COMPLETED", "FAILED", "TERMINATED"])
                                )
                            },
                        }
                    )
            elif kind == "switch":
                cases = {key: seq(depth + 1) for key in draw(st.sets(st.sampled_from("abc")))}
                task: dict[str, Any] = {
                    "name": "switch",
                    "taskReferenceName": f"s{n}",
                    "type": "SWITCH",
                    "evaluatorType": "value-param",
                    "expression": "v",
                    "inputParameters": {"v": draw(st.sampled_from("abcd"))},
                    "decisionCases": cases,
                }
                if draw(st.booleans()):
                    task["defaultCase"] = seq(depth + 1)
                tasks.append(task)
            elif kind == "fork":
                branches = [seq(depth + 1) for _ in range(draw(st.integers(1, 3)))]
                lasts = [b[-1]["taskReferenceName"] for b in branches if b]
                join_on = draw(st.lists(st.sampled_from(lasts), unique=True)) if lasts else []
                tasks.append(
                    {
                        "name": "fork",
                        "taskReferenceName": f"f{n}",
                        "type": "FORK_JOIN",
                        "forkTasks": branches,
                    }
                )
                tasks.append(
                    {
                        "name": "join",
                        "taskReferenceName": f"j{n}",
                        "type": "JOIN",
                        "joinOn": join_on,
                    }
                )
            else:
                limit = draw(st.integers(1, 3))
                tasks.append(
                    {
                        "name": "loop",
                        "taskReferenceName": f"l{n}",
                        "type": "DO_WHILE",
                        "loopCondition": f"$.l{n}.iteration < {limit}",
                        "loopOver": seq(depth + 1, minimum=1),
                    }
                )
        return tasks

    definition = WorkflowDef.model_validate({"name": "random", "tasks": seq(0, minimum=1)})
    return definition, task_defs


def assert_taken_paths_ran(state: RunState, tasks: list[WorkflowTask], suffix: str) -> None:
    for wt in tasks:
        ts = state.tasks.get(wt.task_reference_name + suffix)
        assert ts is not None, f"lost {wt.task_reference_name + suffix}"
        assert ts.status.is_successful, (ts.ref, ts.status)
        if wt.type == "SWITCH":
            key = ts.output["selectedCase"]
            chosen = wt.decision_cases.get(key, wt.default_case)
            assert_taken_paths_ran(state, chosen, suffix)
        elif wt.type == "FORK_JOIN":
            for branch in wt.fork_tasks:
                assert_taken_paths_ran(state, branch, suffix)
        elif wt.type == "DO_WHILE":
            for k in range(1, ts.output["iteration"] + 1):
                assert_taken_paths_ran(state, wt.loop_over, f"{suffix}__{k}")


@settings(
    max_examples=int(os.environ.get("STEPWAY_DECIDER_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(definitions(), st.data())
def test_random_runs_keep_the_invariants(
    generated: tuple[WorkflowDef, dict[str, TaskDef]], data: st.DataObject
) -> None:
    definition, task_defs = generated
    d = Decider(definition, task_defs)
    now = 0
    state = d.start(workflow_id="run", input={}, now_ms=now)
    decision = d.decide(state, now)
    scheduled: set[tuple[str, int]] = set()
    outstanding: dict[str, ScheduleTask] = {}
    sent: list[TaskOutcome] = []
    terminated = False
    for step in range(MAX_STEPS):
        state = decision.state
        for task_id in decision.cancel:
            outstanding.pop(task_id, None)
        for action in decision.actions:
            key = (action.task_id, action.attempt)
            assert key not in scheduled, f"scheduled twice: {action.ref} attempt {action.attempt}"
            scheduled.add(key)
            assert action.task_id not in outstanding
            outstanding[action.task_id] = action
        if decision.finished is not None:
            assert not outstanding, f"finished with pending tasks {sorted(outstanding)}"
            break
        assert outstanding, "the run stalled: nothing pending and not finished"
        now += 1_000
        task_id = data.draw(st.sampled_from(sorted(outstanding)), label="task")
        action = outstanding[task_id]
        if data.draw(st.booleans(), label="started"):
            state = d.on_started(state, task_id, action.attempt, "worker", now)
        if sent and data.draw(st.integers(0, 4), label="stale?") == 0:
            before = state.model_dump(mode="json")
            stale = data.draw(st.sampled_from(sent), label="stale")
            if (stale.task_id, stale.attempt) != (task_id, action.attempt) or (
                stale.task_id not in outstanding
            ):
                state = d.on_outcome(state, stale, now)
                assert state.model_dump(mode="json") == before, "a stale outcome changed the run"
        status = (
            data.draw(st.sampled_from(OUTCOMES), label="status")
            if step < 300
            else TaskStatus.COMPLETED
        )
        outcome = TaskOutcome(
            task_id=task_id, attempt=action.attempt, status=status, output={"step": step}
        )
        sent.append(outcome)
        state = d.on_outcome(state, outcome, now)
        if not d.is_waiting(state, task_id):
            del outstanding[task_id]
        if data.draw(st.integers(0, 3), label="carry") == 0:
            state = RunState.model_validate(json.loads(json.dumps(state.model_dump(mode="json"))))
        decision = d.decide(state, now)
    else:
        raise AssertionError(f"the run did not finish within {MAX_STEPS} steps")

    state = decision.state
    assert state.status.is_terminal
    assert state.pending == {} and state.frames == {} and state.retries == []
    for ts in state.tasks.values():
        assert ts.status.is_terminal, (ts.ref, ts.status)
    terminated = any(ts.type == "TERMINATE" for ts in state.tasks.values())
    if state.status == RunStatus.COMPLETED and not terminated:
        assert_taken_paths_ran(state, definition.tasks, "")
    if state.status in (RunStatus.FAILED, RunStatus.TIMED_OUT) and not terminated:
        assert state.failed_reference_task_names
        failed = state.tasks[state.failed_reference_task_names[0]]
        assert failed.status in (
            TaskStatus.FAILED,
            TaskStatus.TIMED_OUT,
            TaskStatus.FAILED_WITH_TERMINAL_ERROR,
        )
    # a finished run stays finished and quiet
    again = d.decide(state, now)
    assert again.actions == [] and again.cancel == [] and again.finished is not None
