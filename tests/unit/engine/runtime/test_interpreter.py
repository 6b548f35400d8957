"""The ``WorkflowInterpreter`` orchestration without a server: durabletask's own
orchestration executor replays it over a history this test writes (orchestration
started, activity scheduled and completed, timer created and fired, event raised), the
way durabletask's tests/durabletask/test_orchestration_executor.py drives orchestrators.
Each step returns the actions the interpreter asks for; the test answers them with the
next events. Definitions come from a real SQLite run store.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from durabletask import worker
from durabletask.internal import helpers
from durabletask.internal import orchestrator_service_pb2 as pb

from engine.adapters.backend.sessions import HistoryContext, SessionWorkerMixin, _Session
from engine.adapters.run_store_sql import SqlRunStore
from engine.decider import Decider
from engine.ports.run_store import KeptStep
from engine.runtime import interpreter
from engine.runtime.activity_io import (
    ACTIVITY_BUILTIN,
    ACTIVITY_DISPATCH,
    ACTIVITY_FINISH,
    ACTIVITY_RECORD,
    ACTIVITY_RESOLVE_CHILD,
    BuiltinInput,
    DispatchInput,
    FinishInput,
    RecordInput,
)
from engine.runtime.definition_cache import DefinitionCache
from engine.runtime.encoded_json import EncodedJsonConverter
from engine.runtime.interpreter import (
    STEPS_PER_EXECUTION,
    BuiltinResult,
    DecisionDeferred,
    LocalBuiltin,
    LocalDispatch,
    LocalFinish,
    LocalRecord,
    make_workflow_interpreter,
)
from engine.runtime.payload_cache import PayloadCache
from engine.runtime.run_limits import RunLimits
from protocol.events import (
    TERMINATE_EVENT,
    TaskResultEvent,
    TaskStartedEvent,
    TerminateEvent,
    child_end_event,
    result_event,
    started_event,
)
from protocol.runs import ORCHESTRATOR_NAME, ReplayTask, RunInput

INSTANCE = "wf-1"
T0 = datetime(2030, 1, 1, 12, 0, 0)
LOG = logging.getLogger("tests.interpreter")


class Replay:
    """One orchestration instance and its history; :meth:`step` runs the interpreter
    over the history plus new events, as a durabletask worker does per work item, and
    records the actions it returned as the history events the backend would write.

    With ``sees_history`` each work item is replayed in full as Stepway's workers do on a
    session miss (engine/adapters/backend/sessions.py: a ``HistoryContext``, which tells
    the interpreter which activities the history holds); without, by durabletask's own
    executor."""

    def __init__(
        self,
        store: SqlRunStore,
        run: RunInput,
        local_finish: LocalFinish | None = None,
        *,
        local_dispatch: LocalDispatch | None = None,
        local_record: LocalRecord | None = None,
        local_builtin: LocalBuiltin | None = None,
        builtin_result: BuiltinResult | None = None,
        sees_history: bool = False,
    ) -> None:
        self.store = store
        self.sees_history = sees_history
        self.host(local_finish, local_dispatch, local_record, local_builtin, builtin_result)
        self.history: list[pb.HistoryEvent] = []
        self.first: list[pb.HistoryEvent] = [
            helpers.new_execution_started_event(
                ORCHESTRATOR_NAME, INSTANCE, encoded_input=json.dumps(run.wire())
            )
        ]
        self.now = T0

    def host(
        self,
        local_finish: LocalFinish | None,
        local_dispatch: LocalDispatch | None = None,
        local_record: LocalRecord | None = None,
        local_builtin: LocalBuiltin | None = None,
        builtin_result: BuiltinResult | None = None,
    ) -> None:
        """Run the next work items in a process with (or without) a local finish,
        dispatch, record and built-in steps (and the results they kept)."""
        self.registry = worker._Registry()
        self.registry.add_named_orchestrator(
            ORCHESTRATOR_NAME,
            make_workflow_interpreter(
                DefinitionCache(self.store, PayloadCache(None)),
                local_finish,
                local_dispatch,
                local_record,
                local_builtin,
                builtin_result,
            ),
        )

    def step(self, *events: pb.HistoryEvent, at: datetime | None = None) -> list[Any]:
        self.now = at or self.now
        new = [helpers.new_orchestrator_started_event(self.now), *self.first, *events]
        self.first = []
        executor = worker._OrchestrationExecutor(self.registry, LOG, EncodedJsonConverter())
        if self.sees_history:
            ctx = HistoryContext(INSTANCE, self.registry, EncodedJsonConverter(), logger=LOG)
            executor._orchestration_name = ORCHESTRATOR_NAME
            first = (self.history or new)[0]
            session = _Session(executor=executor, ctx=ctx, applied=0, first=first, last=first)
            SessionWorkerMixin._apply(session, self.history, new)
            actions = list(ctx.get_actions())
            # a session keeps none of the history's activity inputs between work items
            assert ctx._scheduled == {}
        else:
            actions = list(executor.execute(INSTANCE, self.history, new).actions)
        self.history.extend(new)
        for action in actions:
            if action.HasField("scheduleTask"):
                self.history.append(
                    helpers.new_task_scheduled_event(
                        action.id, action.scheduleTask.name, action.scheduleTask.input.value
                    )
                )
            elif action.HasField("createTimer"):
                self.history.append(
                    helpers.new_timer_created_event(
                        action.id, action.createTimer.fireAt.ToDatetime()
                    )
                )
        return actions


def activities(actions: list[Any], name: str | None = None) -> list[tuple[int, str, Any]]:
    """The activity calls among ``actions``: (id, name, input)."""
    return [
        (a.id, a.scheduleTask.name, json.loads(a.scheduleTask.input.value))
        for a in actions
        if a.HasField("scheduleTask") and (name is None or a.scheduleTask.name == name)
    ]


def timers(actions: list[Any]) -> list[tuple[int, datetime]]:
    return [(a.id, a.createTimer.fireAt.ToDatetime()) for a in actions if a.HasField("createTimer")]


def completed(actions: list[Any]) -> Any:
    found = [a.completeOrchestration for a in actions if a.HasField("completeOrchestration")]
    assert len(found) == 1, actions
    return found[0]


def done(activity_id: int, output: Any = None) -> pb.HistoryEvent:
    return helpers.new_task_completed_event(activity_id, json.dumps(output or {}))


def raised(name: str, payload: dict[str, Any]) -> pb.HistoryEvent:
    return helpers.new_event_raised_event(name, json.dumps(payload))


def register(store: SqlRunStore, definition: dict[str, Any], *task_defs: dict[str, Any]) -> None:
    for td in task_defs:
        store.put_task_def(td["name"], td, 1)
    store.put_definition(definition["name"], definition.get("version", 1), definition, 1)


WORKER_FLOW = {
    "name": "one_worker",
    "version": 1,
    "tasks": [
        {
            "name": "parse",
            "taskReferenceName": "p",
            "type": "WORKER",
            "inputParameters": {"url": "${workflow.input.url}"},
        }
    ],
    "outputParameters": {"text": "${p.output.text}"},
}


def test_a_worker_task_is_dispatched_awaited_and_the_run_finished(store: SqlRunStore) -> None:
    register(store, WORKER_FLOW)
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}))

    actions = run.step()
    [(dispatch_id, _, dispatch)] = activities(actions)
    assert activities(actions)[0][1] == ACTIVITY_DISPATCH
    task = dispatch["task"]
    assert (task["name"], task["attempt"], task["input"]) == ("parse", 1, {"url": "u"})
    assert dispatch["workflowId"] == INSTANCE and dispatch["workflowType"] == "one_worker"
    assert [r["status"] for r in dispatch["records"]] == ["SCHEDULED"]
    # the earliest the response timeout can fall (Conductor's default task definition:
    # 3600 s), as a worker may take the task the moment it is queued
    assert [at for _, at in timers(actions)] == [T0 + timedelta(seconds=3600)]

    # the queue took it; a worker took it and posted its result
    task_id = task["taskId"]
    actions = run.step(
        done(dispatch_id, {"queue": "parse"}),
        raised(started_event(task_id), TaskStartedEvent(attempt=1, worker_id="w1").payload()),
        raised(
            result_event(task_id),
            TaskResultEvent(attempt=1, status="COMPLETED", output={"text": "hi"}).payload(),
        ),
        at=T0 + timedelta(seconds=2),
    )
    [(finish_id, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert finish["result"]["status"] == "COMPLETED"
    assert finish["result"]["output"] == {"text": "hi"}
    assert [(r["ref"], r["status"], r["workerId"]) for r in finish["records"]] == [
        ("p", "COMPLETED", "w1")
    ]

    summary = {"status": "COMPLETED", "output": {"text": "hi"}, "reason": None}
    result = completed(run.step(done(finish_id, summary)))
    assert result.orchestrationStatus == pb.ORCHESTRATION_STATUS_COMPLETED
    assert json.loads(result.result.value) == summary


def _finished_by_worker(run: Replay) -> list[Any]:
    """Dispatch WORKER_FLOW's task and deliver its result: the work item that reaches the
    run's end."""
    [(dispatch_id, _, dispatch)] = activities(run.step())
    task_id = dispatch["task"]["taskId"]
    return run.step(
        done(dispatch_id, {"queue": "parse"}),
        raised(
            result_event(task_id),
            TaskResultEvent(attempt=1, status="COMPLETED", output={"text": "hi"}).payload(),
        ),
    )


