"""Conductor wire compatibility found by running the official Conductor Python SDK against
Stepway (tests/e2e/test_conductor_sdk.py), pinned here over plain HTTP."""

from __future__ import annotations

from typing import Any

from engine.ports.queue_provisioning import ensure_queues_exist
from tests.unit.control_plane.conftest import Server, assert_error, taskdef


def poll(srv: Server, task_type: str, worker: str) -> list[dict[str, Any]]:
    r = srv.client.get(f"/api/tasks/poll/batch/{task_type}", params={"workerid": worker})
    assert r.status_code == 200, r.text
    tasks: list[dict[str, Any]] = r.json()
    return tasks


def test_a_result_without_worker_id_is_the_lease_holders(srv: Server) -> None:
    """The SDK leaves workerId out of a TaskResult a worker function builds itself."""
    srv.register(taskdef("anon"))
    task_id = srv.dispatch("anon")
    poll(srv, "anon", worker="host-1")
    r = srv.client.post(
        "/api/tasks", json={"taskId": task_id, "status": "COMPLETED", "outputData": {"a": 1}}
    )
    assert r.status_code == 200, r.text
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.worker_id == "host-1"
    assert srv.signals.events(task_id)[0].data["workerId"] == "host-1"
    # the same post again is a harmless repeat
    again = {"taskId": task_id, "status": "COMPLETED", "outputData": {"a": 1}}
    assert srv.client.post("/api/tasks", json=again).status_code == 200
    assert len(srv.signals.events(task_id)) == 1


def test_without_auth_a_result_naming_another_worker_is_the_current_attempts(
    srv: Server,
) -> None:
    """Conductor does not check workerId; without authentication neither do we, except
    for a worker that held an earlier attempt (tests/unit/control_plane/api/test_tasks_api.py)."""
    srv.register(taskdef("named"))
    task_id = srv.dispatch("named")
    poll(srv, "named", worker="host-1")
    r = srv.client.post(
        "/api/tasks", json={"taskId": task_id, "status": "COMPLETED", "workerId": "host-2"}
    )
    assert r.status_code == 200, r.text
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.worker_id == "host-2"
    assert [e.data["workerId"] for e in srv.signals.events(task_id)] == ["host-2"]
    lease = srv.deps.run_store.get_lease(task_id, 1)
    assert lease is not None and lease.released
    # a finished task takes no other result
    r = srv.client.post(
        "/api/tasks", json={"taskId": task_id, "status": "FAILED", "workerId": "host-3"}
    )
    assert_error(r, 409)


def test_update_v2_without_worker_id_hands_the_next_task_to_the_lease_holder(
    srv: Server,
) -> None:
    srv.register(taskdef("chain"))
    first = srv.dispatch("chain")
    second = srv.dispatch("chain")
    poll(srv, "chain", worker="host-1")
    r = srv.client.post("/api/tasks/update-v2", json={"taskId": first, "status": "FAILED"})
    assert r.status_code == 200, r.text
    assert r.json()["taskId"] == second and r.json()["workerId"] == "host-1"
    # ... so that its result, again without workerId, is accepted
    r = srv.client.post("/api/tasks", json={"taskId": second, "status": "COMPLETED"})
    assert r.status_code == 200, r.text


def test_lease_extension_heartbeat_without_worker_id(srv: Server) -> None:
    """The SDK's LeaseManager posts {taskId, workflowInstanceId, extendLease, IN_PROGRESS}."""
    srv.register(taskdef("beat", responseTimeoutSeconds=30))
    task_id = srv.dispatch("beat")
    (task,) = poll(srv, "beat", worker="host-1")
    before = srv.deps.run_store.get_lease(task_id, 1)
    r = srv.client.post(
        "/api/tasks",
        json={
            "taskId": task_id,
            "workflowInstanceId": task["workflowInstanceId"],
            "extendLease": True,
            "status": "IN_PROGRESS",
        },
    )
    assert r.status_code == 200, r.text
    after = srv.deps.run_store.get_lease(task_id, 1)
    assert before is not None and after is not None
    assert after.worker_id == "host-1" and after.expires_at >= before.expires_at
    assert after.acquired_at >= before.acquired_at


def test_workflow_registration_honours_orkes_overwrite(srv: Server) -> None:
    """The SDK's ConductorWorkflow.register(overwrite=True) posts ?overwrite=true."""
    srv.register(taskdef("parse"))
    c = srv.client

    def wf(**extra: Any) -> dict[str, Any]:
        tasks = [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}]
        return {"name": "ow", "version": 1, "tasks": tasks, **extra}

    assert c.post("/api/metadata/workflow", json=wf()).status_code == 200
    assert_error(c.post("/api/metadata/workflow", json=wf(description="x")), 409)
    r = c.post("/api/metadata/workflow", params={"overwrite": "true"}, json=wf(description="x"))
    assert r.status_code == 200, r.text
    assert r.json()["workflows"][0]["action"] == "update"
    assert c.get("/api/metadata/workflow/ow").json()["description"] == "x"
    # PUT overwrites by default; overwrite=false refuses an existing version
    assert_error(c.put("/api/metadata/workflow", params={"overwrite": "false"}, json=[wf()]), 409)
    assert c.get("/api/metadata/workflow/ow").json()["description"] == "x"
    assert c.put("/api/metadata/workflow", json=[wf()]).status_code == 200


def test_queue_size_of_a_type_and_of_a_domain(srv: Server) -> None:
    srv.register(taskdef("sized"))
    ensure_queues_exist(srv.deps.provisioner, "sized", ["blue"])
    srv.dispatch("sized")
    srv.dispatch("sized", domain="blue")
    r = srv.client.get("/api/tasks/queue/size", params={"taskType": "sized"})
    assert r.status_code == 200 and r.json() == 1
    r = srv.client.get("/api/tasks/queue/size", params={"taskType": "sized", "domain": "blue"})
    assert r.json() == 1
    r = srv.client.get("/api/tasks/queue/size", params={"taskType": "sized", "domain": "red"})
    assert r.json() == 0
