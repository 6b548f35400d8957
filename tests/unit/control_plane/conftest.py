"""Fixtures: the control plane served by uvicorn on a free port, over real HTTP."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from control_plane.api.app import StepwayApp, create_app
from control_plane.cli.http_server import uvicorn_config
from control_plane.deps import Deps, Settings
from engine.adapters.payload_local import LocalPayloadStore
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_signals_recording import RecordingRunSignals
from engine.adapters.run_store_sql import SqlRunStore
from engine.ports.payload_store import PayloadLimits, PayloadStore
from engine.ports.run_store import NewRun, TaskRecord, TaskStatus
from protocol.messages import TaskMessage, message_id
from protocol.queues import queue_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    deps: Deps
    signals: RecordingRunSignals
    settings: Settings
    client: httpx.Client
    app: StepwayApp

    # --- helpers that play the engine's part --------------------------------------------

    def register(self, *taskdefs: dict[str, Any]) -> None:
        r = self.client.post("/api/metadata/taskdefs", json=list(taskdefs))
        assert r.status_code == 200, r.text

    def run(self, workflow_id: str | None = None, name: str = "wf") -> str:
        workflow_id = workflow_id or str(uuid.uuid4())
        self.deps.run_store.create_run(
            NewRun(workflow_id=workflow_id, name=name, version=1, create_time=self.deps.clock())
        )
        return workflow_id

    def dispatch(
        self,
        task_type: str,
        *,
        workflow_id: str | None = None,
        task_id: str | None = None,
        attempt: int = 1,
        input: Any = None,
        priority: int = 0,
        domain: str | None = None,
        ref: str = "t1",
    ) -> str:
        """Write the row SCHEDULED and send the message, as the engine's dispatch activity does."""
        workflow_id = workflow_id or self.run()
        task_id = task_id or str(uuid.uuid4())
        queue, _ = queue_for(task_type, priority, {task_type: domain} if domain else {})
        now = self.deps.clock()
        self.deps.run_store.upsert_task(
            TaskRecord(
                task_id=task_id,
                workflow_id=workflow_id,
                reference_task_name=ref,
                task_type="WORKER",
                task_def_name=task_type,
                status=TaskStatus.SCHEDULED,
                attempt=attempt,
                retry_count=attempt - 1,
                input_data=input if input is not None else {"n": 1},
                scheduled_time=now,
                domain=domain,
                queue_name=queue,
            ),
            now,
        )
        message = TaskMessage(
            task_id=task_id,
            workflow_id=workflow_id,
            workflow_type="wf",
            correlation_id="c1",
            task_ref=ref,
            task_type=task_type,
            attempt=attempt,
            input=input if input is not None else {"n": 1},
            priority=priority,
            domain=domain,
        )
        self.deps.queue.send(queue, message.body(), message_id=message_id(task_id, attempt))
        return task_id


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    started: list[tuple[uvicorn.Server, threading.Thread, httpx.Client, Deps, StepwayApp]] = []

    def make(
        *,
        fast_path: bool = True,
        clock: Callable[[], int] | None = None,
        local_adapters: bool = True,
        run_store: SqlRunStore | None = None,
        busy_timeout_seconds: float | None = None,
        payloads: PayloadStore | None = None,
        **overrides: Any,
    ) -> Server:
        """A server with these settings; ``fast_path=False`` serves the hot Task API
        routes through FastAPI too, ``clock`` replaces the wall clock of the API,
        ``local_adapters=False`` runs every storage call of the Task API in a thread as on
        PostgreSQL and Service Bus (``Deps.local_adapters``; its SQLite files and local
        payload directory and its recorded signals are local, as ``stepway serve`` would find).
        ``run_store`` replaces the SQLite run store (closed at the end);
        ``busy_timeout_seconds`` is how long the SQLite run store and queue wait for a
        lock another connection holds; ``payloads`` replaces the local payload store."""
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        n = len(started)
        overrides.setdefault("limit_requeue_delay_seconds", 0.3)
        overrides.setdefault("settle_seconds", 0)  # no engine here acts on the signals
        settings = Settings(**overrides)
        signals = RecordingRunSignals()
        store_url = f"sqlite:///{tmp_path}/runs{n}.db"
        queue_wait: dict[str, float] = {}
        if busy_timeout_seconds is not None:
            store_url += f"?timeout={busy_timeout_seconds}"
            queue_wait["busy_timeout_seconds"] = busy_timeout_seconds
        deps = Deps(
            run_store=run_store or SqlRunStore(store_url),
            queue=SqliteTaskQueue(tmp_path / f"queues{n}.db", **queue_wait),
            provisioner=SqliteQueueProvisioner(tmp_path / f"queues{n}.db"),
            payloads=payloads
            or LocalPayloadStore(
                tmp_path / f"payloads{n}",
                secret="test-secret-0123456789",
                base_url=url,
                limits=PayloadLimits(task_output_threshold=1024, max_size=200_000),
            ),
            signals=signals,
            local_adapters=local_adapters,
        )
        if clock is not None:
            deps.clock = clock
        app = create_app(settings, deps, fast_path=fast_path)
        # as stepway serve and stepway dev configure uvicorn
        config = uvicorn_config(app, host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.time() + 10
        while not server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.01)
        client = httpx.Client(base_url=url, timeout=30)
        started.append((server, thread, client, deps, app))
        return Server(url, deps, signals, settings, client, app)

    yield make
    for server, thread, client, deps, app in started:
        client.close()
        server.should_exit = True
        thread.join(timeout=10)
        app.close()
        deps.run_store.close()
        deps.queue.close()


@pytest.fixture
def srv(make_server: Any, request: pytest.FixtureRequest) -> Server:
    s: Server = make_server(local_adapters=getattr(request, "param", True))
    return s


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked ``both_storage_modes`` runs each test taking ``srv`` twice: the
    Task API's storage calls on its event loop (local adapters) and in threads."""
    if "srv" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_storage_modes"
    ):
        metafunc.parametrize("srv", [True, False], ids=["event-loop", "threads"], indirect=True)


def taskdef(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "responseTimeoutSeconds": 60, "retryCount": 1, **fields}


def assert_error(r: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert set(body) >= {"status", "message", "instance", "retryable", "validationErrors"}, body
    assert body["status"] == status
    if field is not None:
        paths = [e["path"] for e in body["validationErrors"]]
        assert any(field in p for p in paths) or field in body["message"], body
    return body
