"""Task API contract over real HTTP."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from control_plane.api import tasks as api_tasks
from engine.ports.run_store import MAX_TASK_LOG_ENTRIES, TASK_LOGS_DROPPED
from tests.unit.control_plane.conftest import Server, assert_error, taskdef

pytestmark = pytest.mark.both_storage_modes


def poll(srv: Server, task_type: str, worker: str = "w1", **params: Any) -> Any:
    r = srv.client.get(f"/api/tasks/poll/batch/{task_type}", params={"workerid": worker, **params})
    assert r.status_code == 200, r.text
    return r.json()


def test_poll_hands_out_task_json_and_records_lease(srv: Server) -> None:
    srv.register(taskdef("parse"))
    task_id = srv.dispatch("parse", input={"url": "x"})
    tasks = poll(srv, "parse", count=5, timeout=100)
    assert len(tasks) == 1
    t = tasks[0]
    assert t["taskId"] == task_id and t["taskType"] == "parse" and t["status"] == "IN_PROGRESS"
    assert t["inputData"] == {"url": "x"} and t["referenceTaskName"] == "t1"
    assert t["workerId"] == "w1" and t["pollCount"] == 1 and t["responseTimeoutSeconds"] == 60
    assert t["workflowType"] == "wf" and t["correlationId"] == "c1"
    lease = srv.deps.run_store.get_lease(task_id, 1)
    assert lease is not None and lease.worker_id == "w1" and lease.sequence_number is not None
    # the hand-out costs the run no event: the engine reads the lease when a deadline is due
    assert srv.signals.events() == []
    # the message is deferred: invisible to the next poll
    assert poll(srv, "parse", timeout=0) == []
    assert srv.deps.queue.depth("parse").deferred == 1


def test_empty_poll_is_recorded_and_single_poll_gives_204(srv: Server) -> None:
    srv.register(taskdef("idle"))
    t0 = time.monotonic()
    assert poll(srv, "idle", worker="w9", timeout=300) == []
    assert time.monotonic() - t0 >= 0.25  # long poll waited
    r = srv.client.get("/api/tasks/poll/idle", params={"workerid": "w9"})
    assert r.status_code == 204
    data = srv.client.get("/api/tasks/queue/polldata", params={"taskType": "idle"}).json()
    assert data[0]["workerId"] == "w9" and data[0]["queueName"] == "idle"
    assert srv.client.get("/api/tasks/queue/polldata/all").json()


def test_long_poll_returns_when_a_task_arrives(srv: Server) -> None:
    import threading

    srv.register(taskdef("late"))
    threading.Timer(0.3, lambda: srv.dispatch("late")).start()
    t0 = time.monotonic()
    tasks = poll(srv, "late", timeout=3000)
    assert len(tasks) == 1 and time.monotonic() - t0 < 2.8  # before the 3 s poll timeout


def test_high_priority_first_and_domains(srv: Server) -> None:
    srv.settings.task_domains["ocr"] = ["eu"]
    srv.register(taskdef("ocr"))
    low = srv.dispatch("ocr")
    high = srv.dispatch("ocr", priority=5)
    in_domain = srv.dispatch("ocr", domain="eu")
    assert [t["taskId"] for t in poll(srv, "ocr", count=1)] == [high]
    assert [t["taskId"] for t in poll(srv, "ocr", count=5)] == [low]
    got = poll(srv, "ocr", domain="eu")
    assert [t["taskId"] for t in got] == [in_domain] and got[0]["domain"] == "eu"
    # a domain nothing was queued for has no task (Conductor); strict mode refuses it
    assert poll(srv, "ocr", domain="us") == []
    srv.settings.strict_task_definitions = True
    assert_error(
        srv.client.get("/api/tasks/poll/batch/ocr", params={"domain": "us"}), 400, "domain"
    )


def test_stale_messages_are_dropped(srv: Server) -> None:
    srv.register(taskdef("st"))
    gone = srv.dispatch("st")
    srv.deps.run_store.update_task(
        gone,
        1,
        __import__("engine.ports.run_store", fromlist=["TaskUpdate"]).TaskUpdate(status="CANCELED"),
        1,
    )
    old = srv.dispatch("st")
    srv.dispatch("st", task_id=old, attempt=2)  # row moves on to attempt 2
    got = poll(srv, "st", count=10)
    assert [(t["taskId"], t["retryCount"]) for t in got] == [(old, 1)]
    d = srv.deps.queue.depth("st")
    assert d.active == 0 and d.deferred == 1


def test_complete_and_update_rules(srv: Server) -> None:
    srv.register(taskdef("c"))
    task_id = srv.dispatch("c")
    wf = srv.deps.run_store.get_task(task_id).workflow_id  # type: ignore[union-attr]
    poll(srv, "c", worker="w1")
    result = {
        "workflowInstanceId": wf,
        "taskId": task_id,
        "status": "COMPLETED",
        "outputData": {"ok": 1},
        "workerId": "w1",
    }
    r = srv.client.post("/api/tasks", json=result)
    assert r.status_code == 200 and r.text == task_id
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "COMPLETED" and row.output_data == {"ok": 1}
    events = srv.signals.events(task_id)
    assert len(events) == 1
    assert events[0].data == {
        "attempt": 1,
        "status": "COMPLETED",
        "output": {"ok": 1},
        "reason": None,
        "workerId": "w1",
    }
    assert srv.deps.queue.depth("c").total == 0  # deferred message completed
    # repeated identical post: harmless, no second event
    assert srv.client.post("/api/tasks", json=result).status_code == 200
    assert len(srv.signals.events(task_id)) == 1
    # a different result for a finished task: 409, nothing changes
    assert_error(srv.client.post("/api/tasks", json={**result, "status": "FAILED"}), 409)
    assert srv.deps.run_store.get_task(task_id).status == "COMPLETED"  # type: ignore[union-attr]
    assert_error(srv.client.post("/api/tasks", json={**result, "taskId": "nope"}), 404)


def test_failed_result_leaves_message_deferred(srv: Server) -> None:
    srv.register(taskdef("f"))
    task_id = srv.dispatch("f")
    poll(srv, "f")
    r = srv.client.post(
        "/api/tasks/update-v2",
        json={
            "taskId": task_id,
            "status": "FAILED",
            "reasonForIncompletion": "boom",
            "workerId": "w1",
        },
    )
    assert r.status_code == 204
    assert srv.deps.queue.depth("f").deferred == 1
    lease = srv.deps.run_store.get_lease(task_id, 1)
    assert lease is not None and lease.sequence_number is not None
    assert srv.signals.events(task_id)[0].data["reason"] == "boom"


def test_stale_attempt_is_refused(srv: Server) -> None:
    srv.register(taskdef("sa"))
    task_id = srv.dispatch("sa")
    poll(srv, "sa", worker="old")
    srv.dispatch("sa", task_id=task_id, attempt=2)
    r = srv.client.post(
        "/api/tasks", json={"taskId": task_id, "status": "COMPLETED", "workerId": "old"}
    )
    assert_error(r, 409)
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "SCHEDULED" and row.attempt == 2
    assert srv.signals.events(task_id) == []


def test_update_v2_returns_next_task(srv: Server) -> None:
    srv.register(taskdef("v2"))
    first = srv.dispatch("v2")
    second = srv.dispatch("v2")
    poll(srv, "v2")
    r = srv.client.post(
        "/api/tasks/update-v2", json={"taskId": first, "status": "COMPLETED", "workerId": "w1"}
    )
    assert r.status_code == 200 and r.json()["taskId"] == second
    # the first's result is accepted, the second is handed out to the poster as by a poll
    assert [e.name for e in srv.signals.events()] == [first]
    row = srv.deps.run_store.get_task(second)
    lease = srv.deps.run_store.get_lease(second, 1)
    assert row is not None and row.status == "IN_PROGRESS" and row.worker_id == "w1"
    assert lease is not None and lease.worker_id == "w1" and not lease.released
    assert srv.deps.queue.depth("v2").deferred == 1
    # the second's result: no third task, 204
    r = srv.client.post(
        "/api/tasks/update-v2", json={"taskId": second, "status": "COMPLETED", "workerId": "w1"}
    )
    assert r.status_code == 204 and [e.name for e in srv.signals.events()] == [first, second]


def test_update_v2_waits_for_a_next_task_that_arrives_after_the_result(
    srv: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the result is accepted at once; the poll that follows waits for the next task
    # (on local adapters: the result and a first look on the event loop, the wait in a
    # thread), long enough here that the late task surely arrives within it
    monkeypatch.setattr(api_tasks, "UPDATE_V2_POLL_MS", 3000)
    srv.register(taskdef("v2w"))
    first = srv.dispatch("v2w")
    poll(srv, "v2w")
    late = threading.Timer(0.2, lambda: srv.dispatch("v2w", task_id="late-task"))
    late.start()
    r = srv.client.post(
        "/api/tasks/update-v2", json={"taskId": first, "status": "COMPLETED", "workerId": "w1"}
    )
    late.join()
    assert r.status_code == 200 and r.json()["taskId"] == "late-task"
    assert [e.name for e in srv.signals.events()] == [first]
    assert srv.deps.run_store.get_task(first).status == "COMPLETED"  # type: ignore[union-attr]
    assert srv.deps.run_store.get_task("late-task").status == "IN_PROGRESS"  # type: ignore[union-attr]


def test_update_v2_refuses_a_result_as_the_plain_post_does(srv: Server) -> None:
    srv.register(taskdef("v2e"))
    task_id = srv.dispatch("v2e")
    poll(srv, "v2e", worker="w1")
    for body in (
        {"taskId": "nope", "status": "COMPLETED", "workerId": "w1"},
        {"taskId": task_id, "status": "DONE", "workerId": "w1"},
        {"taskId": task_id, "status": "COMPLETED", "workerId": "w2", "attempt": 2},
    ):
        plain = srv.client.post("/api/tasks", json=body)
        v2 = srv.client.post("/api/tasks/update-v2", json=body)
        assert plain.status_code >= 400 and v2.status_code == plain.status_code, body
        assert v2.json() == plain.json()


def test_unpolled_worker_may_post_for_scheduled_task(srv: Server) -> None:
    srv.register(taskdef("fn"))
    task_id = srv.dispatch("fn")
    r = srv.client.post(
        "/api/tasks",
        json={
            "taskId": task_id,
            "status": "COMPLETED",
            "workerId": "func-1",
            "outputData": {"a": 1},
        },
    )
    assert r.status_code == 200
    assert [e.name for e in srv.signals.events()] == [task_id]
    lease = srv.deps.run_store.get_lease(task_id, 1)
    assert lease is not None and lease.worker_id == "func-1" and lease.released


def test_in_progress_callback_requeues_with_delay(srv: Server) -> None:
    srv.register(taskdef("cb"))
    task_id = srv.dispatch("cb")
    poll(srv, "cb")
    r = srv.client.post(
        "/api/tasks",
        json={
            "taskId": task_id,
            "status": "IN_PROGRESS",
            "callbackAfterSeconds": 1,
            "workerId": "w1",
            "outputData": {"progress": 50},
        },
    )
    assert r.status_code == 200
    row = srv.deps.run_store.get_task(task_id)
    # given back: SCHEDULED until a worker takes it again (Conductor's updateTask)
    assert row is not None and row.status == "SCHEDULED" and row.callback_after_seconds == 1
    assert row.output_data == {"progress": 50}
    assert poll(srv, "cb", timeout=0) == []
    assert srv.deps.queue.depth("cb").scheduled == 1
    got = poll(srv, "cb", worker="w2", timeout=3000)
    assert [t["taskId"] for t in got] == [task_id] and got[0]["pollCount"] == 2


def test_extend_lease(srv: Server) -> None:
    srv.register(taskdef("ext", responseTimeoutSeconds=30))
    task_id = srv.dispatch("ext")
    poll(srv, "ext")
    before = srv.deps.run_store.get_lease(task_id, 1)
    time.sleep(0.05)
    r = srv.client.post(
        "/api/tasks",
        json={"taskId": task_id, "status": "IN_PROGRESS", "extendLease": True, "workerId": "w1"},
    )
    assert r.status_code == 200
    after = srv.deps.run_store.get_lease(task_id, 1)
    assert before and after and after.expires_at > before.expires_at
    assert after.sequence_number == before.sequence_number
    # the response deadline runs from the extension (the engine reads acquired_at)
    assert after.acquired_at > before.acquired_at
    assert srv.signals.events() == []


def test_large_output_goes_to_payload_store(srv: Server) -> None:
    srv.register(taskdef("big"))
    task_id = srv.dispatch("big")
    poll(srv, "big")
    out = {"text": "x" * 5000}
    r = srv.client.post(
        "/api/tasks",
        json={"taskId": task_id, "status": "COMPLETED", "workerId": "w1", "outputData": out},
    )
    assert r.status_code == 200
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.output_ref and row.output_data is None
    assert srv.signals.events(task_id)[0].data["outputRef"] == row.output_ref
    full = srv.client.get(f"/api/tasks/{task_id}").json()
    assert full["externalOutputPayloadStoragePath"] == row.output_ref


def test_an_in_progress_result_keeps_its_large_or_stored_output_by_reference(
    srv: Server,
) -> None:
    """An IN_PROGRESS result's output is kept as a final one's: one above the threshold
    in the payload store, one the worker stored there by its path; the final result's
    output replaces it."""
    srv.register(taskdef("prog"))
    task_id = srv.dispatch("prog")
    poll(srv, "prog")
    big = {"text": "x" * 5000}
    r = srv.client.post(
        "/api/tasks",
        json={"taskId": task_id, "status": "IN_PROGRESS", "workerId": "w1", "outputData": big},
    )
    assert r.status_code == 200, r.text
    row = srv.deps.run_store.get_task(task_id)
    assert row is not None and row.status == "IN_PROGRESS" and row.output_ref
    read = srv.client.get(
        "/api/tasks/external-storage-location",
        params={"operation": "READ", "payloadType": "TASK_OUTPUT", "path": row.output_ref},
    ).json()
    assert srv.client.get(read["uri"]).json() == big

    loc = srv.client.get(
        "/api/tasks/external-storage-location",
        params={"operation": "WRITE", "payloadType": "TASK_OUTPUT"},
    ).json()
    assert srv.client.put(loc["uri"], content=b'{"stored": 1}').status_code == 201
    r = srv.client.post(
        "/api/tasks",
        json={
            "taskId": task_id,
            "status": "IN_PROGRESS",
            "workerId": "w1",
            "externalOutputPayloadStoragePath": loc["path"],
        },
    )
    assert r.status_code == 200, r.text
    shown = srv.client.get(f"/api/tasks/{task_id}").json()
    assert (shown["status"], shown["externalOutputPayloadStoragePath"]) == (
        "IN_PROGRESS",
        loc["path"],
    )
    # progress with no output and no path keeps the one stored (Conductor keeps the
    # task's path when an update gives none); an inline output replaces it
    for output, kept in (({}, loc["path"]), ({"page": 2}, None)):
        r = srv.client.post(
            "/api/tasks",
            json={
                "taskId": task_id,
                "status": "IN_PROGRESS",
                "workerId": "w1",
                "outputData": output,
            },
        )
        assert r.status_code == 200, r.text
        shown = srv.client.get(f"/api/tasks/{task_id}").json()
        assert shown["externalOutputPayloadStoragePath"] == kept
    assert shown["outputData"] == {"page": 2}

    r = srv.client.post(
        "/api/tasks",
        json={"taskId": task_id, "status": "COMPLETED", "workerId": "w1", "outputData": {"a": 1}},
    )
    assert r.status_code == 200, r.text
    shown = srv.client.get(f"/api/tasks/{task_id}").json()
    assert shown["externalOutputPayloadStoragePath"] is None
    assert shown["outputData"] == {"a": 1}


def test_a_runs_large_input_is_read_through_the_workflow_storage_location(
    srv: Server,
) -> None:
    """Conductor's clients read a run's payload kept by reference through ``GET
    /workflow/externalstoragelocation`` (WorkflowResource), not the tasks' route."""
    srv.register(taskdef("wf_in"))
    definition = {
        "name": "wf_in",
        "version": 1,
        "tasks": [{"name": "wf_in", "taskReferenceName": "t", "type": "SIMPLE"}],
    }
    assert srv.client.post("/api/metadata/workflow", json=definition).status_code == 200
    big = {"text": "y" * 20_000}
    r = srv.client.post("/api/workflow/wf_in", json=big)
    assert r.status_code == 200, r.text
    run = srv.deps.run_store.get_run(r.text)
    assert run is not None and run.input_ref
    loc = srv.client.get(
        "/api/workflow/externalstoragelocation",
        params={"operation": "READ", "payloadType": "WORKFLOW_INPUT", "path": run.input_ref},
    )
    assert loc.status_code == 200, loc.text
    assert loc.json()["path"] == run.input_ref
    assert srv.client.get(loc.json()["uri"]).json() == big
    assert_error(
        srv.client.get(
            "/api/workflow/externalstoragelocation",
            params={"operation": "READ", "payloadType": "WORKFLOW_INPUT"},
        ),
        400,
        "path",
    )


