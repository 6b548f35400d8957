"""Metadata and workflow API contract over real HTTP; auth modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from engine.ports.run_store import NewRun, RunStatus, RunUpdate
from tests.unit.control_plane.conftest import Server, assert_error, taskdef


def wf(name: str = "wf", version: int = 1, worker: str = "parse", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "tasks": [{"name": worker, "taskReferenceName": "p1", "type": "SIMPLE"}],
        **extra,
    }


def test_taskdefs_create_queues_idempotently(srv: Server) -> None:
    srv.settings.task_domains["parse"] = ["eu", "us"]
    c = srv.client
    plan = c.post("/api/metadata/taskdefs", params={"dryRun": "true"}, json=[taskdef("parse")])
    assert plan.json()["taskDefs"][0]["action"] == "create"
    assert srv.deps.provisioner.list_queues() == []  # dry run wrote nothing
    r = c.post("/api/metadata/taskdefs", json=[taskdef("parse")])
    assert r.status_code == 200
    assert sorted(srv.deps.provisioner.list_queues()) == [
        "eu-parse",
        "parse",
        "parse-high",
        "us-parse",
    ]
    again = c.post("/api/metadata/taskdefs", json=[taskdef("parse")]).json()["taskDefs"][0]
    assert again["action"] == "unchanged"
    assert {q["action"] for q in again["queues"]} == {"unchanged"}
    changed = c.put("/api/metadata/taskdefs", json=taskdef("parse", responseTimeoutSeconds=90))
    entry = changed.json()["taskDefs"][0]
    assert entry["action"] == "update" and entry["queues"][0]["changed"] == [
        "lock_duration_seconds"
    ]
    assert c.get("/api/metadata/taskdefs/parse").json()["responseTimeoutSeconds"] == 90
    assert [d["name"] for d in c.get("/api/metadata/taskdefs").json()] == ["parse"]
    assert_error(c.get("/api/metadata/taskdefs/nope"), 404)


def test_a_workflow_of_types_without_task_definitions_registers_with_their_queues(
    srv: Server,
) -> None:
    """Conductor's rule (MetadataMapperService uses a default task definition): no task
    definition is needed; the type's queues are made when the workflow is registered."""
    r = srv.client.post("/api/metadata/workflow", json=wf())
    assert r.status_code == 200, r.text
    assert srv.deps.run_store.list_task_defs() == []
    assert {"parse", "parse-high"} <= set(srv.deps.provisioner.list_queues())


def test_taskdef_errors_all_at_once_and_nothing_half_written(srv: Server) -> None:
    r = srv.client.post(
        "/api/metadata/taskdefs",
        json=[taskdef("good"), {"name": "bad-high"}, {"name": "x", "retryCount": -1}, "oops"],
    )
    body = assert_error(r, 400)
    paths = [e["path"] for e in body["validationErrors"]]
    assert any(p.startswith("$[1]") for p in paths) and any(p.startswith("$[2]") for p in paths)
    assert "$[3]" in paths
    assert srv.deps.provisioner.list_queues() == [] and srv.deps.run_store.list_task_defs() == []


def test_workflow_definitions(srv: Server) -> None:
    c = srv.client
    srv.settings.strict_task_definitions = True
    r = c.post("/api/metadata/workflow", json=wf())
    body = assert_error(r, 400)  # strict mode: 'parse' has no task definition
    assert any("parse" in e["message"] for e in body["validationErrors"])
    srv.settings.strict_task_definitions = False
    srv.register(taskdef("parse"))
    assert c.post("/api/metadata/workflow/validate", json=wf()).json()["valid"] is True
    assert c.post("/api/metadata/workflow", json=wf()).status_code == 200
    assert_error(c.post("/api/metadata/workflow", json=wf()), 409)
    r = c.put("/api/metadata/workflow", json=[wf(), wf(version=2)])
    assert [w["action"] for w in r.json()["workflows"]] == ["unchanged", "create"]
    assert c.get("/api/metadata/workflow/wf").json()["version"] == 2
    assert c.get("/api/metadata/workflow/wf", params={"version": 1}).json()["version"] == 1
    assert_error(c.delete("/api/metadata/taskdefs/parse"), 409)  # still used
    assert c.delete("/api/metadata/workflow/wf/2").status_code == 200
    assert_error(c.get("/api/metadata/workflow/wf", params={"version": 2}), 404)
    assert_error(
        c.put("/api/metadata/workflow", json=[wf(), {"name": "x", "tasks": 3}]), 400, "$[1]"
    )