class _Ends:
    """A local finish that records what it was given and answers ``answer``."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.given: list[FinishInput] = []

    def __call__(self, data: FinishInput) -> dict[str, Any] | None:
        self.given.append(data)
        if not self.answer:
            return None
        return {"status": data.result.status, "output": data.result.output, "reason": None}


def test_a_process_hosting_the_activities_records_the_end_in_the_work_item_that_reaches_it(
    store: SqlRunStore,
) -> None:
    register(store, WORKER_FLOW)
    ends = _Ends()
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}), ends)

    actions = _finished_by_worker(run)

    # no finish activity: the orchestration completes with what the end recorded
    assert activities(actions) == []
    result = completed(actions)
    assert result.orchestrationStatus == pb.ORCHESTRATION_STATUS_COMPLETED
    assert json.loads(result.result.value) == {
        "status": "COMPLETED",
        "output": {"text": "hi"},
        "reason": None,
    }
    [given] = ends.given
    assert given.workflow_id == INSTANCE and given.result.output == {"text": "hi"}
    assert [(r.ref, r.status) for r in given.records] == [("p", "COMPLETED")]


def test_an_end_the_local_finish_declines_goes_to_the_finish_activity(
    store: SqlRunStore,
) -> None:
    register(store, WORKER_FLOW)
    ends = _Ends(answer=False)
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}), ends)

    [(_, name, finish)] = activities(_finished_by_worker(run))

    assert len(ends.given) == 1
    assert name == ACTIVITY_FINISH and finish["result"]["output"] == {"text": "hi"}


def test_an_end_whose_finish_activity_was_scheduled_replays_as_its_history_says(
    store: SqlRunStore,
) -> None:
    """A run whose end an orchestrator-only process sent to the finish activity, then
    replayed by a process that hosts the activities too (the engine's roles changed
    between two work items): the replay follows the history, and the activity's answer
    completes the run."""
    register(store, WORKER_FLOW)
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}))
    [(finish_id, name, _)] = activities(_finished_by_worker(run))
    assert name == ACTIVITY_FINISH

    ends = _Ends()
    run.host(ends)
    summary = {"status": "COMPLETED", "output": {"text": "hi"}, "reason": None}
    result = completed(run.step(done(finish_id, summary)))

    assert ends.given == []  # the end was reached in a replayed event: not recorded again
    assert result.orchestrationStatus == pb.ORCHESTRATION_STATUS_COMPLETED
    assert json.loads(result.result.value) == summary


class _Queues:
    """A local dispatch that records what it was given and answers ``answer`` (or, per
    task reference and attempt, ``answers``)."""

    def __init__(
        self, answer: bool = True, answers: dict[tuple[str, int], bool] | None = None
    ) -> None:
        self.answer = answer
        self.answers = answers or {}
        self.given: list[DispatchInput] = []

    def __call__(self, data: DispatchInput) -> bool:
        self.given.append(data)
        return self.answers.get((data.task.ref, data.task.attempt), self.answer)


def _hosting(store: SqlRunStore, queues: _Queues, run: RunInput | None = None) -> Replay:
    """A run (of WORKER_FLOW unless ``run``) in processes that host the activities and
    queue WORKER tasks with ``queues``, each work item replayed in full by Stepway's
    worker context."""
    run = run or RunInput(name="one_worker", version=1, input={"url": "u"})
    return Replay(store, run, local_dispatch=queues, sees_history=True)


def _worker_result(task_id: str, text: str = "hi") -> pb.HistoryEvent:
    return raised(
        result_event(task_id),
        TaskResultEvent(attempt=1, status="COMPLETED", output={"text": text}).payload(),
    )


def test_a_process_hosting_the_activities_queues_a_worker_task_in_its_work_item(
    store: SqlRunStore,
) -> None:
    """No dispatch activity: the task is queued by the work item that starts it, its
    deadline timer armed there; the next work item, replayed in full from the history,
    does not queue it again, and the run ends with the worker's result."""
    register(store, WORKER_FLOW)
    queues = _Queues()
    run = _hosting(store, queues)

    actions = run.step()

    assert activities(actions) == []
    assert [at for _, at in timers(actions)] == [T0 + timedelta(seconds=3600)]
    [given] = queues.given
    assert (given.task.name, given.task.attempt, given.task.input) == ("parse", 1, {"url": "u"})
    assert given.workflow_id == INSTANCE and given.workflow_type == "one_worker"
    assert [r.status for r in given.records] == ["SCHEDULED"]

    [(_, name, finish)] = activities(run.step(_worker_result(given.task.task_id)))
    assert len(queues.given) == 1  # the replay followed the history
    assert name == ACTIVITY_FINISH and finish["result"]["output"] == {"text": "hi"}
    assert [(r["ref"], r["status"]) for r in finish["records"]] == [("p", "COMPLETED")]