def test_external_storage_upload_and_reference(srv: Server) -> None:
    srv.register(taskdef("up"))
    task_id = srv.dispatch("up")
    poll(srv, "up")
    loc = srv.client.get(
        "/api/tasks/external-storage-location",
        params={"operation": "WRITE", "payloadType": "TASK_OUTPUT"},
    ).json()
    assert srv.client.put(loc["uri"], content=b'{"big": true}').status_code == 201
    tampered = loc["uri"].replace("sig=", "sig=x")
    assert_error(srv.client.put(tampered, content=b"{}"), 403)
    r = srv.client.post(
        "/api/tasks",
        json={
            "taskId": task_id,
            "status": "COMPLETED",
            "workerId": "w1",
            "externalOutputPayloadStoragePath": loc["path"],
        },
    )
    assert r.status_code == 200
    read = srv.client.get(
        "/api/tasks/external-storage-location",
        params={"operation": "READ", "payloadType": "TASK_OUTPUT", "path": loc["path"]},
    ).json()
    assert srv.client.get(read["uri"]).json() == {"big": True}
    assert_error(
        srv.client.get(
            "/api/tasks/external-storage-location",
            params={"operation": "DELETE", "payloadType": "TASK_OUTPUT"},
        ),
        400,
        "operation",
    )


