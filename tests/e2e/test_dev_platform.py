"""The embedded platform of ``stepway dev`` over real HTTP: a definition registered and a
run started through the API, its WORKER task polled and completed through the Task API."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from control_plane.cli.dev import LOST_REASON, DevPlatform
from engine.language.definitions import RunStatus
from engine.ports.run_store import NewRun, RunQuery

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _finished(http: httpx.Client, workflow_id: str, seconds: float = 20) -> dict[str, Any]:
    """The run (with tasks) once it is no longer RUNNING."""
    deadline = time.monotonic() + seconds
    while True:
        run: dict[str, Any] = http.get(
            f"/api/workflow/{workflow_id}", params={"includeTasks": True}
        ).json()
        if run["status"] != "RUNNING":
            return run
        assert time.monotonic() < deadline, f"run {workflow_id} still RUNNING"
        time.sleep(0.1)


def _post_result(
    http: httpx.Client, workflow_id: str, task: dict[str, Any], worker: str, output: Any
) -> httpx.Response:
    return http.post(
        "/api/tasks",
        json={
            "workflowInstanceId": workflow_id,
            "taskId": task["taskId"],
            "workerId": worker,
            "status": "COMPLETED",
            "outputData": output,
        },
    )


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[tuple[DevPlatform, httpx.Client]]:
    port = _free_port()
    platform = DevPlatform(data_dir=tmp_path / "data", port=port, repo_root=REPO)
    app = platform.start()
    platform.register_examples()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield platform, client
    finally:
        server.should_exit = True
        thread.join(10)
        platform.stop()


def test_examples_are_registered(dev: tuple[DevPlatform, httpx.Client]) -> None:
    _, http = dev
    names = {w["name"] for w in http.get("/api/metadata/workflow").json()}
    assert {"invoice_intake", "month_end_close"} <= names
    taskdefs = {t["name"] for t in http.get("/api/metadata/taskdefs").json()}
    assert {"parse_pdf", "classify_document", "lodge_return"} <= taskdefs


def test_run_through_the_api(dev: tuple[DevPlatform, httpx.Client]) -> None:
    _, http = dev
    assert (
        http.put(
            "/api/metadata/taskdefs",
            json={"name": "shout", "retryCount": 0, "responseTimeoutSeconds": 30},
        ).status_code
        < 300
    )
    response = http.post(
        "/api/metadata/workflow",
        json={
            "name": "shouting",
            "tasks": [
                {
                    "name": "shout",
                    "taskReferenceName": "shout",
                    "type": "SIMPLE",
                    "inputParameters": {"text": "${workflow.input.text}"},
                }
            ],
            "outputParameters": {"loud": "${shout.output.loud}"},
        },
    )
    assert response.status_code < 300, response.text
    workflow_id = http.post("/api/workflow/shouting", json={"text": "hi"}).text
    task = _poll(http, "shout", "w1", 20)
    assert task["inputData"] == {"text": "hi"}
    assert task["workflowInstanceId"] == workflow_id
    posted = _post_result(http, workflow_id, task, "w1", {"loud": "HI"})
    assert posted.status_code == 200, posted.text
    run = _finished(http, workflow_id)
    assert run["status"] == "COMPLETED", run
    assert run["output"] == {"loud": "HI"}
    assert [t["status"] for t in run["tasks"]] == ["COMPLETED"]


def test_runs_lost_by_a_restart_are_not_left_running(tmp_path: Path) -> None:
    first = DevPlatform(data_dir=tmp_path, port=_free_port(), repo_root=REPO)
    first.start()
    first.services.run_store.create_run(
        NewRun(workflow_id="in-flight", name="x", version=1, create_time=1)
    )
    first.stop()
    second = DevPlatform(data_dir=tmp_path, port=_free_port(), repo_root=REPO)
    second.start()
    try:
        run = second.services.run_store.get_run("in-flight")
        assert run is not None and run.status == RunStatus.FAILED
        assert run.reason_for_incompletion == LOST_REASON
        assert second.lost_runs == 1
    finally:
        second.stop()


def _poll(http: httpx.Client, task_type: str, worker: str, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        polled = http.get(
            f"/api/tasks/poll/batch/{task_type}",
            params={"workerid": worker, "count": 1, "timeout": 500},
        ).json()
        if polled:
            return dict(polled[0])
    return {}


def test_a_dead_workers_slot_is_freed_when_its_attempt_times_out(
    dev: tuple[DevPlatform, httpx.Client],
) -> None:
    platform, http = dev
    assert (
        http.put(
            "/api/metadata/taskdefs",
            json={
                "name": "solo",
                "concurrentExecLimit": 1,
                "responseTimeoutSeconds": 2,
                "timeoutPolicy": "RETRY",
                "retryCount": 1,
                "retryDelaySeconds": 0,
            },
        ).status_code
        < 300
    )
    assert (
        http.post(
            "/api/metadata/workflow",
            json={
                "name": "solo_run",
                "tasks": [{"name": "solo", "taskReferenceName": "solo", "type": "SIMPLE"}],
            },
        ).status_code
        < 300
    )
    workflow_id = http.post("/api/workflow/solo_run", json={}).text
    first = _poll(http, "solo", "dies", 20)
    assert first["retryCount"] == 0
    # the worker dies: no result. After the response timeout the engine queues attempt 2,
    # which a live worker can only get if the dead worker's slot was given back.
    second = _poll(http, "solo", "lives", 20)
    assert second, "attempt 2 was never handed out: the concurrency slot leaked"
    assert second["taskId"] != first["taskId"] and second["retryCount"] == 1
    assert _post_result(http, workflow_id, second, "lives", {}).status_code == 200
    assert _finished(http, workflow_id)["status"] == "COMPLETED"
    assert platform.services.run_store.concurrency_in_use("solo") == 0
    # the late answer of the dead worker changes nothing
    late = _post_result(http, workflow_id, first, "dies", {})
    assert late.status_code == 409


def test_a_large_workflow_input_is_offloaded_and_still_resolves(
    dev: tuple[DevPlatform, httpx.Client],
) -> None:
    platform, http = dev
    assert http.put("/api/metadata/taskdefs", json={"name": "pick"}).status_code < 300
    assert (
        http.post(
            "/api/metadata/workflow",
            json={
                "name": "big_input",
                "tasks": [
                    {
                        "name": "pick",
                        "taskReferenceName": "pick",
                        "type": "SIMPLE",
                        "inputParameters": {"id": "${workflow.input.items[3].id}"},
                    }
                ],
            },
        ).status_code
        < 300
    )
    items = [{"id": f"item-{i}", "text": "y" * 200} for i in range(100)]
    workflow_id = http.post("/api/workflow/big_input", json={"items": items}).text
    run = platform.services.run_store.get_run(workflow_id)
    assert run is not None and run.input is None and run.input_ref
    task = _poll(http, "pick", "w", 20)
    assert task["inputData"] == {"id": "item-3"}
    assert http.get(f"/api/workflow/{workflow_id}").json()["input"] == {"items": items}
    history = str(platform.client.get_orchestration_history(workflow_id))
    assert run.input_ref in history and "item-42" not in history
    # above the maximum: refused whole, naming the payload and its size; nothing written
    huge = {"blob": "z" * (10 * 1024 * 1024 + 1)}
    refused = http.post("/api/workflow/big_input", json=huge)
    assert refused.status_code == 413
    assert "workflow input" in refused.json()["message"]
    assert platform.services.run_store.search_runs(RunQuery(name="big_input")).total_hits == 1


def test_a_run_ended_by_the_backend_is_reconciled_when_read(
    dev: tuple[DevPlatform, httpx.Client],
) -> None:
    platform, http = dev
    assert http.put("/api/metadata/taskdefs", json={"name": "idle"}).status_code < 300
    assert (
        http.post(
            "/api/metadata/workflow",
            json={
                "name": "idle_run",
                "tasks": [{"name": "idle", "taskReferenceName": "idle", "type": "SIMPLE"}],
            },
        ).status_code
        < 300
    )
    workflow_id = http.post("/api/workflow/idle_run", json={}).text
    assert http.get(f"/api/workflow/{workflow_id}/status").json()["status"] == "RUNNING"
    # ended behind the interpreter's back (an operator using the backend directly)
    platform.client.terminate_orchestration(workflow_id, output="by hand")
    platform.client.wait_for_orchestration_completion(workflow_id, timeout=20)
    # a read within the reconcile interval (2 s) of the last ask takes the store's word;
    # the first read after it notices (control_plane/services/reconciling.py)
    deadline = time.monotonic() + 10
    while (body := http.get(f"/api/workflow/{workflow_id}").json())["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the run still reads RUNNING"
        time.sleep(0.1)
    assert body["status"] == "FAILED"
    assert "terminated in the durable backend" in body["reasonForIncompletion"]
    stored = platform.services.run_store.get_run(workflow_id)
    assert stored is not None and stored.status == RunStatus.FAILED


def test_a_run_keeps_the_definition_it_started_with(
    dev: tuple[DevPlatform, httpx.Client],
) -> None:
    platform, http = dev
    for name in ("one", "two"):
        assert http.put("/api/metadata/taskdefs", json={"name": name}).status_code < 300
    first_version = {
        "name": "evolving",
        "tasks": [{"name": "one", "taskReferenceName": "one", "type": "SIMPLE"}],
        "outputParameters": {"from": "v1 ${one.output.x}"},
    }
    assert http.post("/api/metadata/workflow", json=first_version).status_code < 300
    workflow_id = http.post("/api/workflow/evolving", json={}).text
    task = _poll(http, "one", "w", 20)
    # the same name and version is overwritten while the run is in flight, and the
    # engine process forgets what it had loaded (as a restarted or new replica would)
    changed = {
        **first_version,
        "tasks": [
            *first_version["tasks"],
            {"name": "two", "taskReferenceName": "two", "type": "SIMPLE"},
        ],
        "outputParameters": {"from": "v2"},
    }
    assert http.put("/api/metadata/workflow", json=[changed]).status_code < 300
    platform.services.definitions.invalidate()
    assert _post_result(http, workflow_id, task, "w", {"x": 1}).status_code == 200
    body = _finished(http, workflow_id)
    assert body["status"] == "COMPLETED", body
    assert body["output"] == {"from": "v1 1"}
    # a run started now gets the new definition
    second = http.post("/api/workflow/evolving", json={}).text
    assert _poll(http, "one", "w", 20)["workflowInstanceId"] == second