def test_a_task_queued_in_a_work_item_replays_in_a_process_that_cannot_queue(
    store: SqlRunStore,
) -> None:
    """The engine's roles changed between two work items: an orchestrator-only process
    replays a task queued by a work item of a process that hosted the activities, and
    follows the history (no dispatch activity now)."""
    register(store, WORKER_FLOW)
    queues = _Queues()
    run = _hosting(store, queues)
    run.step()
    [given] = queues.given

    run.host(None)
    [(_, name, _)] = activities(run.step(_worker_result(given.task.task_id)))

    assert name == ACTIVITY_FINISH


def test_a_task_the_local_dispatch_declines_goes_to_the_dispatch_activity_and_replays_so(
    store: SqlRunStore,
) -> None:
    """A dispatch the work item could not do (the store down, a queue refusing) goes to
    the dispatch activity with its retries; a replay in the same process follows the
    activity its history holds and does not try the local dispatch again."""
    register(store, WORKER_FLOW)
    queues = _Queues(answer=False)
    run = _hosting(store, queues)

    [(dispatch_id, name, dispatch)] = activities(run.step())
    assert name == ACTIVITY_DISPATCH and len(queues.given) == 1
    # the rows the local dispatch was given go with the activity
    assert [r["status"] for r in dispatch["records"]] == ["SCHEDULED"]

    refused = {"error": "input of task 'p': too large", "terminal": True}
    actions = run.step(done(dispatch_id, refused))
    assert len(queues.given) == 1
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert finish["result"]["status"] == "FAILED"
    assert [(r["ref"], r["status"]) for r in finish["records"]] == [
        ("p", "FAILED_WITH_TERMINAL_ERROR")
    ]


FORKED_WORKERS = {
    "name": "two_workers",
    "version": 1,
    "tasks": [
        {
            "name": "fork",
            "taskReferenceName": "f",
            "type": "FORK_JOIN",
            "forkTasks": [
                [{"name": "parse", "taskReferenceName": "a", "type": "WORKER"}],
                [{"name": "parse", "taskReferenceName": "b", "type": "WORKER"}],
            ],
        },
        {"name": "join", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["a", "b"]},
    ],
}


@pytest.mark.parametrize("declined", ["a", "b"])
def test_tasks_queued_here_and_by_the_activity_in_one_work_item_replay_each_as_it_went(
    store: SqlRunStore, declined: str
) -> None:
    """Two WORKER tasks started together, one queued in the work item and one left to
    the dispatch activity: each replays as it went, so the activity's answer reaches its
    own task."""
    register(store, FORKED_WORKERS)
    queues = _Queues(answers={(declined, 1): False})
    run = _hosting(store, queues, RunInput(name="two_workers", version=1))

    [(dispatch_id, _, dispatch)] = activities(run.step())
    assert dispatch["task"]["ref"] == declined
    assert sorted(d.task.ref for d in queues.given) == ["a", "b"]
    other = next(d.task for d in queues.given if d.task.ref != declined)

    # the declined task cannot be queued: it fails the run, the other is canceled
    refused = {"error": f"input of task {declined!r}: too large", "terminal": True}
    actions = run.step(done(dispatch_id, refused))
    assert len(queues.given) == 2
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    rows = {r["ref"]: r["status"] for r in finish["records"]}
    assert rows == {declined: "FAILED_WITH_TERMINAL_ERROR", other.ref: "CANCELED", "j": "CANCELED"}


