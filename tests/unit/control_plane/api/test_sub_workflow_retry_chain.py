"""What the control plane does when a child run is retried while its parent failed with it
(conductor-oss's ``updateAndPushParents``; control_plane/services/replays.py): which runs
it starts, in which order and with what, and what the parent learns when the child cannot
be started. No engine runs here: the durable backend's signals are recorded, the run
store is real; the end-to-end behaviour is in tests/e2e/conductor/test_sub_workflow_retry.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from engine.ports.run_store import (
    NewRun,
    RunStatus,
    RunUpdate,
    TaskRecord,
    TaskStatus,
    TaskUpdate,
)
from protocol.events import child_end_event
from protocol.runs import child_run_id
from tests.unit.control_plane.conftest import Server

PARENT, TASK = "parent-1", "task-sub"
CHILD = child_run_id(TASK, 1)


def _failed_parent_and_child(srv: Server) -> None:
    """A parent whose SUB_WORKFLOW ``sub`` failed with its child, whose worker task
    failed: both runs FAILED, as the engine leaves them."""
    srv.register({"name": "w", "retryCount": 0})
    definitions = [
        {"name": "child", "version": 1, "tasks": [{"name": "w", "taskReferenceName": "w"}]},
        {
            "name": "parent",
            "version": 1,
            "tasks": [
                {
                    "name": "sub",
                    "taskReferenceName": "sub",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "child", "version": 1},
                }
            ],
        },
    ]
    r = srv.client.put("/api/metadata/workflow", json=definitions)
    assert r.status_code == 200, r.text
    store, now = srv.deps.run_store, srv.deps.clock()
    for workflow_id, name, parent in ((PARENT, "parent", None), (CHILD, "child", PARENT)):
        store.create_run(
            NewRun(
                workflow_id=workflow_id,
                name=name,
                version=1,
                parent_workflow_id=parent,
                parent_task_id=TASK if parent else None,
                create_time=now,
            )
        )
        store.update_run(
            workflow_id, RunUpdate(status=RunStatus.FAILED, reason_for_incompletion="w"), now
        )
    rows = [
        (PARENT, TASK, "sub", "SUB_WORKFLOW", {"subWorkflowId": CHILD}),
        (CHILD, "task-w", "w", "WORKER", {}),
    ]
    for workflow_id, task_id, ref, kind, output in rows:
        store.upsert_task(
            TaskRecord(
                task_id=task_id,
                workflow_id=workflow_id,
                reference_task_name=ref,
                task_type=kind,
                task_def_name=ref,
                status=TaskStatus.FAILED,
                seq=1,
                output_data=output,
                reason_for_incompletion="failed",
                end_time=now,
            ),
            now,
        )


def _starts(srv: Server) -> list[tuple[str, dict[str, Any]]]:
    return [(c.workflow_id, c.data) for c in srv.signals.calls if c.kind == "start"]


def _retry_while(srv: Server, workflow_id: str, end: Callable[[], None]) -> Any:
    """``POST /workflow/{id}/retry`` while ``end`` (the engine's end of some run, played
    here) is written half a second later in another thread; the response."""

    def later() -> None:
        time.sleep(0.5)
        end()

    ending = threading.Thread(target=later)
    ending.start()
    r = srv.client.post(f"/api/workflow/{workflow_id}/retry")
    ending.join()
    return r


def test_a_childs_retry_starts_its_parent_first_waiting_for_it_in_place(srv: Server) -> None:
    _failed_parent_and_child(srv)
    r = srv.client.post(f"/api/workflow/{CHILD}/retry")
    assert r.status_code == 204, r.text

    # the parent first, so that it waits before the child can end
    starts = _starts(srv)
    assert [workflow_id for workflow_id, _ in starts] == [PARENT, CHILD]
    parent_input, child_input = starts[0][1], starts[1][1]
    [kept] = parent_input["replay"]
    assert (kept["taskId"], kept["resume"]) == (TASK, True)
    assert "reportEnd" not in parent_input  # its own parent does not wait for it
    assert child_input["reportEnd"] is True
    assert child_input["replay"][0]["resume"] is False

    store = srv.deps.run_store
    parent = store.get_run(PARENT)
    assert parent is not None and parent.status == RunStatus.RUNNING
    row = store.get_task(TASK)
    assert row is not None
    assert (row.status, row.attempt, row.output_data, row.reason_for_incompletion) == (
        TaskStatus.IN_PROGRESS,
        1,
        {"subWorkflowId": CHILD},
        None,
    )
    # the child's failed attempt is replaced: retried, as Conductor marks it
    failed = store.get_task("task-w")
    assert failed is not None and failed.retried


def test_a_child_that_cannot_be_started_again_is_reported_to_its_waiting_parent(
    srv: Server,
) -> None:
    _failed_parent_and_child(srv)
    srv.signals.refuse_runs.add(CHILD)
    r = srv.client.post(f"/api/workflow/{CHILD}/retry")
    assert r.status_code == 503, r.text

    # the parent was started again and waits: it is told the child ended as it was
    assert [workflow_id for workflow_id, _ in _starts(srv)] == [PARENT]
    events = [(c.workflow_id, c.name, c.data) for c in srv.signals.calls if c.kind == "event"]
    assert len(events) == 1
    workflow_id, name, summary = events[0]
    assert (workflow_id, name, summary["status"]) == (PARENT, child_end_event(TASK), "FAILED")
    assert CHILD in summary["reason"]
    child = srv.deps.run_store.get_run(CHILD)
    assert child is not None and child.status == RunStatus.FAILED


def test_a_plain_retry_of_a_parent_gives_its_failed_sub_workflow_a_new_attempt(
    srv: Server,
) -> None:
    # without resumeSubworkflowTasks: the parent alone, no row resumed
    _failed_parent_and_child(srv)
    r = srv.client.post(f"/api/workflow/{PARENT}/retry")
    assert r.status_code == 204, r.text
    starts = _starts(srv)
    assert [workflow_id for workflow_id, _ in starts] == [PARENT]
    assert starts[0][1]["replay"][0]["resume"] is False
    row = srv.deps.run_store.get_task(TASK)
    assert row is not None and (row.status, row.retried) == (TaskStatus.FAILED, True)


def test_resume_subworkflow_tasks_on_the_parent_retries_the_child(srv: Server) -> None:
    _failed_parent_and_child(srv)
    r = srv.client.post(f"/api/workflow/{PARENT}/retry", params={"resumeSubworkflowTasks": True})
    assert r.status_code == 204, r.text
    assert [workflow_id for workflow_id, _ in _starts(srv)] == [PARENT, CHILD]


def test_a_retry_right_after_the_child_ended_waits_for_the_parent_to_take_the_end(
    make_server: Any,
) -> None:
    """The child read FAILED, its parent not yet (its end on the way): the retry waits
    (``settle_seconds``) for the parent to end, then takes it back with the child, instead
    of leaving it to fail once the end arrives with the child running again."""
    srv = make_server(settle_seconds=2)
    _failed_parent_and_child(srv)
    store, now = srv.deps.run_store, srv.deps.clock()
    store.reopen_run(PARENT, now)
    store.reopen_task(TASK, 1, {"subWorkflowId": CHILD}, now)

    def parent_takes_the_end() -> None:
        # as the parent's finish writes them: its task's end and its own, one transaction
        with store.batch():
            update = TaskUpdate(status=TaskStatus.FAILED, reason_for_incompletion="child")
            store.update_task(TASK, 1, update, now)
            store.update_run(PARENT, RunUpdate(status=RunStatus.FAILED), srv.deps.clock())

    r = _retry_while(srv, CHILD, parent_takes_the_end)
    assert r.status_code == 204, r.text
    assert [workflow_id for workflow_id, _ in _starts(srv)] == [PARENT, CHILD]


def test_a_retry_of_a_child_its_parent_is_terminating_waits_for_its_end(
    make_server: Any,
) -> None:
    """The parent read FAILED, its child still RUNNING: the parent's end sent it the
    terminate event, which its interpreter takes a moment later. A retry of the child
    waits (``settle_seconds``) for that end, then retries it with its parent, instead of
    answering 409 'not in terminal state'."""
    srv = make_server(settle_seconds=2)
    _failed_parent_and_child(srv)
    store, now = srv.deps.run_store, srv.deps.clock()
    store.reopen_run(CHILD, now)

    def child_takes_the_terminate() -> None:
        update = RunUpdate(status=RunStatus.TERMINATED, reason_for_incompletion="parent ended")
        store.update_run(CHILD, update, srv.deps.clock())

    r = _retry_while(srv, CHILD, child_takes_the_terminate)
    assert r.status_code == 204, r.text
    assert [workflow_id for workflow_id, _ in _starts(srv)] == [PARENT, CHILD]


def test_a_childs_retry_waits_for_the_sibling_its_parent_is_terminating(
    make_server: Any,
) -> None:
    """A parent with two SUB_WORKFLOW tasks: ``a`` FAILED with its child, ``b`` CANCELED
    by the parent's end, its child still RUNNING (the terminate event on the way). A retry
    of ``a``'s child waits for ``b``'s child to end, then resumes the parent with both
    children retried in place, instead of leaving ``b``'s out (to end TERMINATED after,
    with nothing to run it again)."""
    srv = make_server(settle_seconds=2)
    srv.register({"name": "w", "retryCount": 0})
    sub = {"type": "SUB_WORKFLOW", "subWorkflowParam": {"name": "child", "version": 1}}
    definitions = [
        {"name": "child", "version": 1, "tasks": [{"name": "w", "taskReferenceName": "w"}]},
        {
            "name": "parent",
            "version": 1,
            "tasks": [{"name": ref, "taskReferenceName": ref, **sub} for ref in ("a", "b")],
        },
    ]
    assert srv.client.put("/api/metadata/workflow", json=definitions).status_code == 200
    store, now = srv.deps.run_store, srv.deps.clock()
    child_a, child_b = child_run_id("task-a", 1), child_run_id("task-b", 1)
    runs = [
        (PARENT, "parent", None, None, RunStatus.FAILED),
        (child_a, "child", "task-a", "wa", RunStatus.FAILED),
        (child_b, "child", "task-b", "wb", RunStatus.RUNNING),
    ]
    for workflow_id, name, task_id, _, status in runs:
        store.create_run(
            NewRun(
                workflow_id=workflow_id,
                name=name,
                version=1,
                parent_workflow_id=PARENT if task_id else None,
                parent_task_id=task_id,
                create_time=now,
            )
        )
        if status != RunStatus.RUNNING:
            store.update_run(workflow_id, RunUpdate(status=status), now)
    rows = [
        (PARENT, "task-a", "a", "SUB_WORKFLOW", TaskStatus.FAILED, 1, {"subWorkflowId": child_a}),
        (PARENT, "task-b", "b", "SUB_WORKFLOW", TaskStatus.CANCELED, 2, {"subWorkflowId": child_b}),
        (child_a, "wa", "w", "WORKER", TaskStatus.FAILED, 1, {}),
        (child_b, "wb", "w", "WORKER", TaskStatus.CANCELED, 1, {}),
    ]
    for workflow_id, task_id, ref, kind, task_status, seq, output in rows:
        store.upsert_task(
            TaskRecord(
                task_id=task_id,
                workflow_id=workflow_id,
                reference_task_name=ref,
                task_type=kind,
                task_def_name=ref,
                status=task_status,
                seq=seq,
                output_data=output,
                end_time=now,
            ),
            now,
        )

    def child_b_takes_the_terminate() -> None:
        store.update_run(child_b, RunUpdate(status=RunStatus.TERMINATED), srv.deps.clock())

    r = _retry_while(srv, child_a, child_b_takes_the_terminate)
    assert r.status_code == 204, r.text
    assert [workflow_id for workflow_id, _ in _starts(srv)] == [PARENT, child_b, child_a]