@pytest.mark.parametrize("route", ["/api/tasks", "/api/tasks/update-v2"])
def test_the_logs_of_a_refused_result_are_not_kept_and_its_retry_adds_them_once(
    srv: Server, route: str
) -> None:
    """A result refused (here its output is above the payload store's maximum: 413)
    keeps none of the log lines it carried; the worker's next post of the same lines
    with an output that fits is the one that counts."""
    srv.register(taskdef("lg"))
    task_id = srv.dispatch("lg")
    [polled] = srv.client.get(
        "/api/tasks/poll/batch/lg", params={"workerid": "w1", "timeout": 0}
    ).json()
    result = {
        "workflowInstanceId": polled["workflowInstanceId"],
        "taskId": task_id,
        "status": "COMPLETED",
        "workerId": "w1",
        "logs": [{"log": "opened the PDF"}, {"log": "3 pages"}],
    }
    too_big = {**result, "outputData": {"text": "x" * 250_000}}
    assert_error(srv.client.post(route, json=too_big), 413)
    assert srv.client.get(f"/api/tasks/{task_id}/log").json() == []
    fits = {**result, "outputData": {"pages": 3}}
    assert srv.client.post(route, json=fits).status_code in (200, 204)
    assert srv.client.post(route, json=fits).status_code in (200, 204)  # repeated: harmless
    logs = srv.client.get(f"/api/tasks/{task_id}/log").json()
    assert [entry["log"] for entry in logs] == ["opened the PDF", "3 pages"]


