"""Orchestration sessions change no decision: on every work item of runs that fork, loop,
retry a failed worker task, evaluate scripts and set variables, the actions the
interpreter returns from its live session are the ones a full replay of the work item's
history returns (engine/adapters/backend/sessions.py).

Whether a built-in step is done in the work item the first time (engine/runtime/local_steps.py)
depends on the moment: a free slot, an idle evaluator process, the time the step took. It is
an input of the work item, as the clock is, and fixed by the history and the run store from
then on. The shadow's full replay is given the live session's gate outcomes, in order, so the
two are compared on the same inputs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import durabletask.internal.orchestrator_service_pb2 as pb
import pytest

from engine.adapters.backend import sessions
from engine.language.definitions import RunStatus, TaskStatus
from engine.runtime.local_steps import LocalSteps


class _Shadow:
    """Wraps the session's apply: after it, the same work item is replayed in full on a
    fresh executor and both action lists are compared."""

    def __init__(self) -> None:
        self.compared = 0
        self.served_by_session = 0
        self.differences: list[tuple[str, list[str], list[str]]] = []
        self.local = threading.local()
        self.lock = threading.Lock()
        #: work items whose live session did a built-in step in the work item (the gate said yes)
        self.with_steps_here = 0


def _kinds(actions: Sequence[pb.OrchestratorAction]) -> list[str]:
    return [str(a.WhichOneof("orchestratorActionType")) for a in actions]


@pytest.fixture
def shadow(monkeypatch: pytest.MonkeyPatch) -> _Shadow:
    seen = _Shadow()
    execute = sessions.SessionWorkerMixin._execute_orchestrator
    apply = sessions.SessionWorkerMixin._apply
    gate_run = LocalSteps.run

    def run_gated(gate: LocalSteps, task: tuple[str, ...], work: Any) -> Any:
        """The live session's gate outcomes are kept, in order; the fresh replay's first
        executions are given them (without doing the step again)."""
        mode = getattr(seen.local, "mode", None)
        if mode == "fresh":
            outcomes = seen.local.outcomes
            if not outcomes:
                return None
            raised, value = outcomes.pop(0)
            if raised:
                raise value
            return value
        try:
            value = gate_run(gate, task, work)
        except Exception as exc:
            if mode == "live":
                seen.local.outcomes.append((True, exc))
            raise
        if mode == "live":
            seen.local.outcomes.append((False, value))
        return value

    def execute_orchestrator(self: Any, req: pb.OrchestratorRequest, stub: Any, token: Any) -> None:
        seen.local.work = (self, req)
        execute(self, req, stub, token)

    def apply_shadowed(
        session: Any, replay: Sequence[pb.HistoryEvent], new: Sequence[pb.HistoryEvent]
    ) -> Any:
        seen.local.mode, seen.local.outcomes = "live", []
        try:
            status = apply(session, replay, new)
        finally:
            seen.local.mode = None
        worker, req = seen.local.work
        live = [a.SerializeToString(deterministic=True) for a in session.ctx.get_actions()]
        here = any(not raised and value is not None for raised, value in seen.local.outcomes)
        fresh = sessions.SessionWorkerMixin._fresh(req.instanceId, worker, req)
        seen.local.mode = "fresh"
        try:
            apply(fresh, req.pastEvents, req.newEvents)
        finally:
            seen.local.mode = None
        replayed = [a.SerializeToString(deterministic=True) for a in fresh.ctx.get_actions()]
        with seen.lock:
            seen.compared += 1
            seen.with_steps_here += here
            if len(replay) < len(req.pastEvents):
                seen.served_by_session += 1
            if live != replayed:
                seen.differences.append(
                    (
                        req.instanceId,
                        _kinds(session.ctx.get_actions()),
                        _kinds(fresh.ctx.get_actions()),
                    )
                )
        return status

    monkeypatch.setattr(sessions.SessionWorkerMixin, "_execute_orchestrator", execute_orchestrator)
    monkeypatch.setattr(sessions.SessionWorkerMixin, "_apply", staticmethod(apply_shadowed))
    monkeypatch.setattr(LocalSteps, "run", run_gated)
    return seen


def test_sessions_decide_what_a_full_replay_decides(platform: Any, shadow: _Shadow) -> None:
    platform.register_task_def(
        {"name": "flaky", "retryCount": 1, "retryDelaySeconds": 0, "responseTimeoutSeconds": 60}
    )
    platform.register_task_def({"name": "steady", "retryCount": 0, "responseTimeoutSeconds": 60})
    platform.register(
        {
            "name": "shapes",
            "version": 1,
            "tasks": [
                {
                    "name": "set",
                    "taskReferenceName": "set",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"seen": 0},
                },
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [{"name": "flaky", "taskReferenceName": "a", "type": "WORKER"}],
                        [{"name": "steady", "taskReferenceName": "b", "type": "WORKER"}],
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
                            "name": "calc",
                            "taskReferenceName": "calc",
                            "type": "INLINE",
                            "inputParameters": {
                                "evaluatorType": "javascript",
                                "expression": "$.n * 2",
                                "n": "${loop.output.iteration}",
                            },
                        }
                    ],
                },
            ],
        }
    )
    runs = [platform.start("shapes", workflow_id=f"shapes-{i}") for i in range(3)]
    for _ in range(2 * len(runs)):  # each run's flaky task fails its first attempt
        body = platform.take("flaky", signal=False)
        if body["attempt"] == 1:
            platform.complete(body, status="FAILED", reason="the first attempt fails")
        else:
            platform.complete(body, {"ok": True})
    for _ in runs:
        platform.work("steady", lambda task_input: {"ok": True})
    for workflow_id in runs:
        run = platform.wait(workflow_id)
        assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
        rows = platform.tasks(workflow_id)
        assert rows["a"].attempt == 2 and rows["a"].status == TaskStatus.COMPLETED

    assert shadow.differences == []
    # the comparison covered work items that the sessions served: at least two a run after
    # its first, the failed attempt's and its retry's (which that one schedules); the
    # steady branch's result and the loop's steps may share them (events that arrive
    # together are one work item: on a busy machine four a run became three)
    assert shadow.served_by_session >= len(runs) * 2, (shadow.compared, shadow.served_by_session)
    # and work items that did built-in steps in them (the gate's outcomes were compared too)
    assert shadow.with_steps_here >= 1, shadow.compared
