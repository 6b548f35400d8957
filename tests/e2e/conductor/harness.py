"""A Conductor client over plain HTTP, for the Conductor compatibility tests.

Everything goes through Stepway's public API (``/api/...``) the way a Conductor client,
an operator's script or a worker would call Conductor: definitions are registered with
the metadata API, runs are started and steered with the workflow API, and tasks are
polled and answered with the Task API. Nothing reaches into the engine.

Conductor decides a run synchronously inside the API call (its specs call ``decide`` or
``sweep`` and read the state at once); Stepway decides in the engine, a moment later.
After a worker's answer the tests therefore wait until the run reached the next settled
state (``wait``) and then assert the whole of it; the answers of ``start`` and
``terminate`` are read without waiting (issue 12, point 8).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

#: how long a test waits for the engine to reach the next state
SETTLE_SECONDS = 20.0
ENDED = frozenset({"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"})


def unique(prefix: str) -> str:
    """A name no other test uses (all tests share one platform)."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def simple(name: str, ref: str, **input_parameters: Any) -> dict[str, Any]:
    """A SIMPLE (worker) task of a definition."""
    return {
        "name": name,
        "taskReferenceName": ref,
        "type": "SIMPLE",
        "inputParameters": input_parameters,
    }


def workflow(name: str, tasks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A workflow definition with Conductor's usual fields."""
    return {
        "name": name,
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@example.com",
        "tasks": tasks,
        **fields,
    }


def types(run: dict[str, Any]) -> list[str]:
    return [t["taskType"] for t in run["tasks"]]


def statuses(run: dict[str, Any]) -> list[str]:
    return [t["status"] for t in run["tasks"]]


def seqs(run: dict[str, Any]) -> list[int]:
    return [t["seq"] for t in run["tasks"]]


def refs(run: dict[str, Any]) -> list[str]:
    return [t["referenceTaskName"] for t in run["tasks"]]


def task(run: dict[str, Any], ref: str) -> dict[str, Any]:
    """The latest task of ``ref`` in a run (Conductor's ``getTaskByRefName``)."""
    found = [t for t in run["tasks"] if t["referenceTaskName"] == ref]
    assert found, f"no task {ref!r} in {refs(run)}"
    return found[-1]


@contextlib.contextmanager
def echo_server() -> Iterator[str]:
    """A local HTTP server answering every POST with ``{"got": <JSON body>, "header":
    <X-Test header>}``; yields its URL."""

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            answer = json.dumps({"got": body, "header": self.headers.get("X-Test")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/echo"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Conductor:
    """The Conductor REST API of one Stepway platform."""

    http: httpx.Client
    #: workers polled with these ids so far (to tell them apart in assertions)
    workers: set[str] = field(default_factory=set)

    # --- metadata ---------------------------------------------------------------------

    def register(self, *definitions: dict[str, Any]) -> None:
        """``PUT /metadata/workflow`` (create or update a list), as the SDKs register."""
        r = self.http.put("/api/metadata/workflow", json=list(definitions))
        assert r.status_code < 300, r.text

    def taskdefs(self, *definitions: dict[str, Any]) -> None:
        r = self.http.post("/api/metadata/taskdefs", json=list(definitions))
        assert r.status_code < 300, r.text

    def one_task_workflow(self, prefix: str, **taskdef: Any) -> tuple[str, str]:
        """Register a task type (its definition ``taskdef``) and a workflow (version 1)
        of one SIMPLE task of it, ref ``t``, both named uniquely from ``prefix``; the
        type and the workflow's name."""
        task_type, name = unique(f"{prefix}_task"), unique(f"{prefix}_flow")
        self.taskdefs({"name": task_type, **taskdef})
        self.register(
            {
                "name": name,
                "version": 1,
                "tasks": [{"name": task_type, "taskReferenceName": "t", "type": "SIMPLE"}],
            }
        )
        return task_type, name

    # --- runs -------------------------------------------------------------------------

    def start(
        self,
        name: str,
        input: dict[str, Any] | None = None,
        *,
        version: int | None = None,
        correlation_id: str | None = None,
        task_to_domain: dict[str, str] | None = None,
        workflow_def: dict[str, Any] | None = None,
    ) -> str:
        """``POST /workflow`` with a StartWorkflowRequest; the workflow id (text)."""
        body: dict[str, Any] = {"name": name, "input": input or {}}
        if version is not None:
            body["version"] = version
        if correlation_id is not None:
            body["correlationId"] = correlation_id
        if task_to_domain is not None:
            body["taskToDomain"] = task_to_domain
        if workflow_def is not None:
            body["workflowDef"] = workflow_def
        r = self.http.post("/api/workflow", json=body)
        assert r.status_code == 200, r.text
        return r.text

    def run(self, workflow_id: str) -> dict[str, Any]:
        r = self.http.get(f"/api/workflow/{workflow_id}", params={"includeTasks": True})
        assert r.status_code == 200, r.text
        run: dict[str, Any] = r.json()
        return run

    def wait(
        self,
        workflow_id: str,
        until: Callable[[dict[str, Any]], bool],
        seconds: float = SETTLE_SECONDS,
    ) -> dict[str, Any]:
        """The run once ``until(run)`` holds, or once it ended without it holding, or the
        last state read after ``seconds``: the test's assertions then say what differs."""
        deadline = time.monotonic() + seconds
        while True:
            run = self.run(workflow_id)
            if until(run) or run["status"] in ENDED or time.monotonic() > deadline:
                return run
            time.sleep(0.05)

    def wait_tasks(self, workflow_id: str, count: int, **kw: Any) -> dict[str, Any]:
        """The run once it has at least ``count`` tasks."""
        return self.wait(workflow_id, lambda run: len(run["tasks"]) >= count, **kw)

    def wait_status(self, workflow_id: str, status: str, **kw: Any) -> dict[str, Any]:
        return self.wait(workflow_id, lambda run: run["status"] == status, **kw)

    def wait_task(self, workflow_id: str, ref: str, status: str, **kw: Any) -> dict[str, Any]:
        """The run once the latest task ``ref`` has ``status``."""

        def reached(run: dict[str, Any]) -> bool:
            found = [t for t in run["tasks"] if t["referenceTaskName"] == ref]
            return bool(found) and found[-1]["status"] == status

        return self.wait(workflow_id, reached, **kw)

    def task_output(self, task_id: str) -> dict[str, Any]:
        """``GET /tasks/{taskId}``'s output, read from the payload store through
        ``/tasks/external-storage-location`` when it is offloaded
        (``externalOutputPayloadStoragePath``), as a Conductor client reads it."""
        r = self.http.get(f"/api/tasks/{task_id}")
        assert r.status_code == 200, r.text
        body = r.json()
        path = body.get("externalOutputPayloadStoragePath")
        if not path:
            output: dict[str, Any] = body["outputData"]
            return output
        location = self.http.get(
            "/api/tasks/external-storage-location",
            params={"path": path, "operation": "READ", "payloadType": "TASK_OUTPUT"},
        )
        assert location.status_code == 200, location.text
        stored: dict[str, Any] = httpx.get(location.json()["uri"]).json()
        return stored

    # --- workers ----------------------------------------------------------------------

    def poll(
        self,
        task_type: str,
        worker: str = "worker",
        *,
        domain: str | None = None,
        seconds: float = SETTLE_SECONDS,
    ) -> dict[str, Any] | None:
        """Long-poll one task of ``task_type``; None when none came within ``seconds``."""
        self.workers.add(worker)
        params: dict[str, Any] = {"workerid": worker, "count": 1, "timeout": 500}
        if domain is not None:
            params["domain"] = domain
        deadline = time.monotonic() + seconds
        while True:
            r = self.http.get(f"/api/tasks/poll/batch/{task_type}", params=params)
            assert r.status_code == 200, r.text
            polled = r.json()
            if polled:
                found: dict[str, Any] = polled[0]
                return found
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)

    def poll_one(self, task_type: str, worker: str = "worker", **kw: Any) -> dict[str, Any]:
        found = self.poll(task_type, worker, **kw)
        assert found is not None, f"no {task_type!r} task was handed out"
        return found

    def update(
        self,
        polled: dict[str, Any],
        status: str,
        output: dict[str, Any] | None = None,
        *,
        reason: str | None = None,
        worker: str | None = None,
        **extra: Any,
    ) -> httpx.Response:
        body: dict[str, Any] = {
            "workflowInstanceId": polled["workflowInstanceId"],
            "taskId": polled["taskId"],
            "status": status,
            "outputData": output or {},
            **extra,
        }
        if reason is not None:
            body["reasonForIncompletion"] = reason
        if worker is not None:
            body["workerId"] = worker
        return self.http.post("/api/tasks", json=body)

    def complete(
        self, polled: dict[str, Any], output: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        r = self.update(polled, "COMPLETED", output, **kw)
        assert r.status_code == 200, r.text

    def fail(self, polled: dict[str, Any], reason: str, *, terminal: bool = False) -> None:
        status = "FAILED_WITH_TERMINAL_ERROR" if terminal else "FAILED"
        r = self.update(polled, status, reason=reason)
        assert r.status_code == 200, r.text

    def poll_and_complete(
        self,
        task_type: str,
        output: dict[str, Any] | None = None,
        worker: str = "worker",
        **kw: Any,
    ) -> dict[str, Any]:
        """Poll one task, answer COMPLETED with ``output``; the polled task."""
        polled = self.poll_one(task_type, worker, **kw)
        self.complete(polled, output)
        return polled

    def poll_and_fail(
        self, task_type: str, reason: str, worker: str = "worker", **kw: Any
    ) -> dict[str, Any]:
        polled = self.poll_one(task_type, worker, **kw)
        self.fail(polled, reason)
        return polled