def test_a_tasks_log_stops_at_its_limit_and_says_so_and_the_result_is_accepted(
    srv: Server,
) -> None:
    """A worker that sends more log lines than a task keeps (here in one result, then
    on the log endpoint): the result is accepted, the log holds the first lines and
    one entry that says later ones are not kept."""
    srv.register(taskdef("lg"))
    task_id = srv.dispatch("lg")
    [polled] = srv.client.get(
        "/api/tasks/poll/batch/lg", params={"workerid": "w1", "timeout": 0}
    ).json()
    lines = [f"page {i}" for i in range(MAX_TASK_LOG_ENTRIES + 5)]
    result = {
        "workflowInstanceId": polled["workflowInstanceId"],
        "taskId": task_id,
        "status": "COMPLETED",
        "workerId": "w1",
        "outputData": {"pages": len(lines)},
        "logs": [{"log": line} for line in lines],
    }
    assert srv.client.post("/api/tasks", json=result).status_code == 200
    assert srv.client.post(f"/api/tasks/{task_id}/log", json="one more").status_code == 200
    logs = [entry["log"] for entry in srv.client.get(f"/api/tasks/{task_id}/log").json()]
    assert logs == [*lines[:MAX_TASK_LOG_ENTRIES], TASK_LOGS_DROPPED]
    assert srv.client.get(f"/api/tasks/{task_id}").json()["status"] == "COMPLETED"


