"""The Task API's fast path (control_plane/api/fast_path.py) answers exactly as FastAPI.

Two servers over real HTTP, one with the fast path and one without, on stores in the
same state and a fixed clock, are sent the same good and bad requests in the same
order; each answer (status, headers but ``date``, body bytes) must be the same. The
fast path's server also counts what it handed to the full app, so the test shows which
requests the fast path served itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from control_plane.api import tasks as api_tasks
from control_plane.api.fast_path import FastPath
from tests.unit.control_plane.conftest import Server, taskdef

NOW = 1_700_000_000_000
MAX_BODY = 8192
JSON = {"Content-Type": "application/json"}
TOKENS = {
    "admin-token-0123456789": {"name": "admin", "roles": ["admin", "operator"]},
    "worker-a-token-0123456789": {"name": "wa", "roles": ["worker"], "taskTypes": ["fa"]},
    "reader-token-0123456789": {"name": "rd", "roles": ["reader"]},
}


@dataclass
class Pair:
    """The same server with and without the fast path; ``fell_through`` counts the
    requests the fast path handed to the full app."""

    fast: Server
    plain: Server
    fell_through: list[str] = field(default_factory=list)

    def each(self) -> Iterator[Server]:
        yield self.fast
        yield self.plain

    def ask(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        *,
        status: int,
        served: bool,
        chunks: int = 0,
        new_run: bool = False,
    ) -> httpx.Response:
        """Send the request to both; their answers must be the same, with ``status``;
        ``served``: whether the fast path answers it itself. ``chunks``: send the body
        in that many chunks, without a Content-Length. ``new_run``: the answers are
        the ids of new runs (each server makes its own), which must read the same."""
        answers = []
        before = len(self.fell_through)
        for srv in self.each():
            content: Any = body
            if chunks and body is not None:
                step = -(-len(body) // chunks)
                content = iter([body[i : i + step] for i in range(0, len(body), step)])
            r = srv.client.request(method, url, content=content, headers=headers)
            answers.append(r)
        fast, plain = answers
        assert fast.status_code == plain.status_code == status, (fast.text, plain.text)
        assert _headers(fast) == _headers(plain)
        assert (len(self.fell_through) == before) is served, self.fell_through[before:]
        if new_run:
            runs = [_run(srv, r.text) for srv, r in zip(self.each(), answers, strict=True)]
            assert runs[0] == runs[1], runs
        else:
            assert fast.content == plain.content
        return fast


def _run(srv: Server, workflow_id: str) -> dict[str, Any]:
    """The run as the API reads it, but for its id (the start's answer)."""
    r = srv.client.get(f"/api/workflow/{workflow_id}?includeTasks=false")
    assert r.status_code == 200, r.text
    run: dict[str, Any] = r.json()
    assert run.pop("workflowId") == workflow_id
    return run


def _headers(r: httpx.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in r.headers.multi_items() if k.lower() != "date"]


def _pair(make_server: Any, **settings: Any) -> Pair:
    def clock() -> int:
        return NOW

    fast = make_server(clock=clock, max_body_bytes=MAX_BODY, **settings)
    plain = make_server(clock=clock, max_body_bytes=MAX_BODY, fast_path=False, **settings)
    pair = Pair(fast, plain)
    full = fast.app.full_app

    async def counting_full(scope: Scope, receive: Receive, send: Send) -> None:
        pair.fell_through.append(f"{scope['method']} {scope['path']}")
        await full(scope, receive, send)

    fast.app.fast_path = FastPath(fast.app, counting_full, MAX_BODY)
    return pair


@pytest.fixture
def pair(make_server: Any) -> Pair:
    return _pair(make_server)


def _dispatch(pair: Pair, task_type: str, n: int) -> list[str]:
    """``n`` tasks of ``task_type`` queued in both servers, with the same ids."""
    ids = [f"{task_type}-task-{i}" for i in range(n)]
    for srv in pair.each():
        workflow_id = srv.run(f"{task_type}-run")
        for i, task_id in enumerate(ids):
            srv.dispatch(task_type, workflow_id=workflow_id, task_id=task_id, ref=f"t{i}")
    return ids


def test_polls_answer_as_fastapi(pair: Pair) -> None:
    for srv in pair.each():
        srv.register(taskdef("fp"))
    ids = _dispatch(pair, "fp", 3)
    got = pair.ask(
        "GET", "/api/tasks/poll/batch/fp?workerid=w1&count=2&timeout=0", status=200, served=True
    )
    assert [t["taskId"] for t in got.json()] == ids[:2]
    assert got.headers["content-type"] == "application/json"
    one = pair.ask("GET", "/api/tasks/poll/fp?workerid=w2", status=200, served=True)
    assert one.json()["taskId"] == ids[2] and one.json()["workerId"] == "w2"
    pair.ask("GET", "/api/tasks/poll/fp?workerid=w2", status=204, served=True)
    assert (
        pair.ask("GET", "/api/tasks/poll/batch/fp?timeout=0", status=200, served=True).json() == []
    )
    # the query as FastAPI reads it: the last of repeated values, blank values kept
    pair.ask("GET", "/api/tasks/poll/batch/fp?count=1&count=3&timeout=0", status=200, served=True)
    pair.ask("GET", "/api/tasks/poll/batch/fp?timeout=0&workerid=&domain=", status=200, served=True)
    # numbers as FastAPI reads them
    for query in ("count=%2B3", "count=05", "count=%201%20"):
        pair.ask("GET", f"/api/tasks/poll/batch/fp?{query}&timeout=0", status=200, served=True)
    # one path segment after poll/: the single poll of a type named "batch"
    pair.ask("GET", "/api/tasks/poll/batch?timeout=0", status=204, served=True)
    # an error the route raises: rendered by the app's handler
    for srv in pair.each():
        srv.settings.strict_task_definitions = True
    pair.ask("GET", "/api/tasks/poll/batch/unknown?timeout=0", status=404, served=True)
    pair.ask("GET", "/api/tasks/poll/fp?domain=nowhere", status=400, served=True)


BAD_QUERIES = [
    "count=0",
    "count=101",
    "count=abc",
    "count=",
    "count=1.5",
    "timeout=-1",
    "timeout=5001",
    "timeout=1e3",
    "workerid=a%00b",
    "a%00=1",
]


def test_bad_poll_queries_are_the_apps_400(pair: Pair) -> None:
    for query in BAD_QUERIES:
        url = f"/api/tasks/poll/batch/fp?{query}"
        body = pair.ask("GET", url, status=400, served=False).json()
        assert body["validationErrors"], body


def test_arguments_remembered_answer_as_fastapi(pair: Pair) -> None:
    """The fast path keeps the validated arguments of a path and query string it has
    seen; each later request of it answers as FastAPI does, and a request whose path or
    query differs is validated on its own (a bad one still goes to the app)."""
    for srv in pair.each():
        srv.register(taskdef("fp"))
    ids = _dispatch(pair, "fp", 4)
    url = "/api/tasks/poll/batch/fp?workerid=w1&count=1&timeout=0"
    for expected in ids[:2]:
        got = pair.ask("GET", url, status=200, served=True)
        assert [t["taskId"] for t in got.json()] == [expected]
        assert got.json()[0]["workerId"] == "w1"
    other = pair.ask("GET", url.replace("w1", "w2"), status=200, served=True)
    assert other.json()[0]["workerId"] == "w2"
    two = pair.ask("GET", url.replace("count=1", "count=2"), status=200, served=True)
    assert [t["taskId"] for t in two.json()] == ids[3:]
    for query in BAD_QUERIES:
        bad = f"/api/tasks/poll/batch/fp?{query}"
        pair.ask("GET", bad, status=400, served=False)
        pair.ask("GET", bad, status=400, served=False)  # not remembered as good
    pair.ask("GET", url, status=200, served=True)
    # a long query string is answered as any other but not kept: ever new ones cannot
    # fill the memory
    assert pair.fast.app.fast_path is not None
    batch = next(
        h for h in pair.fast.app.fast_path._routes if h.route.endpoint is api_tasks.batch_poll
    )
    kept = len(batch.params_seen)
    long_url = url + "&workerid=" + "w" * 3000
    pair.ask("GET", long_url, status=200, served=True)
    assert len(batch.params_seen) == kept


def test_other_requests_go_to_the_app(pair: Pair) -> None:
    pair.ask("GET", "/api/tasks/poll/batch/a%00b", status=400, served=False)
    pair.ask("POST", "/api/tasks/update-v2?x=%00", _result("x"), JSON, status=400, served=False)
    pair.ask("GET", "/api/tasks/poll/batch/fp/x", status=404, served=False)
    pair.ask("PUT", "/api/tasks/update-v2", b"{}", JSON, status=405, served=False)
    pair.ask("GET", "/api/tasks/update-v2", status=405, served=False)
    pair.ask("GET", "/api/tasks/queue/polldata?taskType=fp", status=200, served=False)


def _result(task_id: str, **fields: Any) -> bytes:
    return json.dumps({"taskId": task_id, "status": "COMPLETED", **fields}).encode()


def test_results_answer_as_fastapi(pair: Pair) -> None:
    for srv in pair.each():
        srv.register(taskdef("fr"))
    ids = _dispatch(pair, "fr", 4)
    pair.ask(
        "GET", "/api/tasks/poll/batch/fr?workerid=w1&count=2&timeout=0", status=200, served=True
    )
    done = pair.ask(
        "POST", "/api/tasks", _result(ids[0], outputData={"n": 1}), JSON, status=200, served=True
    )
    assert done.text == ids[0] and done.headers["content-type"] == "text/plain; charset=utf-8"
    # update-v2: the result, then the next task of the type for the worker, or 204
    charset = {"Content-Type": "application/json; charset=utf-8"}
    for done_id, headers, next_id in [(1, JSON, 2), (2, charset, 3), (3, JSON, None)]:
        body = _result(ids[done_id], workerId="w1")
        status = 204 if next_id is None else 200
        got = pair.ask("POST", "/api/tasks/update-v2", body, headers, status=status, served=True)
        if next_id is not None:
            assert got.json()["taskId"] == ids[next_id]
    # errors the route raises
    pair.ask("POST", "/api/tasks", _result("nope"), JSON, status=404, served=True)
    pair.ask("POST", "/api/tasks/update-v2", _result("nope"), JSON, status=404, served=True)
    pair.ask("POST", "/api/tasks", _result(ids[0], attempt=2), JSON, status=409, served=True)
    wrong_run = _result(ids[0], workflowInstanceId="other")
    pair.ask("POST", "/api/tasks", wrong_run, JSON, status=400, served=True)
    # a body sent in chunks, within the limit
    pair.ask(
        "POST",
        "/api/tasks",
        _result(ids[0], outputData={"n": 1}),
        JSON,
        status=200,
        served=True,
        chunks=3,
    )


BAD_BODIES: list[tuple[str, bytes, dict[str, str], int]] = [
    ("malformed", b'{"taskId": ', JSON, 400),
    ("a list", b"[]", JSON, 400),
    ("null", b"null", JSON, 400),
    ("a string", b'"x"', JSON, 400),
    ("empty", b"", JSON, 400),
    ("no taskId", b'{"status": "COMPLETED"}', JSON, 400),
    ("a bad status", b'{"taskId": "x", "status": "DONE"}', JSON, 400),
    (
        "outputData not an object",
        b'{"taskId": "x", "status": "COMPLETED", "outputData": 1}',
        JSON,
        400,
    ),
    ("not UTF-8", b'{"taskId": "\xff", "status": "COMPLETED"}', JSON, 400),
    (
        "too deep",
        b'{"taskId": "x", "status": "COMPLETED", "outputData": {"a": '
        + b"[" * 120
        + b"]" * 120
        + b"}}",
        JSON,
        400,
    ),
    ("text/plain", _result("x"), {"Content-Type": "text/plain"}, 400),
    ("no content type", _result("x"), {}, 400),
    ("json with odd parameters", _result("x"), {"Content-Type": "application/json;;"}, 404),
    ("vendor json", _result("x"), {"Content-Type": "application/vnd.x+json"}, 404),
    ("too large", _result("x", outputData={"s": "x" * MAX_BODY}), JSON, 413),
]


def test_bodies_it_does_not_take_are_the_apps(pair: Pair) -> None:
    for url in ("/api/tasks", "/api/tasks/update-v2"):
        for _what, body, headers, status in BAD_BODIES:
            pair.ask("POST", url, body, headers, status=status, served=False)
            if body:
                pair.ask("POST", url, body, headers, status=status, served=False, chunks=4)


@pytest.fixture
def authed(make_server: Any, tmp_path: Path) -> Pair:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": [{"token": t, **p} for t, p in TOKENS.items()]}))
    pair = _pair(make_server, auth_mode="tokens", tokens_file=path)
    for srv in pair.each():
        srv.client.headers["Authorization"] = "Bearer admin-token-0123456789"
        srv.register(taskdef("fa"), taskdef("fb"))
    return pair


def _as(token: str | None, **headers: str) -> dict[str, str]:
    return {"Authorization": token or "", **headers}


def test_callers_are_authenticated_as_by_fastapi(authed: Pair) -> None:
    ids = _dispatch(authed, "fa", 2)
    worker = _as("Bearer worker-a-token-0123456789")
    for token, status in [
        ("", 401),
        ("Basic abc", 401),
        ("Bearer unknown-token-0123456789", 401),
        ("Bearer reader-token-0123456789", 403),
    ]:
        authed.ask(
            "GET",
            "/api/tasks/poll/batch/fa?timeout=0",
            headers=_as(token),
            status=status,
            served=True,
        )
        authed.ask(
            "POST",
            "/api/tasks/update-v2",
            _result(ids[0]),
            _as(token, **JSON),
            status=status,
            served=True,
        )
    authed.ask("GET", "/api/tasks/poll/fb", headers=worker, status=403, served=True)
    authed.ask(
        "GET",
        "/api/tasks/poll/batch/fa?workerid=w&timeout=0",
        headers=worker,
        status=200,
        served=True,
    )
    authed.ask(
        "POST", "/api/tasks/update-v2", _result(ids[0]), {**worker, **JSON}, status=200, served=True
    )
    # with a bad body as well: which error comes first is the app's to say
    authed.ask("POST", "/api/tasks", b"{", _as("", **JSON), status=400, served=False)
    authed.ask("POST", "/api/tasks", b"{}", _as("", **JSON), status=401, served=False)
    authed.ask("GET", "/api/tasks/poll/batch/fa?count=0", headers=_as(""), status=401, served=False)


FLOW = {
    "name": "fs",
    "version": 1,
    "tasks": [{"name": "fa", "taskReferenceName": "t1", "type": "SIMPLE"}],
}


def _start_request(**fields: Any) -> bytes:
    return json.dumps({"name": "fs", "input": {"a": [1, "x"]}, **fields}).encode()


def test_starts_answer_as_fastapi(authed: Pair) -> None:
    for srv in authed.each():
        assert srv.client.post("/api/metadata/workflow", json=FLOW).status_code == 200
    served = [
        ("/api/workflow/fs", b'{"a": {"b": [1, 2.5, null, "\\u00e9"]}}'),
        ("/api/workflow/fs?version=1&correlationId=c-1&priority=7", b'{"x": 1}'),
        ("/api/workflow/fs", b"{}"),
        ("/api/workflow", _start_request()),
        ("/api/workflow", _start_request(correlationId="c-2", priority=3, version=1)),
    ]
    for url, body in served:
        authed.ask("POST", url, body, JSON, status=200, served=True, new_run=True)
    authed.ask("POST", url, body, JSON, status=200, served=True, new_run=True, chunks=3)
    # a start that is the app's own: no body (the input is empty), or one the fast path
    # does not read (Conductor's clients send JSON objects)
    authed.ask("POST", "/api/workflow/fs", b"", JSON, status=200, served=False, new_run=True)
    authed.ask("POST", "/api/workflow/fs", b"null", JSON, status=200, served=False, new_run=True)
    # errors the route raises: rendered by the app's handlers
    authed.ask("POST", "/api/workflow/nope", b"{}", JSON, status=404, served=True)
    authed.ask("POST", "/api/workflow", _start_request(name="nope"), JSON, status=404, served=True)
    authed.ask("POST", "/api/workflow/fs?version=9", b"{}", JSON, status=404, served=True)
    reader = _as("Bearer reader-token-0123456789", **JSON)
    authed.ask("POST", "/api/workflow/fs", b"{}", reader, status=403, served=True)
    authed.ask("POST", "/api/workflow", _start_request(), _as("", **JSON), status=401, served=True)
    # what FastAPI validates: its 400 naming the field
    for url, body in [
        ("/api/workflow/fs?priority=100", b"{}"),
        ("/api/workflow/fs?version=0", b"{}"),
        ("/api/workflow/fs", b"[1]"),
        ("/api/workflow", _start_request(priority=-1)),
        ("/api/workflow", _start_request(input=[1])),
        ("/api/workflow", b'{"input": {}}'),
    ]:
        answer = authed.ask("POST", url, body, JSON, status=400, served=False)
        assert answer.json()["validationErrors"], answer.text
    # paths of other routes
    authed.ask("POST", "/api/workflow/search", b"{}", JSON, status=405, served=False)
    authed.ask("POST", "/api/workflow/test", b"{}", JSON, status=400, served=False)
