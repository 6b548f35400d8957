"""Bad input gets a 4xx with the error body naming the problem, never a 5xx; no route
shadows another; the OpenAPI document says what the server answers. Over real HTTP."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.routing import Match

from control_plane.api.app import create_app
from control_plane.api.routing import StepwayRoute, all_routes
from engine.ports.run_store import RunQuery
from protocol.limits import MAX_JSON_DEPTH
from tests.unit.control_plane.conftest import Server, assert_error, taskdef

WORKFLOW = {
    "name": "flow",
    "version": 1,
    "tasks": [{"name": "t", "taskReferenceName": "t", "type": "SET_VARIABLE"}],
}


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/workflow/search?start=9223372036854775808", "start"),
        ("/api/workflow/search?endTime=-1003703082142711797206545858560", "endTime"),
        ("/api/workflow/search?startTime=99999999999999999999", "startTime"),
        ("/api/metadata/workflow/flow?version=27132433098814439424", "version"),
        ("/api/metadata/workflow/flow?version=0", "version"),
        ("/api/tasks/poll/batch/t?count=18446744073709551616", "count"),
        ("/api/tasks/queue/sizes?taskType=", "taskType"),
        ("/api/tasks/queue/sizes?taskType=a%2Fb", "taskType"),
        ("/api/workflow/%00", "workflowId"),
        ("/api/workflow/search?correlationId=a%00b", "correlationId"),
    ],
)
def test_out_of_range_and_malformed_parameters_are_400(srv: Server, url: str, field: str) -> None:
    assert_error(srv.client.get(url), 400, field)


def test_out_of_range_path_and_body_integers_are_400(srv: Server) -> None:
    assert_error(srv.client.delete("/api/metadata/workflow/flow/4294967296"), 400, "version")
    r = srv.client.post("/api/workflow", json={"name": "flow", "version": 2**63})
    assert_error(r, 400, "version")
    r = srv.client.post(
        "/api/tasks",
        json={"taskId": "t", "status": "IN_PROGRESS", "callbackAfterSeconds": 10**12},
    )
    assert_error(r, 400, "callbackAfterSeconds")
    r = srv.client.post("/api/tasks", json={"taskId": "t", "status": "FAILED", "workerId": "a\0"})
    assert_error(r, 400, "workerId")
    huge = taskdef("huge", responseTimeoutSeconds=2**40)
    assert_error(srv.client.post("/api/metadata/taskdefs", json=[huge]), 400, "responseTimeout")


@pytest.mark.parametrize("name", ["a/b", "a\u0000b", "tab\there", " padded", "a:b", ""])
def test_definition_names_that_cannot_travel_in_a_url_are_refused(srv: Server, name: str) -> None:
    r = srv.client.post("/api/metadata/workflow", json={**WORKFLOW, "name": name})
    assert_error(r, 400, "$.name")


def test_a_body_nested_deeper_than_the_limit_is_400_naming_it(srv: Server) -> None:
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    ok = '{"x": ' + _nested(MAX_JSON_DEPTH - 1) + "}"
    headers = {"content-type": "application/json"}
    assert srv.client.post("/api/workflow/flow", content=ok, headers=headers).status_code == 200
    for depth in (MAX_JSON_DEPTH, 500, 100_000):
        body = '{"x": ' + _nested(depth) + "}"
        for url in ("/api/workflow/flow", "/api/tasks", "/api/metadata/workflow/validate"):
            r = srv.client.post(url, content=body, headers=headers)
            error = assert_error(r, 400)
            assert f"nested more than {MAX_JSON_DEPTH} levels" in error["message"], error
            assert error["retryable"] is False


@pytest.mark.parametrize(
    ("url", "body", "where"),
    [
        ("/api/workflow/flow", b'{"a": {"b": ["ok", "x\\ud800"]}}', "$.a.b[1]"),
        ("/api/workflow/flow", b'{"\\udc00": 1}', "$.\\udc00"),
        ("/api/workflow/flow", b'{"a": "\xed\xa0\x80"}', "$.a"),  # a surrogate's bytes
        ("/api/workflow/flow", b'{"a": "\\ude00\\ud83d"}', "$.a"),  # halves the wrong way round
        ("/api/workflow", b'{"name": "flow", "input": {"a": "\\uD800"}}', "$.input.a"),
        ("/api/workflow", b'{"name": "flow", "correlationId": "\\ud800"}', "$.correlationId"),
        ("/api/workflow/test", b'{"name": "flow", "input": {"a": "\\ud800"}}', "$.input.a"),
        (
            "/api/tasks",
            b'{"taskId": "t", "status": "COMPLETED", "outputData": {"a": "\\ud800"}}',
            "$.outputData.a",
        ),
        (
            "/api/metadata/workflow",
            b'{"name": "f", "description": "\\udbff", "tasks": []}',
            "$.description",
        ),
    ],
)
def test_a_body_holding_a_lone_surrogate_is_400_naming_where(
    srv: Server, url: str, body: bytes, where: str
) -> None:
    """JSON can spell a UTF-16 surrogate on its own, which no text can hold: the body is
    refused naming where, never a 500 (and no run is started)."""
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    r = srv.client.post(url, content=body, headers={"content-type": "application/json"})
    error = assert_error(r, 400, where)
    assert "surrogate" in error["message"] and error["retryable"] is False
    assert srv.deps.run_store.search_runs(RunQuery()).total_hits == 0


def test_an_escaped_surrogate_pair_is_one_character(srv: Server) -> None:
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    headers = {"content-type": "application/json"}
    r = srv.client.post("/api/workflow/flow", content=b'{"a": "\\ud83d\\ude00"}', headers=headers)
    assert r.status_code == 200, r.text
    assert srv.client.get(f"/api/workflow/{r.text}").json()["input"] == {"a": "\U0001f600"}


@pytest.mark.parametrize(
    ("url", "body", "where", "token"),
    [
        ("/api/workflow/flow", b'{"a": {"b": [1, NaN]}}', "$.a.b[1]", "NaN"),
        ("/api/workflow/flow", b'{"a": Infinity}', "$.a", "Infinity"),
        ("/api/workflow", b'{"name": "flow", "input": {"x": -Infinity}}', "$.input.x", "-Infinity"),
        (
            "/api/tasks",
            b'{"taskId": "t", "status": "COMPLETED", "outputData": {"score": NaN}}',
            "$.outputData.score",
            "NaN",
        ),
        (
            "/api/tasks/update-v2",
            b'{"taskId": "t", "status": "COMPLETED", "outputData": {"score": NaN}}',
            "$.outputData.score",
            "NaN",
        ),
        # beyond a double's range, Python reads an infinity: stored as null before
        ("/api/workflow/flow", b'{"a": 1e999}', "$.a", "1e999"),
        ("/api/workflow/flow", b'{"a": [0, -2.5E+400]}', "$.a[1]", "-2.5E+400"),
        (
            "/api/tasks/update-v2",
            b'{"taskId": "t", "status": "COMPLETED", "outputData": {"n": 1e999}}',
            "$.outputData.n",
            "1e999",
        ),
        # longer than Python reads an integer: a 400 naming nothing before
        ("/api/workflow/flow", b'{"a": ' + b"9" * 5000 + b"}", "$.a", "an integer of 5000 digits"),
    ],
)
def test_a_body_using_nan_or_infinity_is_400_naming_where(
    srv: Server, url: str, body: bytes, where: str, token: str
) -> None:
    """Python's json reads NaN and Infinity, which JSON has no number for (Jackson, and
    so Conductor, refuses them); stored, they would read back as null. The body is
    refused naming where, the Task API's hot routes included, and no run is started."""
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    r = srv.client.post(url, content=body, headers={"content-type": "application/json"})
    error = assert_error(r, 400, where)
    assert f"holds {token} at {where}" in error["message"] and error["retryable"] is False
    assert srv.deps.run_store.search_runs(RunQuery()).total_hits == 0