def test_start_read_steer_and_search(srv: Server) -> None:
    c = srv.client
    srv.register(taskdef("parse"))
    schema = {"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}}
    c.post("/api/metadata/workflow", json=wf(inputSchema=schema))
    assert_error(c.post("/api/workflow/wf", json={"url": 3}), 400, "$.input.url")
    assert_error(c.post("/api/workflow/nope", json={}), 404)
    assert_error(c.post("/api/workflow", json={"name": "wf", "priority": 100}), 400, "priority")
    r = c.post("/api/workflow/wf", params={"correlationId": "k1", "priority": 3}, json={"url": "u"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    wid = r.text
    start = srv.signals.start_of(wid)
    assert start.data["name"] == "wf"
    assert start.data["input"] == {"url": "u"} and start.data["priority"] == 3
    req = {
        "name": "wf",
        "input": {"url": "v"},
        "idempotencyKey": "once",
        "taskToDomain": {"parse": "eu"},
    }
    first = c.post("/api/workflow", json=req).text
    assert c.post("/api/workflow", json=req).text == first
    srv.signals.start_of(first)
    assert len([s for s in srv.signals.calls if s.kind == "start"]) == 2
    got = c.get(f"/api/workflow/{wid}").json()
    assert got["status"] == "RUNNING" and got["input"] == {"url": "u"} and got["tasks"] == []
    assert got["correlationId"] == "k1" and got["workflowVersion"] == 1
    assert c.put(f"/api/workflow/{wid}/pause").status_code == 200
    assert c.get(f"/api/workflow/{wid}/status").json()["status"] == "PAUSED"
    assert c.delete(f"/api/workflow/{wid}", params={"reason": "stop"}).status_code == 200
    kinds = [(s.kind, s.name) for s in srv.signals.calls if s.workflow_id == wid]
    assert kinds[-3:] == [("suspend", None), ("resume", None), ("event", "stepway.terminate")]
    srv.deps.run_store.update_run(wid, RunUpdate(status=RunStatus.TERMINATED), 1)
    assert_error(c.put(f"/api/workflow/{wid}/pause"), 409)
    # no task ran: nothing to retry (Conductor), a restart runs it again
    assert_error(c.post(f"/api/workflow/{wid}/retry"), 409)
    assert c.post(f"/api/workflow/{wid}/restart").status_code == 204
    assert c.get(f"/api/workflow/{wid}/status").json()["status"] == "RUNNING"
    assert_error(c.post(f"/api/workflow/{wid}/restart"), 409)  # running
    res = c.get("/api/workflow/search", params={"workflowType": "wf"}).json()
    assert res["totalHits"] == 2
    res = c.get("/api/workflow/search", params={"query": "correlationId = 'k1'"}).json()
    assert [r["workflowId"] for r in res["results"]] == [wid]
    assert_error(c.get("/api/workflow/search", params={"status": "NOPE"}), 400, "status")
    assert_error(c.get("/api/workflow/missing"), 404)


def test_search_sorts_by_start_time_as_conductor_spells_it(srv: Server) -> None:
    """``sort`` is Conductor's ``field[:ASC|DESC]`` (items joined by ``|``, ASC when the
    direction is left out); runs sort by startTime only, and any other field or
    direction is refused naming ``sort`` rather than ignored."""
    c = srv.client
    srv.register(taskdef("parse"))
    c.post("/api/metadata/workflow", json=wf())
    for i in range(4):
        srv.deps.run_store.create_run(
            NewRun(workflow_id=f"run-{i}", name="wf", version=1, create_time=1_000 + i)
        )

    def ids(**params: Any) -> list[str]:
        response = c.get("/api/workflow/search", params={"workflowType": "wf", **params})
        assert response.status_code == 200, response.text
        found = response.json()
        assert found["totalHits"] == 4
        return [r["workflowId"] for r in found["results"]]

    newest = ["run-3", "run-2", "run-1", "run-0"]
    assert ids() == newest
    assert ids(sort="startTime:DESC") == newest
    assert ids(sort="startTime:ASC") == newest[::-1]
    assert ids(sort="startTime") == newest[::-1]  # ASC when the direction is left out
    assert ids(sort="startTime:asc|startTime:DESC") == newest[::-1]  # the first key sorts
    assert ids(sort="startTime:ASC", start=1, size=2) == ["run-1", "run-2"]
    assert ids(sort=" ") == newest
    assert_error(c.get("/api/workflow/search", params={"sort": "endTime:DESC"}), 400, "sort")
    assert_error(c.get("/api/workflow/search", params={"sort": "startTime:UP"}), 400, "sort")
    assert_error(c.get("/api/workflow/search", params={"sort": "startTime|x"}), 400, "sort")


def test_start_failure_leaves_no_run(make_server: Any) -> None:
    """With network adapters a start answers once its orchestration is scheduled: a
    backend that fails it fails the start (503 for an outage, 500 otherwise:
    tests/unit/control_plane/api/test_start_failures.py; with local adapters a start is
    answered once stored and scheduled later:
    tests/unit/control_plane/api/test_starts_stored.py)."""
    srv = make_server(local_adapters=False)
    srv.register(taskdef("parse"))
    srv.client.post("/api/metadata/workflow", json=wf())
    srv.signals.refuse_starts = True  # the backend cannot be reached
    assert_error(srv.client.post("/api/workflow/wf", json={}), 503)
    assert srv.client.get("/api/workflow/search").json()["totalHits"] == 0


def test_openapi_and_docs(srv: Server) -> None:
    spec = srv.client.get("/openapi.json").json()
    assert "/api/tasks/poll/batch/{tasktype}" in spec["paths"]
    assert srv.client.get("/docs").status_code == 200


def test_token_auth_roles_and_worker_types(make_server: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {
                        "token": "admin-token-0123456789",
                        "name": "ops",
                        "roles": ["admin", "operator"],
                    },
                    {
                        "token": "worker-token-0123456789",
                        "name": "doc",
                        "roles": ["worker"],
                        "taskTypes": ["parse"],
                    },
                    {"token": "reader-token-0123456789", "name": "ro", "roles": ["reader"]},
                ]
            }
        )
    )
    srv = make_server(auth_mode="tokens", tokens_file=tokens)

    def h(tok: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tok}"}

    c = httpx.Client(base_url=srv.url)
    assert_error(c.get("/api/metadata/taskdefs"), 401)
    assert_error(c.get("/api/metadata/taskdefs", headers=h("wrong-token-000000000")), 401)
    for name in ("parse", "other"):
        r = c.post(
            "/api/metadata/taskdefs", json=[taskdef(name)], headers=h("admin-token-0123456789")
        )
        assert r.status_code == 200
    assert_error(
        c.post("/api/metadata/taskdefs", json=[taskdef("x")], headers=h("reader-token-0123456789")),
        403,
    )
    assert c.get("/api/metadata/taskdefs", headers=h("reader-token-0123456789")).status_code == 200
    w = h("worker-token-0123456789")
    assert c.get("/api/tasks/poll/batch/parse", headers=w).status_code == 200
    assert_error(c.get("/api/tasks/poll/batch/other", headers=w), 403)
    assert_error(c.post("/api/workflow/wf", json={}, headers=w), 403)
    c.close()


