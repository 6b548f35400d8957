"""A small in-process fake of the Task API over real HTTP, for worker tests.

It speaks the contract of the control plane's Task API (batch poll with a long-poll
timeout, ``POST /api/tasks``, ``POST /api/tasks/update-v2`` (the result, then the
next task of the type for the poster's worker id, waiting up to 100 ms, or 204),
``POST /api/tasks/{id}/log``, the external storage
location and a PUT upload URL, ``GET /api/tasks/{id}``) and records every call. An
IN_PROGRESS result with ``callbackAfterSeconds`` above 0 puts the task back on its queue after
that delay with the posted output as ``outputData``, like the Task API. A result for a
task not handed out to the poster's worker id is refused with 409.

    with FakeTaskServer() as server:
        task_id = server.enqueue("parse_pdf", {"url": "..."})
        ...
        result = server.wait_result(task_id)
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class PollRecord:
    task_type: str
    count: int
    timeout_ms: int
    worker_id: str | None
    domain: str | None
    returned: int
    #: time.time() when the poll arrived and when it was answered
    started: float
    at: float


@dataclass
class _State:
    queues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: taskId -> worker id it was handed out to
    leases: dict[str, str] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)
    uploads: dict[str, bytes] = field(default_factory=dict)
    polls: list[PollRecord] = field(default_factory=list)
    #: the hand-outs of update-v2 posts (not in ``polls``)
    next_tasks: list[PollRecord] = field(default_factory=list)
    auth_headers: list[str | None] = field(default_factory=list)
    #: status codes to answer the next result posts with, in order
    result_failures: list[int] = field(default_factory=list)
    #: taskId -> the ``traceparent`` header of its accepted result post
    result_traceparents: dict[str, str | None] = field(default_factory=dict)


class FakeTaskServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ):
        """``ssl_context``: serve HTTPS with it (a server-side context holding the
        certificate)."""
        self.host = host
        self.port = port
        self.token = token
        self.ssl_context = ssl_context
        #: TCP connections accepted so far (a client that keeps its connections alive
        #: opens few)
        self.connections_opened = 0
        self.state = _State()
        self.cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self) -> FakeTaskServer:
        server = ThreadingHTTPServer((self.host, self.port), self._handler_class())
        server.daemon_threads = True
        if self.ssl_context is not None:
            server.socket = self.ssl_context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (state is kept: ``start`` again on the same port)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self.cond:  # a stopped server also drops its keep-alive connections
            connections, self._connections = self._connections, set()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        with self.cond:
            self.cond.notify_all()

    def __enter__(self) -> FakeTaskServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- test helpers ----------------------------------------------------------------

    def enqueue(
        self,
        task_type: str,
        input_data: dict[str, Any] | None = None,
        *,
        task_id: str | None = None,
        domain: str | None = None,
        workflow_id: str = "wf-1",
        output_data: dict[str, Any] | None = None,
        traceparent: str | None = None,
    ) -> str:
        task_id = task_id or uuid.uuid4().hex
        task = {
            "taskId": task_id,
            "taskType": task_type,
            "taskDefName": task_type,
            "status": "SCHEDULED",
            "inputData": input_data or {},
            "outputData": output_data or {},
            "referenceTaskName": f"{task_type}_ref",
            "workflowInstanceId": workflow_id,
            "attempt": 1,
            "retryCount": 0,
            "pollCount": 0,
            "callbackAfterSeconds": 0,
            "domain": domain,
        }
        if traceparent:
            task["traceparent"] = traceparent  # as the Task API hands it on
        queue = f"{domain}-{task_type}" if domain else task_type
        with self.cond:
            self.state.tasks[task_id] = task
            self.state.queues.setdefault(queue, []).append(task)
            self.cond.notify_all()
        return task_id

    def results_for(self, task_id: str) -> list[dict[str, Any]]:
        with self.cond:
            return [r for r in self.state.results if r.get("taskId") == task_id]

    def wait_result(
        self, task_id: str, *, status: str | None = None, timeout: float = 10.0
    ) -> dict[str, Any]:
        """The first accepted result of the task (with ``status`` if given)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for r in self.state.results:
                    if r.get("taskId") == task_id and (status is None or r["status"] == status):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no result for task {task_id} in {timeout} s")
                self.cond.wait(left)

    def result_traceparent(self, task_id: str) -> str | None:
        """The ``traceparent`` header the accepted result of the task was posted with."""
        with self.cond:
            return self.state.result_traceparents.get(task_id)

    def logs(self, task_id: str) -> list[str]:
        with self.cond:
            return list(self.state.logs.get(task_id, []))

    def polls(self, task_type: str | None = None) -> list[PollRecord]:
        with self.cond:
            return [p for p in self.state.polls if task_type in (None, p.task_type)]

    def next_tasks(self, task_type: str | None = None) -> list[PollRecord]:
        """The update-v2 posts of the task type, with the tasks they handed out."""
        with self.cond:
            return [p for p in self.state.next_tasks if task_type in (None, p.task_type)]

    def fail_next_results(self, *statuses: int) -> None:
        with self.cond:
            self.state.result_failures.extend(statuses)

    def upload(self, path: str) -> bytes:
        with self.cond:
            return self.state.uploads[path]

    # --- the HTTP side ---------------------------------------------------------------

    def _poll(
        self,
        task_type: str,
        count: int,
        timeout_ms: int,
        worker_id: str | None,
        domain: str | None,
        *,
        record: str = "polls",
    ) -> list[dict[str, Any]]:
        queue = f"{domain}-{task_type}" if domain else task_type
        deadline = time.monotonic() + timeout_ms / 1000.0
        started = time.time()
        with self.cond:
            while True:
                now = time.time()
                ready = [
                    t for t in self.state.queues.get(queue, []) if t.get("_visible_at", 0) <= now
                ]
                left = deadline - time.monotonic()
                if ready or left <= 0 or self._server is None:
                    break
                self.cond.wait(min(left, 0.05))
            taken = ready[:count]
            for t in taken:
                self.state.queues[queue].remove(t)
                t["status"] = "IN_PROGRESS"
                t["pollCount"] += 1
                t["workerId"] = worker_id
                self.state.leases[t["taskId"]] = worker_id or ""
            getattr(self.state, record).append(
                PollRecord(
                    task_type, count, timeout_ms, worker_id, domain, len(taken), started, now
                )
            )
            return [{k: v for k, v in t.items() if not k.startswith("_")} for t in taken]

    def _result(self, body: dict[str, Any], traceparent: str | None = None) -> tuple[int, str]:
        with self.cond:
            if self.state.result_failures:
                return self.state.result_failures.pop(0), "injected failure"
            task = self.state.tasks.get(body.get("taskId", ""))
            if task is None:
                return 404, "task not found"
            if task["status"] in ("COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR"):
                return 409, f"task is already {task['status']}"
            unpolled = task["status"] == "SCHEDULED" and task["taskId"] not in self.state.leases
            if not unpolled and self.state.leases.get(task["taskId"]) != body.get("workerId"):
                return 409, "the task was not handed out to this worker"
            for entry in body.get("logs") or []:
                line = entry if isinstance(entry, str) else entry.get("log", "")
                self.state.logs.setdefault(task["taskId"], []).append(line)
            path = body.get("externalOutputPayloadStoragePath")
            if path and path not in self.state.uploads:
                return 400, f"no payload at {path}"
            self.state.results.append(body)
            self.state.result_traceparents[task["taskId"]] = traceparent
            task["status"] = body["status"]
            task["outputData"] = body.get("outputData") or {}
            if body["status"] == "IN_PROGRESS" and int(body.get("callbackAfterSeconds") or 0) > 0:
                delay = int(body.get("callbackAfterSeconds") or 0)
                task["_visible_at"] = time.time() + delay
                task["status"] = "SCHEDULED"
                self.state.leases.pop(task["taskId"], None)
                queue = (
                    f"{task['domain']}-{task['taskType']}"
                    if task.get("domain")
                    else (task["taskType"])
                )
                self.state.queues.setdefault(queue, []).append(task)
            self.cond.notify_all()
            return 200, task["taskId"]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def setup(self) -> None:
                super().setup()
                with fake.cond:
                    fake._connections.add(self.connection)
                    fake.connections_opened += 1

            def finish(self) -> None:
                with fake.cond:
                    fake._connections.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def _send(self, status: int, body: Any, content_type: str = "application/json"):
                data = (
                    body
                    if isinstance(body, bytes)
                    else (
                        json.dumps(body).encode()
                        if content_type == "application/json"
                        else str(body).encode()
                    )
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _authorized(self) -> bool:
                header = self.headers.get("Authorization")
                with fake.cond:
                    fake.state.auth_headers.append(header)
                if fake.token is not None and header != f"Bearer {fake.token}":
                    self._send(401, {"message": "a valid bearer token is required"})
                    return False
                return True

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                q = {k: v[0] for k, v in parse_qs(parts.query).items()}
                path = parts.path
                if not self._authorized():
                    return
                if path.startswith("/api/tasks/poll/batch/"):
                    tasks = fake._poll(
                        unquote(path.rsplit("/", 1)[1]),
                        int(q.get("count", 1)),
                        min(int(q.get("timeout", 100)), 5000),
                        q.get("workerid"),
                        q.get("domain"),
                    )
                    self._send(200, tasks)
                elif path == "/api/tasks/external-storage-location":
                    name = q.get("path") or uuid.uuid4().hex
                    ref = f"uploads/{q.get('taskType', 'any')}/{name}"
                    self._send(200, {"uri": f"{fake.url}/upload/{ref}?sig=x", "path": ref})
                elif path.startswith("/api/tasks/"):
                    task_id = unquote(path.rsplit("/", 1)[1])
                    with fake.cond:
                        task = fake.state.tasks.get(task_id)
                        out = {k: v for k, v in (task or {}).items() if not k.startswith("_")}
                    self._send(200 if task else 404, out or {"message": "not found"})
                else:
                    self._send(404, {"message": "not found"})

            def do_PUT(self) -> None:
                parts = urlsplit(self.path)
                if not parts.path.startswith("/upload/"):
                    self._send(404, {"message": "not found"})
                    return
                data = self._body()
                with fake.cond:
                    fake.state.uploads[unquote(parts.path[len("/upload/") :])] = data
                self._send(201, b"", "text/plain")

            def do_POST(self) -> None:
                path = urlsplit(self.path).path
                raw = self._body()
                if not self._authorized():
                    return
                if path in ("/api/tasks", "/api/tasks/update-v2"):
                    body = json.loads(raw)
                    status, text = fake._result(body, self.headers.get("traceparent"))
                    if status != 200:
                        self._send(status, {"status": status, "message": text})
                    elif path == "/api/tasks":
                        self._send(200, text, "text/plain")
                    else:
                        with fake.cond:
                            task = fake.state.tasks[text]
                        tasks = fake._poll(
                            task["taskType"],
                            1,
                            100,
                            body.get("workerId"),
                            task.get("domain"),
                            record="next_tasks",
                        )
                        if tasks:
                            self._send(200, tasks[0])
                        else:
                            self.send_response(204)
                            self.end_headers()
                elif path.startswith("/api/tasks/") and path.endswith("/log"):
                    task_id = unquote(path.split("/")[3])
                    try:
                        line = json.loads(raw)
                    except ValueError:
                        line = raw.decode()
                    with fake.cond:
                        fake.state.logs.setdefault(task_id, []).append(str(line))
                    self._send(200, b"", "text/plain")
                else:
                    self._send(404, {"message": "not found"})

        return Handler