@pytest.mark.parametrize(
    ("url", "body", "where"),
    [
        ("/api/workflow/flow", b'{"a": {"b": ["ok", "x\\u0000y"]}}', "$.a.b[1]"),
        ("/api/workflow/flow", b'{"k\\u0000": 1}', "$.k"),
        (
            "/api/tasks/update-v2",
            b'{"taskId": "t", "status": "COMPLETED", "outputData": {"a": "\\u0000"}}',
            "$.outputData.a",
        ),
    ],
)
def test_a_body_holding_nul_is_400_naming_where(
    srv: Server, url: str, body: bytes, where: str
) -> None:
    """PostgreSQL's text and JSONB cannot store NUL: refused on every store alike, the
    Task API's hot routes included, rather than a 500 on PostgreSQL only."""
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    r = srv.client.post(url, content=body, headers={"content-type": "application/json"})
    error = assert_error(r, 400, where)
    assert "NUL character" in error["message"] and error["retryable"] is False
    assert srv.deps.run_store.search_runs(RunQuery()).total_hits == 0
    # a backslash then u0000, as text, is text
    text = b'{"a": "\\\\u0000"}'
    r = srv.client.post(
        "/api/workflow/flow", content=text, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200, r.text
    assert srv.client.get(f"/api/workflow/{r.text}").json()["input"] == {"a": "\\u0000"}


def test_nan_inside_a_string_is_text(srv: Server) -> None:
    assert srv.client.post("/api/metadata/workflow", json=WORKFLOW).status_code == 200
    headers = {"content-type": "application/json"}
    body = b'{"a": "NaN", "b": "Infinity and beyond"}'
    r = srv.client.post("/api/workflow/flow", content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert srv.client.get(f"/api/workflow/{r.text}").json()["input"] == {
        "a": "NaN",
        "b": "Infinity and beyond",
    }


def test_a_method_a_path_does_not_answer_is_405_listing_its_methods(srv: Server) -> None:
    """Not a complete-by-reference call on task 'all' (POST /api/tasks/{wf}/{ref}/{status})
    nor a terminate of run 'search' (DELETE /api/workflow/{workflowId})."""
    for method, url, allow in [
        ("POST", "/api/tasks/queue/polldata/all", "GET"),
        ("POST", "/api/tasks/poll/batch/x", "GET"),
        ("DELETE", "/api/workflow/search", "GET"),
        ("OPTIONS", "/api/metadata/taskdefs", "GET, POST, PUT"),
    ]:
        r = srv.client.request(method, url)
        assert_error(r, 405)
        assert r.headers["allow"] == allow, (method, url)
    # where no other route takes the path, a wrong status is a 400 naming it
    wf = srv.run()
    assert_error(srv.client.post(f"/api/tasks/{wf}/t1/DONE", json={}), 400, "status")


def _sample(route: StepwayRoute) -> str:
    """The route's template with each parameter filled: an enumeration with one of its
    values, a ``:path`` with two segments, anything else with ``x``."""

    def fill(m: re.Match[str]) -> str:
        name, convertor = m.group(1), m.group(2)
        if name in route.enum_params:
            return sorted(route.enum_params[name])[0]
        return "x/y" if convertor == ":path" else "x"

    return re.sub(r"\{(\w+)(:\w+)?\}", fill, route.path)


def _first_match(app: FastAPI, method: str, path: str) -> Any:
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in all_routes(app):
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return route
    return None


def test_every_route_is_reachable_and_no_two_routes_share_a_template(srv: Server) -> None:
    """Enumerate the routes: a request built from each route's own template reaches that
    route, and no two routes serve one method on one template."""
    app = create_app(srv.settings, srv.deps)
    routes = [r for r in all_routes(app) if isinstance(r, StepwayRoute)]
    assert len(routes) > 30
    for route in routes:
        for method in route.methods:
            got = _first_match(app, method, _sample(route))
            assert got is route, f"{method} {route.path} is shadowed by {got and got.path}"
    for a, b in itertools.combinations(routes, 2):
        shared = a.methods & b.methods if _sample(a) == _sample(b) else set()
        assert not shared, f"{a.path} and {b.path} both serve {shared}"


def test_the_openapi_document_declares_errors_not_422(srv: Server) -> None:
    doc = srv.client.get("/openapi.json").json()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    error = doc["components"]["schemas"]["ErrorBody"]
    assert set(error["required"]) >= {"status", "message", "instance", "retryable"}
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert "422" not in codes, (method, path)
            assert "400" in codes, (method, path)
            if path.startswith(("/api/metadata", "/api/tasks", "/api/workflow")):
                assert {"401", "403"} <= codes, (method, path)
            for code in codes - {"200", "201", "204"}:
                content = operation["responses"][code]["content"]
                assert content == {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                }, (method, path, code)
    sizes = doc["paths"]["/api/workflow/search"]["get"]["parameters"]
    start = next(p for p in sizes if p["name"] == "start")["schema"]
    assert start["minimum"] == 0 and start["maximum"] == 2**63 - 1