def test_logs_get_task_and_queue_sizes(srv: Server) -> None:
    srv.register(taskdef("lg"))
    task_id = srv.dispatch("lg")
    srv.dispatch("lg")
    assert srv.client.get("/api/tasks/queue/sizes", params={"taskType": ["lg"]}).json() == {"lg": 2}
    assert srv.client.post(f"/api/tasks/{task_id}/log", json="line one").status_code == 200
    logs = srv.client.get(f"/api/tasks/{task_id}/log").json()
    assert [entry["log"] for entry in logs] == ["line one"]
    t = srv.client.get(f"/api/tasks/{task_id}").json()
    assert t["status"] == "SCHEDULED" and t["taskType"] == "lg"
    assert_error(srv.client.get("/api/tasks/missing"), 404)


def test_human_task_by_ref(srv: Server) -> None:
    from engine.ports.run_store import TaskRecord

    wf = srv.run()
    srv.deps.run_store.upsert_task(
        TaskRecord(task_id="h1", workflow_id=wf, reference_task_name="approve", task_type="HUMAN"),
        1,
    )
    r = srv.client.post(f"/api/tasks/{wf}/approve/COMPLETED", json={"approved": True})
    assert r.status_code == 200 and r.text == "h1"
    ev = srv.signals.events("h1")[0]
    assert ev.data["status"] == "COMPLETED" and ev.data["output"] == {"approved": True}
    assert_error(srv.client.post(f"/api/tasks/{wf}/approve/DONE", json={}), 400, "status")
    assert_error(srv.client.post(f"/api/tasks/{wf}/nope/COMPLETED", json={}), 404)