def test_entra_jwt(make_server: Any) -> None:
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk["kid"] = "k1"
    issuer = "https://login.microsoftonline.com/t1/v2.0"
    srv = make_server(
        auth_mode="entra",
        entra_tenant_id="t1",
        entra_audience=["api://stepway"],
        entra_jwks={"keys": [jwk]},
        entra_worker_task_types={"client-doc": ["parse"]},
    )

    def token(**claims: Any) -> dict[str, str]:
        base = {
            "iss": issuer,
            "aud": "api://stepway",
            "exp": int(time.time()) + 600,
            "azp": "client-doc",
            "roles": ["worker"],
        }
        tok = jwt.encode({**base, **claims}, key, algorithm="RS256", headers={"kid": "k1"})
        return {"Authorization": f"Bearer {tok}"}

    c = httpx.Client(base_url=srv.url)
    r = c.post("/api/metadata/taskdefs", json=[taskdef("parse")], headers=token(roles=["admin"]))
    assert r.status_code == 200
    assert c.get("/api/tasks/poll/batch/parse", headers=token()).status_code == 200
    assert_error(c.get("/api/tasks/poll/batch/parse", headers=token(aud="other")), 401)
    assert_error(c.get("/api/tasks/poll/batch/parse", headers=token(exp=1)), 401)
    assert_error(c.get("/api/metadata/taskdefs", headers=token()), 403)
    # a worker app's managed identity has no app role: the identity map is its grant
    assert c.get("/api/tasks/poll/batch/parse", headers=token(roles=[])).status_code == 200
    assert_error(c.get("/api/tasks/poll/batch/other", headers=token(roles=[])), 403)
    assert_error(c.get("/api/tasks/poll/batch/parse", headers=token(roles=[], azp="someone")), 403)
    # the lease of a task belongs to the identity (oid) that polled it
    task_id = srv.dispatch("parse")
    polled = c.get("/api/tasks/poll/batch/parse", headers=token(oid="mi-1")).json()
    assert [t["taskId"] for t in polled] == [task_id]
    result = {"taskId": task_id, "status": "COMPLETED"}
    assert_error(c.post("/api/tasks", json=result, headers=token(oid="mi-2")), 409)
    assert c.post("/api/tasks", json=result, headers=token(oid="mi-1")).status_code == 200
    c.close()


