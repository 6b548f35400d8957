"""Signals and synchronous execute (the additions the official Conductor SDKs call),
with the engine played by the test: rows are written by hand."""

from __future__ import annotations

from typing import Any

from engine.ports.run_store import RunStatus, RunUpdate, TaskRecord, TaskStatus
from tests.unit.control_plane.conftest import Server, assert_error


def row(wf: str, task_id: str, ref: str, kind: str, **kw: Any) -> TaskRecord:
    return TaskRecord(
        task_id=task_id, workflow_id=wf, reference_task_name=ref, task_type=kind, **kw
    )


def test_a_signal_completes_the_first_waiting_wait_task(srv: Server) -> None:
    wf = srv.run()
    store = srv.deps.run_store
    store.upsert_task(row(wf, "w0", "done", "WAIT", status=TaskStatus.COMPLETED, seq=1), 1)
    store.upsert_task(row(wf, "w1", "hold", "WAIT", status=TaskStatus.IN_PROGRESS, seq=2), 1)
    r = srv.client.post(f"/api/tasks/{wf}/COMPLETED/signal", json={"answer": 42})
    assert r.status_code == 200, r.text
    (event,) = srv.signals.events("w1")
    assert event.data["status"] == "COMPLETED" and event.data["output"] == {"answer": 42}


def test_a_signal_reaches_a_wait_task_in_a_running_sub_workflow(srv: Server) -> None:
    parent, child = srv.run(), srv.run()
    store = srv.deps.run_store
    store.upsert_task(
        row(
            parent,
            "s1",
            "sub",
            "SUB_WORKFLOW",
            status=TaskStatus.IN_PROGRESS,
            output_data={"subWorkflowId": child},
        ),
        1,
    )
    store.upsert_task(row(child, "w1", "hold", "WAIT", status=TaskStatus.IN_PROGRESS), 1)
    r = srv.client.post(f"/api/tasks/{parent}/FAILED/signal", json={})
    assert r.status_code == 200, r.text
    assert srv.signals.events("w1")[0].data["status"] == "FAILED"


def test_nothing_to_signal(srv: Server) -> None:
    wf = srv.run()
    # asynchronous: nothing happens; synchronous: 404 with Conductor's text
    assert srv.client.post(f"/api/tasks/{wf}/COMPLETED/signal", json={}).status_code == 200
    body = assert_error(srv.client.post(f"/api/tasks/{wf}/COMPLETED/signal/sync", json={}), 404)
    assert body["message"] == f"Found no blocked task in workflow {wf} to signal"
    assert_error(srv.client.post("/api/tasks/nope/COMPLETED/signal", json={}), 404)
    assert_error(srv.client.post(f"/api/tasks/{wf}/DONE/signal", json={}), 400, "status")


def test_a_synchronous_signal_answers_with_the_run(srv: Server) -> None:
    wf = srv.run()
    srv.deps.run_store.upsert_task(row(wf, "w1", "hold", "WAIT", status=TaskStatus.IN_PROGRESS), 1)
    srv.deps.run_store.update_run(
        wf, RunUpdate(status=RunStatus.COMPLETED, output={"ok": True}, end_time=2), 2
    )
    r = srv.client.post(f"/api/tasks/{wf}/COMPLETED/signal/sync", json={"a": 1})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["responseType"] == "TARGET_WORKFLOW"
    assert (body["workflowId"], body["targetWorkflowId"]) == (wf, wf)
    assert (body["status"], body["targetWorkflowStatus"]) == ("COMPLETED", "COMPLETED")
    assert body["output"] == {"ok": True} and body["tasks"][0]["taskId"] == "w1"


def test_execute_answers_with_the_run_when_it_blocks(srv: Server) -> None:
    """The engine is played by the test: the run the execute starts is given a waiting
    WAIT task as soon as it exists, and the answer shows it."""
    r = srv.client.post(
        "/api/metadata/workflow",
        json={
            "name": "sync_wf",
            "version": 1,
            "tasks": [{"name": "hold", "taskReferenceName": "hold", "type": "WAIT"}],
            "schemaVersion": 2,
        },
    )
    assert r.status_code == 200, r.text
    store = srv.deps.run_store
    original = store.create_run

    def create_run(run: Any) -> Any:
        created = original(run)
        store.upsert_task(
            row(run.workflow_id, "w1", "hold", "WAIT", status=TaskStatus.IN_PROGRESS), 1
        )
        return created

    store.create_run = create_run  # type: ignore[method-assign]
    r = srv.client.post(
        "/api/workflow/execute/sync_wf/0",
        params={"requestId": "req-1", "waitForSeconds": 5},
        json={"input": {"x": 1}},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["requestId"] == "req-1" and body["status"] == "RUNNING"
    assert body["input"] == {"x": 1} and body["signalTimeout"] is False
    assert [t["referenceTaskName"] for t in body["tasks"]] == ["hold"]

    r = srv.client.post(
        "/api/workflow/execute/sync_wf/1",
        params={"returnStrategy": "BLOCKING_TASK_INPUT"},
        json={"name": "ignored", "input": {}},
    )
    assert r.status_code == 200, r.text
    assert r.json()["taskId"] == "w1" and r.json()["responseType"] == "BLOCKING_TASK_INPUT"