def test_bad_input(srv: Server) -> None:
    srv.register(taskdef("b"))
    assert_error(srv.client.get("/api/tasks/poll/batch/b", params={"count": 0}), 400, "count")
    assert_error(srv.client.get("/api/tasks/poll/batch/b", params={"count": 101}), 400, "count")
    assert_error(
        srv.client.get("/api/tasks/poll/batch/b", params={"timeout": 5001}), 400, "timeout"
    )
    assert_error(srv.client.get("/api/tasks/poll/batch/b", params={"count": "x"}), 400, "count")
    # a type without task definition has no task (Conductor); strict mode: 404
    assert srv.client.get("/api/tasks/poll/batch/unknown").json() == []
    srv.settings.strict_task_definitions = True
    assert_error(srv.client.get("/api/tasks/poll/batch/unknown"), 404, "taskType")
    srv.settings.strict_task_definitions = False
    r = srv.client.post(
        "/api/tasks", content=b'{"taskId": ', headers={"content-type": "application/json"}
    )
    body = assert_error(r, 400)
    assert "malformed JSON" in body["message"]
    assert_error(
        srv.client.post("/api/tasks", json={"taskId": "x", "status": "DONE"}), 400, "$.status"
    )
    assert_error(srv.client.post("/api/tasks", json={"status": "COMPLETED"}), 400, "$.taskId")
    big = b'{"taskId": "' + b"x" * (13 * 1024 * 1024) + b'"}'
    assert_error(
        srv.client.post("/api/tasks", content=big, headers={"content-type": "application/json"}),
        413,
    )
    assert_error(srv.client.get("/api/nothing-here"), 404)