def test_a_definition_that_can_start_itself_is_refused_with_the_chain(srv: Server) -> None:
    c = srv.client
    child = {
        "name": "child",
        "tasks": [
            {
                "name": "back",
                "taskReferenceName": "back",
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": "parent"},
            }
        ],
    }
    parent = {
        "name": "parent",
        "tasks": [
            {
                "name": "down",
                "taskReferenceName": "down",
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": "child"},
            }
        ],
    }
    assert c.post("/api/metadata/workflow", json=child).status_code == 200
    for response in (
        c.post("/api/metadata/workflow", json=parent),
        c.post("/api/metadata/workflow/validate", json=parent),
    ):
        body = assert_error(response, 400, "$.tasks[0].subWorkflowParam.name")
        assert "can start itself (parent -> child -> parent)" in body["message"]
    assert_error(c.get("/api/metadata/workflow/parent"), 404)


def test_a_wait_past_100_years_is_a_400_naming_the_field_and_the_limit(srv: Server) -> None:
    """A WAIT literal past the engine's bound registered, then crashed its run arming the
    timer (``year 273792727 is out of range``); now registration refuses it, with the
    run's own parser, and what the run reads (a bare number of seconds) registers."""
    c = srv.client

    def wait(name: str, **params: Any) -> dict[str, Any]:
        return {
            "name": name,
            "version": 1,
            "tasks": [
                {"name": "w", "taskReferenceName": "w", "type": "WAIT", "inputParameters": params}
            ],
        }

    for name, params, field in (
        ("w_days", {"duration": "99999999999d"}, "duration"),
        ("w_3m", {"duration": "3000000d"}, "duration"),
        ("w_iso", {"duration": "P99999999999D"}, "duration"),
        ("w_num", {"duration": 10**30}, "duration"),
        ("w_until", {"until": "9999-12-31T23:59:59-14:00"}, "until"),
    ):
        body = assert_error(
            c.post("/api/metadata/workflow", json=wait(name, **params)),
            400,
            f"$.tasks[0].inputParameters.{field}",
        )
        messages = [e["message"] for e in body["validationErrors"]]
        assert any("at most 36500 days (100 years)" in m for m in messages), messages
    for name, params in (
        ("w_ok", {"duration": "36500d"}),
        ("w_bare", {"duration": "999"}),
        ("w_expr", {"duration": "${workflow.input.d}"}),
    ):
        r = c.post("/api/metadata/workflow", json=wait(name, **params))
        assert r.status_code == 200, r.text