class _Records:
    """A local record that records what it was given and answers, call by call, from
    ``answers`` (then True)."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.given: list[RecordInput] = []

    def __call__(self, data: RecordInput) -> bool:
        self.given.append(data)
        return self.answers.pop(0) if self.answers else True


TWO_APPROVALS = {
    "name": "two_approvals",
    "version": 1,
    "tasks": [
        {"name": "approve", "taskReferenceName": "h1", "type": "HUMAN"},
        {"name": "approve", "taskReferenceName": "h2", "type": "HUMAN"},
    ],
    "outputParameters": {"by": "${h2.output.by}"},
}


def _approved(data: RecordInput, ref: str) -> pb.HistoryEvent:
    [task_id] = {r.task_id for r in data.records if r.ref == ref}
    payload = TaskResultEvent(attempt=1, status="COMPLETED", output={"by": ref}).payload()
    return raised(result_event(task_id), payload)


@pytest.mark.parametrize("declined", [(), (False,), (True, False)])
def test_a_steps_rows_are_recorded_in_its_work_item_and_replays_follow_either_way(
    store: SqlRunStore, declined: tuple[bool, ...]
) -> None:
    """Two HUMAN tasks: each step's rows (the task waiting, the one before COMPLETED)
    are recorded in the work item that decides it, where the process hosts the
    activities; one the local record could not write goes to the record activity. Every
    work item replayed in full follows the history, whichever way each went."""
    register(store, TWO_APPROVALS)
    records = _Records(*declined)
    run = Replay(
        store,
        RunInput(name="two_approvals", version=1),
        local_record=records,
        sees_history=True,
    )

    def step(*events: pb.HistoryEvent) -> list[Any]:
        actions = run.step(*events)
        recorded = activities(actions, ACTIVITY_RECORD)
        if recorded:  # the local record declined: the activity writes the rows
            [(record_id, _, _)] = recorded
            actions = run.step(done(record_id))
        return actions

    step()
    [first] = records.given
    assert [(r.ref, r.status) for r in first.records] == [("h1", "IN_PROGRESS")]
    step(_approved(first, "h1"))
    assert len(records.given) == 2
    second = records.given[1]
    assert [(r.ref, r.status) for r in second.records] == [
        ("h1", "COMPLETED"),
        ("h2", "IN_PROGRESS"),
    ]
    [(_, name, finish)] = activities(run.step(_approved(second, "h2")))

    assert len(records.given) == 2  # the replays wrote nothing again
    assert name == ACTIVITY_FINISH
    assert finish["result"]["status"] == "COMPLETED"
    assert finish["result"]["output"] == {"by": "h2"}
    scheduled = [e.taskScheduled.name for e in run.history if e.HasField("taskScheduled")]
    assert scheduled.count(ACTIVITY_RECORD) == declined.count(False)


def test_durabletasks_own_executor_always_takes_the_dispatch_activity(
    store: SqlRunStore,
) -> None:
    """A context that cannot tell which activities its history holds (durabletask's own
    executor, used where Stepway's session worker is not) never queues in the work item:
    a replay could not follow it."""
    register(store, WORKER_FLOW)
    queues = _Queues()
    run = Replay(
        store, RunInput(name="one_worker", version=1, input={"url": "u"}), local_dispatch=queues
    )

    [(_, name, _)] = activities(run.step())

    assert name == ACTIVITY_DISPATCH and queues.given == []


def test_a_result_for_another_attempt_is_ignored(store: SqlRunStore) -> None:
    register(store, WORKER_FLOW)
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}))
    [(dispatch_id, _, dispatch)] = activities(run.step())
    task_id = dispatch["task"]["taskId"]

    stale = TaskResultEvent(attempt=2, status="COMPLETED", output={"text": "late"})
    assert (
        activities(run.step(done(dispatch_id), raised(result_event(task_id), stale.payload())))
        == []
    )

    fresh = TaskResultEvent(attempt=1, status="COMPLETED", output={"text": "hi"})
    [(_, name, finish)] = activities(run.step(raised(result_event(task_id), fresh.payload())))
    assert name == ACTIVITY_FINISH and finish["result"]["output"] == {"text": "hi"}


def test_a_failed_attempt_is_retried_after_its_delay_on_a_durable_timer(
    store: SqlRunStore,
) -> None:
    register(
        store,
        WORKER_FLOW,
        {"name": "parse", "retryCount": 1, "retryLogic": "FIXED", "retryDelaySeconds": 10},
    )
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}))
    [(dispatch_id, _, dispatch)] = activities(run.step())
    task_id = dispatch["task"]["taskId"]

    failed = TaskResultEvent(attempt=1, status="FAILED", reason="boom")
    actions = run.step(done(dispatch_id), raised(result_event(task_id), failed.payload()))
    [(_, name, retry)] = activities(actions)
    assert name == ACTIVITY_DISPATCH
    assert (retry["task"]["attempt"], retry["task"]["delaySeconds"]) == (2, 10.0)


def test_terminate_ends_the_run_and_cancels_the_waiting_task(store: SqlRunStore) -> None:
    register(store, WORKER_FLOW)
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}))
    [(dispatch_id, _, _)] = activities(run.step())

    actions = run.step(
        done(dispatch_id), raised(TERMINATE_EVENT, TerminateEvent(reason="stop").payload())
    )
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert (finish["result"]["status"], finish["result"]["reason"]) == ("TERMINATED", "stop")
    assert [(r["ref"], r["status"]) for r in finish["records"]] == [("p", "CANCELED")]


def test_a_wait_task_is_a_durable_timer(store: SqlRunStore) -> None:
    register(
        store,
        {
            "name": "pause",
            "tasks": [
                {
                    "name": "w",
                    "taskReferenceName": "w",
                    "type": "WAIT",
                    "inputParameters": {"duration": "30s"},
                }
            ],
        },
    )
    run = Replay(store, RunInput(name="pause", version=1))
    actions = run.step()
    [(timer_id, fire_at)] = timers(actions)
    assert fire_at == T0 + timedelta(seconds=30)
    # the SCHEDULED row is recorded while the timer runs
    assert [a[1] for a in activities(actions)] == [ACTIVITY_RECORD]
    record_id = activities(actions)[0][0]

    actions = run.step(
        done(record_id),
        helpers.new_timer_fired_event(timer_id, fire_at),
        at=fire_at,
    )
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH and finish["result"]["status"] == "COMPLETED"


def test_a_run_whose_definition_is_gone_is_finished_failed(store: SqlRunStore) -> None:
    run = Replay(store, RunInput(name="missing", version=3))
    [(_, name, finish)] = activities(run.step())
    assert name == ACTIVITY_FINISH
    assert finish["result"]["status"] == "FAILED"
    assert "'missing'" in finish["result"]["reason"] and "3" in finish["result"]["reason"]


def test_a_long_run_carries_its_state_into_a_new_execution(store: SqlRunStore) -> None:
    steps = STEPS_PER_EXECUTION + 2
    register(
        store,
        {
            "name": "long",
            "tasks": [
                {
                    "name": "get",
                    "taskReferenceName": f"g{i}",
                    "type": "HTTP",
                    "inputParameters": {"http_request": {"uri": "http://x"}},
                }
                for i in range(steps)
            ],
        },
    )
    run = Replay(store, RunInput(name="long", version=1))
    actions = run.step()
    for i in range(STEPS_PER_EXECUTION):
        [(activity_id, _, call)] = activities(actions, ACTIVITY_BUILTIN)
        assert call["task"]["ref"] == f"g{i}"
        envelope = {"status": "COMPLETED", "output": {"i": i}}
        actions = run.step(done(activity_id, envelope))

    # at a point with nothing outstanding, the state goes into a new execution
    carried = completed(actions)
    assert carried.orchestrationStatus == pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW
    next_input = RunInput.model_validate(json.loads(carried.result.value))
    assert (next_input.name, next_input.executions) == ("long", 1)
    assert next_input.started_at_ms == int(T0.timestamp() * 1000)
    state = next_input.state or {}
    last = f"g{STEPS_PER_EXECUTION - 1}"
    # only the live part of the state is carried: the task that finished last, whose row
    # the next execution records
    assert list(state["tasks"]) == [last] and state["dirty"] == [last]


SUB_FLOW = {
    "name": "parent",
    "tasks": [
        {
            "name": "sub",
            "taskReferenceName": "sub",
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {"name": "child", "version": 1},
        }
    ],
}
#: what the resolve activity returns once it wrote the child's run row
RESOLVED = {"name": "child", "version": 1, "definitionRef": "ref-1"}
STOP = TerminateEvent(reason="stop").payload()


def _resolving(store: SqlRunStore) -> tuple[Replay, int, str]:
    """A run whose SUB_WORKFLOW attempt's resolve activity runs: (run, its id, child id)."""
    register(store, SUB_FLOW)
    run = Replay(store, RunInput(name="parent", version=1))
    [(resolve_id, name, resolve)] = activities(run.step())
    assert name == ACTIVITY_RESOLVE_CHILD
    child_id: str = resolve["childId"]
    assert child_id == f"{resolve['task']['taskId']}-1"
    return run, resolve_id, child_id


def _started_children(actions: list[Any]) -> list[str]:
    return [
        a.createSubOrchestration.instanceId for a in actions if a.HasField("createSubOrchestration")
    ]


def test_a_run_terminated_while_its_child_is_resolved_ends_the_child_when_it_finishes(
    store: SqlRunStore,
) -> None:
    run, resolve_id, child_id = _resolving(store)

    # the resolve may still write the child's run row: the run's end waits for it
    assert run.step(raised(TERMINATE_EVENT, STOP)) == []

    actions = run.step(done(resolve_id, RESOLVED))
    assert _started_children(actions) == []
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert (finish["result"]["status"], finish["cancelChildren"]) == ("TERMINATED", [child_id])
    assert [(r["ref"], r["status"]) for r in finish["records"]] == [("sub", "CANCELED")]


def test_a_child_resolved_in_the_step_that_terminates_the_run_is_ended(
    store: SqlRunStore,
) -> None:
    run, resolve_id, child_id = _resolving(store)

    # the terminate is handled first; the resolve's answer came with it, unread
    actions = run.step(raised(TERMINATE_EVENT, STOP), done(resolve_id, RESOLVED))
    assert _started_children(actions) == []
    [(_, name, finish)] = activities(actions)
    assert (name, finish["cancelChildren"]) == (ACTIVITY_FINISH, [child_id])


def test_a_child_whose_resolve_failed_is_ended_and_one_it_refused_is_not(
    store: SqlRunStore,
) -> None:
    # failed for good (after its retries): it may have written the row before it failed
    run, resolve_id, child_id = _resolving(store)
    run.step(raised(TERMINATE_EVENT, STOP))
    actions = run.step(helpers.new_task_failed_event(resolve_id, RuntimeError("store down")))
    while timers(actions):  # the retry policy's delays, each followed by another attempt
        [(timer_id, fire_at)] = timers(actions)
        [(resolve_id, name, _)] = activities(
            run.step(helpers.new_timer_fired_event(timer_id, fire_at), at=fire_at)
        )
        assert name == ACTIVITY_RESOLVE_CHILD
        actions = run.step(helpers.new_task_failed_event(resolve_id, RuntimeError("store down")))
    [(_, name, finish)] = activities(actions)
    assert (name, finish["cancelChildren"]) == (ACTIVITY_FINISH, [child_id])

    # refused (no such definition): it wrote no row
    run, resolve_id, _ = _resolving(store)
    run.step(raised(TERMINATE_EVENT, STOP))
    [(_, name, finish)] = activities(run.step(done(resolve_id, {"error": "no workflow child"})))
    assert (name, finish["cancelChildren"]) == (ACTIVITY_FINISH, [])


@pytest.mark.parametrize("sees_history", [False, True])
def test_a_resumed_sub_workflow_waits_for_its_childs_end_event(
    store: SqlRunStore, sees_history: bool
) -> None:
    """A retry that resumes the SUB_WORKFLOW task in place (``ReplayTask.resume``): the
    run starts no child and resolves none; its row goes IN_PROGRESS with the next record,
    and the child's end, raised as ``<taskId>.child``, ends the task as a
    sub-orchestration's completion would."""
    register(store, SUB_FLOW)
    kept = ReplayTask(
        ref="sub",
        task_id="ts",
        seq=1,
        status="FAILED",
        output={"subWorkflowId": "ts-1"},
        resume=True,
    )
    run = Replay(
        store,
        RunInput(name="parent", version=1, generation="g2", replay=[kept], seq_base=1),
        sees_history=sees_history,
    )
    actions = run.step()
    assert _started_children(actions) == []
    [(_, name, record)] = activities(actions)
    assert name == ACTIVITY_RECORD  # no resolve activity: the child exists
    assert [(r["ref"], r["taskId"], r["status"]) for r in record["records"]] == [
        ("sub", "ts", "IN_PROGRESS")
    ]
    actions = run.step(done(activities(actions)[0][0]))
    assert not any(a.HasField("completeOrchestration") for a in actions)

    end = {"status": "COMPLETED", "output": {"answer": 42}}
    actions = run.step(raised(child_end_event("ts"), end))
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    [row] = finish["records"]
    assert (row["ref"], row["status"], row["output"]) == (
        "sub",
        "COMPLETED",
        {"subWorkflowId": "ts-1", "answer": 42},
    )
    assert finish["result"]["status"] == "COMPLETED"


def _defect_after_the_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Decider takes the outcome in, then raises: its state is changed, unrecorded."""
    real = Decider.on_outcome

    def on_outcome(self: Decider, state: Any, outcome: Any, now_ms: int) -> Any:
        real(self, state, outcome, now_ms)
        raise RuntimeError("injected defect")

    monkeypatch.setattr(Decider, "on_outcome", on_outcome)


def _defect_run(store: SqlRunStore) -> tuple[Replay, list[Any]]:
    """WORKER_FLOW with its task's result raised: the actions of that step."""
    register(store, WORKER_FLOW)
    run = Replay(store, RunInput(name="one_worker", version=1, input={"url": "u"}))
    [(dispatch_id, _, dispatch)] = activities(run.step())
    task_id = dispatch["task"]["taskId"]
    actions = run.step(
        done(dispatch_id, {"queue": "parse"}),
        raised(result_event(task_id), TaskResultEvent(attempt=1, status="COMPLETED").payload()),
    )
    return run, actions


def test_a_defect_ends_the_run_failed_with_the_rows_of_its_step(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _defect_after_the_outcome(monkeypatch)
    run, actions = _defect_run(store)
    [(finish_id, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert (finish["result"]["status"], finish["result"]["reason"]) == (
        "FAILED",
        "interpreter error: RuntimeError: injected defect",
    )
    # the row the step was about to record is recorded with the run's end
    assert [(r["ref"], r["status"]) for r in finish["records"]] == [("p", "COMPLETED")]
    # a replay of the whole history takes the same path to the same end
    summary = {"status": "FAILED", "output": {}, "reason": finish["result"]["reason"]}
    result = completed(run.step(done(finish_id, summary)))
    assert result.orchestrationStatus == pb.ORCHESTRATION_STATUS_COMPLETED


def test_a_defect_whose_ending_raises_is_recorded_failed_alone(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _defect_after_the_outcome(monkeypatch)

    def fail(self: Decider, state: Any, reason: str, now_ms: int) -> Any:
        raise RuntimeError("the ending is broken too")

    monkeypatch.setattr(Decider, "fail", fail, raising=False)
    run, actions = _defect_run(store)
    [(finish_id, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert (finish["result"]["status"], finish["result"]["reason"]) == (
        "FAILED",
        "interpreter error: RuntimeError: injected defect",
    )
    assert finish["records"] == []
    summary = {"status": "FAILED", "output": {}, "reason": finish["result"]["reason"]}
    result = completed(run.step(done(finish_id, summary)))
    assert result.orchestrationStatus == pb.ORCHESTRATION_STATUS_COMPLETED


def test_a_defect_whose_finish_fails_for_good_is_recorded_failed_alone(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full ending's finish activity fails after its retries (a row it carries the
    store refuses, say): the run is finished again with nothing but its status."""
    _defect_after_the_outcome(monkeypatch)
    run, actions = _defect_run(store)
    [(finish_id, name, finish)] = activities(actions)
    assert finish["records"]
    actions = run.step(helpers.new_task_failed_event(finish_id, RuntimeError("refused")))
    while timers(actions):  # the retry policy's delays, each followed by another attempt
        [(timer_id, fire_at)] = timers(actions)
        [(finish_id, name, _)] = activities(
            run.step(helpers.new_timer_fired_event(timer_id, fire_at), at=fire_at)
        )
        assert name == ACTIVITY_FINISH
        actions = run.step(helpers.new_task_failed_event(finish_id, RuntimeError("refused")))
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert finish["result"]["status"] == "FAILED" and finish["records"] == []


# --- built-in steps done in the work item (LocalBuiltin) --------------------------------

BUILTIN_THEN_WORKER = {
    "name": "builtin_then_worker",
    "version": 1,
    "tasks": [
        {
            "name": "call",
            "taskReferenceName": "h",
            "type": "HTTP",
            "inputParameters": {"http_request": {"uri": "http://example.test/n"}},
        },
        {
            "name": "parse",
            "taskReferenceName": "p",
            "type": "WORKER",
            "inputParameters": {"n": "${h.output.n}"},
        },
        {
            "name": "double",
            "taskReferenceName": "i",
            "type": "INLINE",
            "inputParameters": {
                "evaluatorType": "javascript",
                "expression": "$.n * 2",
                "n": "${h.output.n}",
            },
        },
    ],
    "outputParameters": {
        "n": "${h.output.n}",
        "text": "${p.output.text}",
        "r": "${i.output.result}",
    },
}

TWO_CALLS = {
    "name": "two_calls",
    "version": 1,
    "tasks": [
        {
            "name": "call",
            "taskReferenceName": ref,
            "type": "HTTP",
            "inputParameters": {"http_request": {"uri": f"http://example.test/{ref}"}},
        }
        for ref in ("h1", "h2")
    ],
    "outputParameters": {"first": "${h1.output.n}", "second": "${h2.output.n}"},
}

FORKED_CALLS = {
    "name": "forked_calls",
    "version": 1,
    "tasks": [
        {
            "name": "fork",
            "taskReferenceName": "f",
            "type": "FORK_JOIN",
            "forkTasks": [[step] for step in TWO_CALLS["tasks"]],  # type: ignore[attr-defined]
        },
        {"name": "join", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["h1", "h2"]},
    ],
    "outputParameters": {"first": "${h1.output.n}", "second": "${h2.output.n}"},
}


def _ms(moment: datetime) -> int:
    return int(moment.replace(tzinfo=UTC).timestamp() * 1000)


class _Builtins:
    """A local built-in step that answers each task with a COMPLETED envelope of
    ``outputs[ref]`` (None, declined, for the refs in ``declined``) and keeps it; its
    :meth:`result` reads what it kept, as ``RunActivities.builtin_result`` does."""

    def __init__(self, outputs: dict[str, dict[str, Any]], declined: tuple[str, ...] = ()):
        self.outputs = outputs
        self.declined = declined
        self.done: list[BuiltinInput] = []
        self.kept: dict[tuple[str, int], KeptStep] = {}
        self.read: list[str] = []

    def __call__(self, data: BuiltinInput, execution: int) -> KeptStep | None:
        assert execution == 0
        self.done.append(data)
        if data.task.ref in self.declined:
            return None
        envelope = {"status": "COMPLETED", "output": self.outputs[data.task.ref]}
        # the step ended a second after the work item began per step done so far
        kept = KeptStep(result=envelope, kept_at=_ms(T0) + 1000 * len(self.done))
        self.kept[(data.task.task_id, data.task.attempt)] = kept
        return kept

    def result(self, workflow_id: str, task_id: str, attempt: int) -> KeptStep | None:
        assert workflow_id == INSTANCE
        self.read.append(task_id)
        return self.kept.get((task_id, attempt))


def _doing_builtins(store: SqlRunStore, name: str, builtins: _Builtins) -> Replay:
    """A run of ``name`` in processes that do built-in steps in their work items, each
    work item replayed in full by Stepway's worker context."""
    return Replay(
        store,
        RunInput(name=name, version=1),
        local_builtin=builtins,
        builtin_result=builtins.result,
        sees_history=True,
    )


def _scheduled(run: Replay) -> list[str]:
    return [e.taskScheduled.name for e in run.history if e.HasField("taskScheduled")]


def test_a_builtin_step_is_done_in_its_work_item_and_replays_read_the_result_it_kept(
    store: SqlRunStore,
) -> None:
    """HTTP, then a WORKER task, then INLINE: the HTTP step is done in the first work
    item (no built-in activity), the next work items, each replayed in full, read its
    result from what it kept instead of calling again, and the INLINE step is done in
    the work item of the worker's result."""
    register(store, BUILTIN_THEN_WORKER)
    builtins = _Builtins({"h": {"n": 2}, "i": {"result": 4}})
    run = _doing_builtins(store, "builtin_then_worker", builtins)

    [(dispatch_id, name, dispatch)] = activities(run.step())
    assert name == ACTIVITY_DISPATCH
    [http] = builtins.done
    assert (http.task.ref, http.task.attempt, http.workflow_id) == ("h", 1, INSTANCE)
    assert [(r.ref, r.status) for r in http.records] == [("h", "SCHEDULED")]
    # the next step's input and rows from the result the work item got, at the time
    # the step ended (kept with it), not the work item's start
    assert dispatch["task"]["input"] == {"n": 2}
    ended = _ms(T0) + 1000
    assert [
        (r["ref"], r["status"], r["endTime"], r["scheduledTime"]) for r in dispatch["records"]
    ] == [("h", "COMPLETED", ended, _ms(T0)), ("p", "SCHEDULED", None, ended)]
    assert builtins.read == []

    assert activities(run.step(done(dispatch_id, {"queue": "parse"}))) == []
    assert builtins.read == [http.task.task_id] and len(builtins.done) == 1

    [(_, name, finish)] = activities(run.step(_worker_result(dispatch["task"]["taskId"], "hi")))
    assert [d.task.ref for d in builtins.done] == ["h", "i"]
    assert builtins.read == [http.task.task_id] * 2
    assert name == ACTIVITY_FINISH
    assert finish["result"]["output"] == {"n": 2, "text": "hi", "r": 4}
    assert [(r["ref"], r["status"]) for r in finish["records"]] == [("i", "COMPLETED")]
    assert ACTIVITY_BUILTIN not in _scheduled(run)


def test_a_builtin_step_done_in_a_work_item_is_not_replayed_where_its_result_cannot_be_read(
    store: SqlRunStore,
) -> None:
    """An orchestrator-only process (no run store to read the kept result from) gives
    the work item back undecided instead of calling again or guessing."""
    register(store, BUILTIN_THEN_WORKER)
    builtins = _Builtins({"h": {"n": 2}, "i": {"result": 4}})
    run = _doing_builtins(store, "builtin_then_worker", builtins)
    [(dispatch_id, _, _)] = activities(run.step())

    run.host(None)
    with pytest.raises(DecisionDeferred, match="'h' was done in a work item"):
        run.step(done(dispatch_id, {"queue": "parse"}))
    assert len(builtins.done) == 1


def test_a_builtin_step_whose_kept_result_is_gone_fails_the_run_naming_it(
    store: SqlRunStore,
) -> None:
    register(store, BUILTIN_THEN_WORKER)
    builtins = _Builtins({"h": {"n": 2}, "i": {"result": 4}})
    run = _doing_builtins(store, "builtin_then_worker", builtins)
    [(dispatch_id, _, _)] = activities(run.step())
    builtins.kept.clear()

    [(_, name, finish)] = activities(run.step(done(dispatch_id, {"queue": "parse"})))

    assert name == ACTIVITY_FINISH and finish["result"]["status"] == "FAILED"
    assert "the result of task 'h' (attempt 1)" in finish["result"]["reason"]
    assert len(builtins.done) == 1  # never called again


def test_a_builtin_step_the_work_item_declines_goes_to_the_activity_and_replays_so(
    store: SqlRunStore,
) -> None:
    """The first call declined (a store unavailable in the work item): the built-in
    activity does it, with the rows the work item was given; the second step is done in
    the work item of the first's completion; the replays follow each as it went."""
    register(store, TWO_CALLS)
    builtins = _Builtins({"h1": {"n": 1}, "h2": {"n": 2}}, declined=("h1",))
    run = _doing_builtins(store, "two_calls", builtins)

    [(call_id, name, call)] = activities(run.step())
    assert name == ACTIVITY_BUILTIN and call["task"]["ref"] == "h1"
    assert [r["status"] for r in call["records"]] == ["SCHEDULED"]

    [(_, name, finish)] = activities(
        run.step(done(call_id, {"status": "COMPLETED", "output": {"n": 1}}))
    )
    assert [d.task.ref for d in builtins.done] == ["h1", "h2"]
    assert name == ACTIVITY_FINISH
    assert finish["result"]["output"] == {"first": 1, "second": 2}
    assert _scheduled(run) == [ACTIVITY_BUILTIN, ACTIVITY_FINISH]


def test_builtin_steps_started_together_go_to_the_activity(store: SqlRunStore) -> None:
    """The branches of a fork run at once: two calls started by one decision are both
    built-in activities, not done one after the other in the work item."""
    register(store, FORKED_CALLS)
    builtins = _Builtins({"h1": {"n": 1}, "h2": {"n": 2}})
    run = _doing_builtins(store, "forked_calls", builtins)

    calls = activities(run.step())

    assert sorted((name, call["task"]["ref"]) for _, name, call in calls) == [
        (ACTIVITY_BUILTIN, "h1"),
        (ACTIVITY_BUILTIN, "h2"),
    ]
    assert builtins.done == []


def test_a_work_item_that_spent_its_time_on_builtin_steps_leaves_the_next_to_the_activity(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the work item has spent LOCAL_BUILTIN_SECONDS on built-in steps, the next
    goes to the activity (the work item ends, so that a terminate waiting for it is
    taken in); a replay follows both."""
    monkeypatch.setattr(interpreter, "LOCAL_BUILTIN_SECONDS", 1e-9)
    register(store, TWO_CALLS)
    builtins = _Builtins({"h1": {"n": 1}, "h2": {"n": 2}})
    run = _doing_builtins(store, "two_calls", builtins)

    [(call_id, name, call)] = activities(run.step())
    assert [d.task.ref for d in builtins.done] == ["h1"]
    assert name == ACTIVITY_BUILTIN and call["task"]["ref"] == "h2"

    [(_, name, finish)] = activities(
        run.step(done(call_id, {"status": "COMPLETED", "output": {"n": 2}}))
    )
    assert len(builtins.done) == 1 and len(builtins.read) == 1
    assert name == ACTIVITY_FINISH and finish["result"]["output"] == {"first": 1, "second": 2}


def test_durabletasks_own_executor_always_takes_the_builtin_activity(
    store: SqlRunStore,
) -> None:
    register(store, TWO_CALLS)
    builtins = _Builtins({"h1": {"n": 1}, "h2": {"n": 2}})
    run = Replay(
        store,
        RunInput(name="two_calls", version=1),
        local_builtin=builtins,
        builtin_result=builtins.result,
    )

    [(_, name, _)] = activities(run.step())

    assert name == ACTIVITY_BUILTIN and builtins.done == []


def test_a_defect_as_a_child_starts_ends_the_child_run_with_the_parent(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resolve activity wrote the child's run row; the Decider raises taking the
    child's start in: the parent ends FAILED and the child's row is ended with it,
    never left RUNNING with no orchestration behind it."""

    def on_child_started(self: Decider, *args: Any) -> Any:
        raise RuntimeError("injected defect")

    monkeypatch.setattr(Decider, "on_child_started", on_child_started)
    run, resolve_id, child_id = _resolving(store)
    actions = run.step(done(resolve_id, RESOLVED))
    assert _started_children(actions) == []
    [(_, name, finish)] = activities(actions)
    assert name == ACTIVITY_FINISH
    assert (finish["result"]["status"], finish["result"]["reason"]) == (
        "FAILED",
        "interpreter error: RuntimeError: injected defect",
    )
    assert finish["cancelChildren"] == [child_id]

    # and when ending the run as a terminated one raises too: the bare FAILED end
    def fail(self: Decider, state: Any, reason: str, now_ms: int) -> Any:
        raise RuntimeError("the ending is broken too")

    monkeypatch.setattr(Decider, "fail", fail, raising=False)
    run, resolve_id, child_id = _resolving(store)
    [(_, name, finish)] = activities(run.step(done(resolve_id, RESOLVED)))
    assert (name, finish["result"]["status"]) == (ACTIVITY_FINISH, "FAILED")
    assert finish["cancelChildren"] == [child_id]


def test_rows_too_many_for_one_message_are_recorded_in_parts_before_the_end(
    store: SqlRunStore,
) -> None:
    """3,000 SET_VARIABLE iterations decided in one step: their rows (about 1.5 MB) do
    not fit the run's last message (1 MiB), so they go to record activities in parts
    that fit, in order, and the finish carries none of them."""
    iterations = 3000
    register(
        store,
        {
            "name": "many_rows",
            "tasks": [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": f"$.loop['iteration'] < {iterations}",
                    "loopOver": [
                        {
                            "name": "count",
                            "taskReferenceName": "count",
                            "type": "SET_VARIABLE",
                            "inputParameters": {"n": "${loop.output.iteration}"},
                        }
                    ],
                }
            ],
        },
    )
    limit = RunLimits().max_message_bytes
    run = Replay(store, RunInput(name="many_rows", version=1))
    actions = run.step()
    recorded: list[str] = []
    while True:
        [(activity_id, name, data)] = activities(actions)
        size = len(next(a for a in actions if a.HasField("scheduleTask")).scheduleTask.input.value)
        assert size <= limit
        if name == ACTIVITY_FINISH:
            assert data["records"] == []
            assert data["result"]["status"] == "COMPLETED"
            break
        assert name == ACTIVITY_RECORD
        recorded += [r["ref"] for r in data["records"]]
        actions = run.step(done(activity_id))
    assert recorded[:2] == ["loop", "count__1"]
    assert sorted(recorded) == sorted(["loop"] + [f"count__{n}" for n in range(1, iterations + 1)])
