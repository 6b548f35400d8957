"""Orchestration histories of representative runs, recorded from a version of the
interpreter and replayed by later ones (tests/unit/engine/runtime/test_history_compat.py).

A run in flight when the engine is upgraded is replayed by the new interpreter from the
history the old one wrote; if the new one decides a different action anywhere in it
(another activity, a timer fewer, the run's end where the old one waited), durabletask
raises a non-determinism error and the run is lost. The goldens in
``tests/data/histories/`` are such histories, each with the actions the interpreter
returned for each work item.

Record (in the checkout whose behaviour is to be kept; the module only uses the test
harness of tests/unit/engine/runtime/test_interpreter.py)::

    uv run python -m tests.unit.engine.runtime.histories tests/data/histories/<label>

The driver answers every activity the run asks for as the real ones would for a run
that goes well: a dispatch queues the task and its worker answers at once (COMPLETED, or
FAILED for the refs a case names, once), a built-in call answers 200 (and, for a call
with asyncComplete, its service posts the task's update), a record and a finish are
done, a child run is resolved and completes, a HUMAN task is completed by its assignee
once nothing else is due; a timer is fired only when nothing else is outstanding (a
WAIT, a retry delay), never a worker's deadline timer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from durabletask.internal import helpers
from durabletask.internal import orchestrator_service_pb2 as pb
from google.protobuf import json_format

from engine.adapters.run_store_sql import SqlRunStore
from protocol.events import TaskResultEvent, result_event
from protocol.runs import RunInput

DISPATCH = "stepway.dispatch"
BUILTIN = "stepway.builtin"
RECORD = "stepway.record"
FINISH = "stepway.finish"
RESOLVE_CHILD = "stepway.resolve_child"


def _worker(name: str, ref: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"name": name, "taskReferenceName": ref or name, "type": "SIMPLE", **fields}


def _http(ref: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": "http://example.invalid/x", "method": "POST"}},
        **fields,
    }


#: name -> (definition, task definitions, refs whose first attempt fails)
CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]], set[str]]] = {
    "worker_sequence": (
        {"name": "worker_sequence", "tasks": [_worker("a"), _worker("b")]},
        [],
        set(),
    ),
    "http_then_worker": (
        {"name": "http_then_worker", "tasks": [_http("call"), _worker("after")]},
        [],
        set(),
    ),
    "http_async_complete": (
        {
            "name": "http_async_complete",
            "tasks": [_http("call", asyncComplete=True), _worker("after")],
        },
        [],
        set(),
    ),
    "permissive_failure": (
        {
            "name": "permissive_failure",
            "tasks": [_worker("p", permissive=True), _worker("after")],
        },
        [{"name": "p", "retryCount": 0}],
        {"p"},
    ),
    "retry_after_failure": (
        {"name": "retry_after_failure", "tasks": [_worker("r"), _worker("after")]},
        [{"name": "r", "retryCount": 1, "retryDelaySeconds": 5}],
        {"r"},
    ),
    "fork_join": (
        {
            "name": "fork_join",
            "tasks": [
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [[_worker("x")], [_worker("y"), _worker("z")]],
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
    "loop_keep_last_n": (
        {
            "name": "loop_keep_last_n",
            "tasks": [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "inputParameters": {"keepLastN": 2},
                    "loopCondition": "$.loop['iteration'] < 4",
                    "loopOver": [
                        _worker("body"),
                        {
                            "name": "v",
                            "taskReferenceName": "v",
                            "type": "SET_VARIABLE",
                            "inputParameters": {"n": "${loop.output.iteration}"},
                        },
                    ],
                },
                _worker("after", inputParameters={"n": "${workflow.variables.n}"}),
            ],
        },
        [],
        set(),
    ),
    "human_then_worker": (
        {
            "name": "human_then_worker",
            "tasks": [
                {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
    "sub_workflow": (
        {
            "name": "sub_workflow",
            "tasks": [
                {
                    "name": "child",
                    "taskReferenceName": "child",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "child_flow", "version": 1},
                },
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
    "wait_then_worker": (
        {
            "name": "wait_then_worker",
            "tasks": [
                {
                    "name": "pause",
                    "taskReferenceName": "pause",
                    "type": "WAIT",
                    "inputParameters": {"duration": "10s"},
                },
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
    "nested_fork": (
        {
            "name": "nested_fork",
            "tasks": [
                {
                    "name": "outer",
                    "taskReferenceName": "outer",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [
                            {
                                "name": "inner",
                                "taskReferenceName": "inner",
                                "type": "FORK_JOIN",
                                "forkTasks": [[_worker("a")], [_worker("b")]],
                            },
                            {
                                "name": "inner_join",
                                "taskReferenceName": "inner_join",
                                "type": "JOIN",
                            },
                        ],
                        [_worker("c")],
                    ],
                },
                {"name": "outer_join", "taskReferenceName": "outer_join", "type": "JOIN"},
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
    "dynamic_task": (
        {
            "name": "dynamic_task",
            "tasks": [
                {
                    "name": "pick",
                    "taskReferenceName": "pick",
                    "type": "DYNAMIC",
                    "dynamicTaskNameParam": "taskToExecute",
                    "inputParameters": {"taskToExecute": "${workflow.input.task}"},
                },
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
    "fork_join_dynamic": (
        {
            "name": "fork_join_dynamic",
            "tasks": [
                {
                    "name": "fan",
                    "taskReferenceName": "fan",
                    "type": "FORK_JOIN_DYNAMIC",
                    "dynamicForkTasksParam": "tasks",
                    "dynamicForkTasksInputParamName": "inputs",
                    "inputParameters": {
                        "tasks": "${workflow.input.tasks}",
                        "inputs": "${workflow.input.inputs}",
                    },
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
    "retry_resumes_child": (
        {
            "name": "retry_resumes_child",
            "tasks": [
                _worker("before"),
                {
                    "name": "child",
                    "taskReferenceName": "child",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "child_flow", "version": 1},
                },
                _worker("after"),
            ],
        },
        [],
        set(),
    ),
}

#: what a case's run starts with besides its definition's name (the workflow input; a
#: retry's kept rows: versions before resumeSubworkflowTasks ignore ``resume`` and give
#: the SUB_WORKFLOW a new attempt and child)
RUN_INPUTS: dict[str, dict[str, Any]] = {
    "dynamic_task": {"input": {"task": "picked"}},
    "fork_join_dynamic": {
        "input": {
            "tasks": [
                {"name": "f", "taskReferenceName": "f1", "type": "SIMPLE"},
                {"name": "f", "taskReferenceName": "f2", "type": "SIMPLE"},
            ],
            "inputs": {"f1": {"n": 1}, "f2": {"n": 2}},
        }
    },
    "retry_resumes_child": {
        "generation": "g2",
        "seq_base": 2,
        "replay": [
            {"ref": "before", "taskId": "t-before", "seq": 1, "status": "COMPLETED"},
            {
                "ref": "child",
                "taskId": "t-child",
                "seq": 2,
                "status": "FAILED",
                "output": {"subWorkflowId": "t-child-1"},
                "resume": True,
            },
        ],
    },
}

#: the event a resumed SUB_WORKFLOW waits for (protocol.events.child_end_event; spelled
#: out, as the recorder also runs in checkouts from before it)
CHILD_END_SUFFIX = ".child"


def event_json(event: pb.HistoryEvent) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json_format.MessageToJson(event))
    return data


def event_of(data: dict[str, Any]) -> pb.HistoryEvent:
    return json_format.ParseDict(data, pb.HistoryEvent())


def action_summary(action: Any) -> list[Any]:
    """What a replay must return again: the kind of each action and what names it."""
    if action.HasField("scheduleTask"):
        return ["scheduleTask", action.id, action.scheduleTask.name]
    if action.HasField("createTimer"):
        return ["createTimer", action.id, action.createTimer.fireAt.ToJsonString()]
    if action.HasField("completeOrchestration"):
        complete = action.completeOrchestration
        return ["completeOrchestration", action.id, complete.orchestrationStatus]
    if action.HasField("createSubOrchestration"):
        return ["createSubOrchestration", action.id, action.createSubOrchestration.name]
    return [action.WhichOneof("orchestratorActionType"), action.id]


def record(case: str, replay_class: Any, store: SqlRunStore, t0: datetime) -> dict[str, Any]:
    """Drive a run of ``case`` to its end with the interpreter of this checkout; the
    golden: the events each work item got and the actions it returned."""
    definition, task_defs, fail_once = CASES[case]
    for td in task_defs:
        store.put_task_def(td["name"], td, 1)
    store.put_definition(definition["name"], 1, definition, 1)
    run_input = RunInput.model_validate(
        {"name": definition["name"], "version": 1, **RUN_INPUTS.get(case, {})}
    )
    # a SUB_WORKFLOW resumed in place waits for its child's end as an event
    resumed = [
        row["taskId"] for row in RUN_INPUTS.get(case, {}).get("replay", []) if row.get("resume")
    ]
    run = replay_class(store, run_input)
    items: list[dict[str, Any]] = []
    timers: list[tuple[int, datetime]] = []
    failed: set[str] = set()
    humans: dict[str, int] = {}
    now = t0
    events: list[pb.HistoryEvent] = []
    for _ in range(200):
        start = len(run.history)
        actions = run.step(*events, at=now)
        # the work item's new events (its start, the run's start in the first, what the
        # driver gave) are the history from ``start`` on, before the actions' events
        new = 1 + len(events) + (1 if not items else 0)
        items.append({"start": start, "new": new, "actions": [action_summary(a) for a in actions]})
        if any(a.HasField("completeOrchestration") for a in actions):
            return {
                "case": case,
                "definition": definition,
                "taskDefs": task_defs,
                "history": [event_json(e) for e in run.history],
                "items": items,
            }
        events = []
        for action in actions:
            if action.HasField("createTimer"):
                timers.append((action.id, action.createTimer.fireAt.ToDatetime()))
            if action.HasField("createSubOrchestration"):
                # the backend's record of the child's creation, then the child's end
                child = action.createSubOrchestration
                run.history.append(
                    helpers.new_sub_orchestration_created_event(
                        action.id, child.name, child.instanceId, child.input.value
                    )
                )
                summary = {"status": "COMPLETED", "output": {"child": True}, "reason": None}
                events.append(
                    helpers.new_sub_orchestration_completed_event(action.id, json.dumps(summary))
                )
            if not action.HasField("scheduleTask"):
                continue
            name = action.scheduleTask.name
            data = json.loads(action.scheduleTask.input.value)
            if isinstance(data, str):
                data = json.loads(data)
            for change in data.get("records") or []:
                # a HUMAN task waiting: its assignee completes it when nothing else is due
                if change["type"] == "HUMAN" and change["status"] in ("SCHEDULED", "IN_PROGRESS"):
                    humans[change["taskId"]] = change["attempt"]
            if name == DISPATCH:
                task = data["task"]
                events.append(_done(action.id, {"queue": task["name"]}))
                status = "COMPLETED"
                if task["defRef"] in fail_once and task["defRef"] not in failed:
                    failed.add(task["defRef"])
                    status = "FAILED"
                result = TaskResultEvent(
                    attempt=task["attempt"], status=status, output={"n": task["attempt"]}
                )
                events.append(
                    helpers.new_event_raised_event(
                        result_event(task["taskId"]), json.dumps(result.payload())
                    )
                )
            elif name == BUILTIN:
                envelope = {
                    "status": "COMPLETED",
                    "output": {"response": {"statusCode": 200, "body": {}}},
                }
                events.append(_done(action.id, envelope))
                task = data["task"]
                if task.get("asyncComplete"):
                    # the called service posts the task's update (asyncComplete)
                    update = TaskResultEvent(
                        attempt=task["attempt"], status="COMPLETED", output={"done": True}
                    )
                    events.append(
                        helpers.new_event_raised_event(
                            result_event(task["taskId"]), json.dumps(update.payload())
                        )
                    )
            elif name == RECORD:
                events.append(_done(action.id, {}))
            elif name == RESOLVE_CHILD:
                events.append(_done(action.id, {"name": "child_flow", "version": 1}))
            elif name == FINISH:
                result = data["result"]
                summary = {
                    "status": result["status"],
                    "output": result.get("output") or {},
                    "reason": result.get("reason"),
                }
                events.append(_done(action.id, summary))
            else:
                raise RuntimeError(f"case {case}: no answer for activity {name}")
        now = now + timedelta(seconds=1)
        if not events and resumed:
            # the run waits for nothing the driver gives but a resumed child's end
            summary = {"status": "COMPLETED", "output": {"child": True}, "reason": None}
            events.append(
                helpers.new_event_raised_event(
                    resumed.pop() + CHILD_END_SUFFIX, json.dumps(summary)
                )
            )
        if not events and humans:
            task_id, attempt = humans.popitem()
            done = TaskResultEvent(attempt=attempt, status="COMPLETED", output={"ok": True})
            events.append(
                helpers.new_event_raised_event(result_event(task_id), json.dumps(done.payload()))
            )
        if not events:
            # nothing outstanding but timers: the earliest one that is not a worker's
            # deadline (an hour out) fires
            due = sorted(
                (at, timer_id) for timer_id, at in timers if at - now < timedelta(minutes=5)
            )
            if not due:
                raise RuntimeError(f"case {case}: the run waits for nothing the driver gives")
            at, timer_id = due[0]
            timers = [(i, a) for i, a in timers if i != timer_id]
            now = max(now, at)
            events.append(helpers.new_timer_fired_event(timer_id, at))
    raise RuntimeError(f"case {case}: no end after 200 work items")


def _done(activity_id: int, output: Any) -> pb.HistoryEvent:
    return helpers.new_task_completed_event(activity_id, json.dumps(output))


def main(out: Path) -> int:
    from tests.unit.engine.runtime.test_interpreter import T0, Replay

    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            store = SqlRunStore(f"sqlite:///{Path(tmp) / 'runs.db'}")
            try:
                golden = record(case, Replay, store, T0)
            finally:
                store.close()
        golden["recordedAt"] = commit
        (out / f"{case}.json").write_text(json.dumps(golden, indent=1) + "\n")
        print(f"{case}: {len(golden['items'])} work items")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