def test_names_and_versions_lists_each_name_s_versions_without_bodies(srv: Server) -> None:
    """conductor-oss's GET /metadata/workflow/names-and-versions (WorkflowDefSummary)."""
    c = srv.client
    assert c.get("/api/metadata/workflow/names-and-versions").json() == {}
    for name, version in (("b", 2), ("a", 1), ("b", 1)):
        assert c.post("/api/metadata/workflow", json=wf(name, version)).status_code == 200
    got = c.get("/api/metadata/workflow/names-and-versions")
    assert got.status_code == 200
    summary = got.json()
    assert {n: [(s["name"], s["version"]) for s in v] for n, v in summary.items()} == {
        "a": [("a", 1)],
        "b": [("b", 1), ("b", 2)],
    }
    # registered as b2, then b1: each version's own registration time
    b1, b2 = summary["b"]
    assert 0 < b2["createTime"] <= b1["createTime"]
    assert all(set(s) == {"name", "version", "createTime"} for v in summary.values() for s in v)


def test_a_registered_input_template_counts_for_a_system_tasks_required_input(
    srv: Server,
) -> None:
    """Conductor's HTTP and JSON_JQ_TRANSFORM checks accept an input the registered task
    definition's inputTemplate gives (the engine fills it from there too), with or
    without strict task definitions; without one it is a 400 naming the field."""
    c = srv.client
    srv.settings.strict_task_definitions = False
    http = {"name": "call_api", "taskReferenceName": "call", "type": "HTTP"}
    jq = {"name": "shape", "taskReferenceName": "shape", "type": "JSON_JQ_TRANSFORM"}
    definition = {"name": "templated", "version": 1, "tasks": [http, jq]}
    body = assert_error(c.post("/api/metadata/workflow", json=definition), 400)
    assert [e["path"] for e in body["validationErrors"]] == [
        "$.tasks[0].inputParameters.uri",
        "$.tasks[1].inputParameters.queryExpression",
    ]
    srv.register(
        taskdef("call_api", inputTemplate={"http_request": {"uri": "http://example.test"}}),
        taskdef("shape", inputTemplate={"queryExpression": "."}),
    )
    assert c.post("/api/metadata/workflow", json=definition).status_code == 200


def test_a_task_definitions_retry_cap_and_jitter_are_kept_and_checked(srv: Server) -> None:
    """conductor-oss's TaskDef fields maxRetryDelaySeconds and backoffJitterMs (@Min 0)."""
    c = srv.client
    srv.register(taskdef("capped", maxRetryDelaySeconds=600, backoffJitterMs=250))
    stored = c.get("/api/metadata/taskdefs/capped").json()
    assert (stored["maxRetryDelaySeconds"], stored["backoffJitterMs"]) == (600, 250)
    body = assert_error(
        c.post("/api/metadata/taskdefs", json=[taskdef("bad", backoffJitterMs=-1)]), 400
    )
    assert [e["path"] for e in body["validationErrors"]] == ["$[0].backoffJitterMs"]