@pytest.mark.parametrize("route", ["/api/tasks", "/api/tasks/update-v2"])
def test_a_result_waiting_on_the_backend_holds_up_no_other_request(srv: Server, route: str) -> None:
    """A result is answered once its run is told, a round trip to the durable backend;
    while a busy backend keeps that call waiting, the API serves everyone else: a read, a
    poll, another worker's result. Held here until the test lets the backend answer
    (no timing: a request the wait held up would not be answered before then)."""
    srv.register(taskdef("slow"), taskdef("other"))
    held, release = threading.Event(), threading.Event()
    record = srv.signals.raise_event

    def raise_event(workflow_id: str, event_name: str, data: Any) -> None:
        if not release.is_set() and data.get("workerId") == "w1":
            held.set()
            assert release.wait(30), "never released"
        record(workflow_id, event_name, data)

    srv.signals.raise_event = raise_event  # type: ignore[method-assign]
    srv.signals.round_trips = True  # as the durable backend's adapter
    slow = srv.dispatch("slow")
    workflow_id = srv.deps.run_store.get_task(slow).workflow_id  # type: ignore[union-attr]
    other = srv.dispatch("other")
    assert [t["taskId"] for t in poll(srv, "slow", worker="w1")] == [slow]
    answers: list[Any] = []

    def post_slow() -> None:
        body = {"taskId": slow, "status": "COMPLETED", "workerId": "w1", "outputData": {}}
        answers.append(srv.client.post(route, json=body))

    poster = threading.Thread(target=post_slow)
    poster.start()
    try:
        assert held.wait(10), "the result never reached the backend"
        # meanwhile: a read, a poll and another worker's result are answered
        with httpx.Client(base_url=srv.url, timeout=5) as other_client:
            read = other_client.get(f"/api/workflow/{workflow_id}", params={"includeTasks": False})
            assert read.status_code == 200 and read.json()["status"] == "RUNNING", read.text
            [task] = other_client.get(
                "/api/tasks/poll/batch/other", params={"workerid": "w2", "timeout": 0}
            ).json()
            assert task["taskId"] == other
            done = other_client.post(
                "/api/tasks", json={"taskId": other, "status": "COMPLETED", "workerId": "w2"}
            )
            assert done.status_code == 200, done.text
        assert answers == []  # the held result is still waiting for its backend
    finally:
        release.set()
        poster.join(30)
    [answer] = answers
    assert answer.status_code in (200, 204), answer.text
    assert [e.workflow_id for e in srv.signals.events()] == [
        srv.deps.run_store.get_task(other).workflow_id,  # type: ignore[union-attr]
        workflow_id,
    ]
