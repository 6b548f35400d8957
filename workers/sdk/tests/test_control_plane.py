"""The SDK against the real control plane (``control_plane.api.app.create_app``) served by
uvicorn over real HTTP, with token auth, the SQLite queue and run store and the local
payload store. The test plays the engine's part: it writes the task row SCHEDULED and
sends the queue message, as the dispatch activity does."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("control_plane.api.app")
pytest.importorskip("uvicorn")

import uvicorn
from stepway_worker import (
    InProgress,
    Registry,
    StaticToken,
    TaskContext,
    Worker,
    WorkerSettings,
    task_log,
    worker_task,
)

from control_plane.api.app import create_app
from control_plane.cli.http_server import uvicorn_config
from control_plane.deps import Deps, Settings
from engine.adapters.payload_local import LocalPayloadStore
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_signals_recording import RecordingRunSignals
from engine.adapters.run_store_sql import SqlRunStore
from engine.ports.payload_store import PayloadLimits
from engine.ports.run_store import NewRun, TaskRecord, TaskStatus

ADMIN = "admin-token-0123456789"
WORKER = "worker-token-0123456789"
TYPES = ["cp_echo", "cp_big", "cp_chunked", "cp_slow", "cp_huge"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControlPlane:
    """uvicorn + create_app on a fixed port over files in ``root``: restartable."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        tokens = root / "tokens.json"
        tokens.write_text(
            json.dumps(
                {
                    "tokens": [
                        {"token": ADMIN, "name": "admin", "roles": ["admin", "operator"]},
                        {"token": WORKER, "name": "w", "roles": ["worker"], "taskTypes": TYPES},
                    ]
                }
            )
        )
        self.settings = Settings(auth_mode="tokens", tokens_file=tokens)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.deps: Deps | None = None

    def start(self) -> None:
        self.signals = RecordingRunSignals()
        self.deps = Deps(
            run_store=SqlRunStore(f"sqlite:///{self.root}/runs.db"),
            queue=SqliteTaskQueue(self.root / "queues.db"),
            provisioner=SqliteQueueProvisioner(self.root / "queues.db"),
            payloads=LocalPayloadStore(
                self.root / "payloads",
                secret="test-secret-0123456789",
                base_url=self.url,
                limits=PayloadLimits(task_output_threshold=1024, max_size=500_000),
            ),
            signals=self.signals,
        )
        self._app = create_app(self.settings, self.deps)
        # as stepway serve and stepway dev configure uvicorn
        config = uvicorn_config(self._app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started:
            assert time.time() < deadline, "control plane did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
            self._app.close()
            self._server = None
        if self.deps is not None:
            self.deps.run_store.close()
            self.deps.queue.close()
            self.deps = None

    def admin(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
        )

    def dispatch(self, task_type: str, input_data: dict[str, Any]) -> str:
        """Write the row SCHEDULED and send the message (as the engine's dispatch activity does)."""
        assert self.deps is not None
        workflow_id, task_id = str(uuid.uuid4()), str(uuid.uuid4())
        now = int(time.time() * 1000)
        self.deps.run_store.create_run(
            NewRun(workflow_id=workflow_id, name="wf", version=1, create_time=now)
        )
        self.deps.run_store.upsert_task(
            TaskRecord(
                task_id=task_id,
                workflow_id=workflow_id,
                reference_task_name="t1",
                task_type="WORKER",
                task_def_name=task_type,
                status=TaskStatus.SCHEDULED,
                attempt=1,
                retry_count=0,
                input_data=input_data,
                scheduled_time=now,
                queue_name=task_type,
            ),
            now,
        )
        self.deps.queue.send(
            task_type,
            {
                "taskId": task_id,
                "workflowId": workflow_id,
                "taskRef": "t1",
                "taskType": task_type,
                "attempt": 1,
                "input": input_data,
                "priority": 0,
            },
            message_id=f"{task_id}:1",
        )
        return task_id

    def task(self, task_id: str) -> dict[str, Any]:
        with self.admin() as c:
            r = c.get(f"/api/tasks/{task_id}")
            assert r.status_code == 200, r.text
            return dict(r.json())

    def wait_status(self, task_id: str, status: str, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = self.task(task_id)
            if task["status"] == status:
                return task
            assert time.monotonic() < deadline, f"task is {task['status']}, not {status}"
            time.sleep(0.05)

    def logs(self, task_id: str) -> list[str]:
        with self.admin() as c:
            return [e["log"] for e in c.get(f"/api/tasks/{task_id}/log").json()]


@pytest.fixture
def cp(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path)
    plane.start()
    with plane.admin() as c:
        r = c.post(
            "/api/metadata/taskdefs",
            json=[{"name": t, "responseTimeoutSeconds": 60, "retryCount": 1} for t in TYPES],
        )
        assert r.status_code == 200, r.text
    yield plane
    plane.stop()


@pytest.fixture
def handlers() -> Registry:
    reg = Registry()
    gate = threading.Event()
    reg.gate = gate  # type: ignore[attr-defined]

    @worker_task("cp_echo", registry=reg)
    def echo(value: int) -> dict[str, int]:
        task_log(f"echo {value}")
        return {"value": value}

    @worker_task("cp_big", registry=reg)
    def big(n: int) -> dict[str, Any]:
        return {"rows": [f"row-{i:05d}" for i in range(n)]}

    @worker_task("cp_chunked", registry=reg)
    def chunked(ctx: TaskContext, total: int) -> Any:
        cursor = int(ctx.previous_output.get("cursor", 0)) + 1
        if cursor < total:
            return InProgress(callback_after_seconds=1, output={"cursor": cursor})
        return {"done": cursor, "resumedFrom": ctx.previous_output.get("cursor")}

    @worker_task("cp_huge", registry=reg)
    def huge(n: int) -> dict[str, Any]:
        return {"blob": "x" * n}

    @worker_task("cp_slow", registry=reg)
    def slow() -> dict[str, str]:
        gate.wait(10)
        return {"state": "done"}

    return reg


def _worker(cp: ControlPlane, reg: Registry, **changes: Any) -> Worker:
    settings = WorkerSettings(
        server_url=cp.url,
        worker_id="cp-worker",
        long_poll_ms=200,
        poll_interval=0.05,
        retry_initial=0.05,
        retry_max=0.3,
        **{"shutdown_grace": 5, "payload_threshold": 2048, **changes},
    )
    return Worker(reg, settings=settings, tokens=StaticToken(WORKER))


def test_complete_log_validate_and_offload_against_the_control_plane(
    cp: ControlPlane, handlers: Registry
) -> None:
    with _worker(cp, handlers):
        ok = cp.dispatch("cp_echo", {"value": 7})
        bad = cp.dispatch("cp_echo", {"value": "seven"})
        big = cp.dispatch("cp_big", {"n": 2000})
        done = cp.wait_status(ok, "COMPLETED")
        assert done["outputData"] == {"value": 7} and done["workerId"] == "cp-worker"
        assert cp.logs(ok) == ["echo 7"]
        failed = cp.wait_status(bad, "FAILED_WITH_TERMINAL_ERROR")
        assert "value: Input should be a valid integer" in failed["reasonForIncompletion"]
        offloaded = cp.wait_status(big, "COMPLETED")
        assert offloaded["externalOutputPayloadStoragePath"].startswith("payloads/uploads/cp_big/")
        assert cp.deps is not None
        stored = json.loads(cp.deps.payloads.get(offloaded["externalOutputPayloadStoragePath"]))  # type: ignore[union-attr]
        assert stored["rows"][1999] == "row-01999"
        events = [e.name for e in cp.signals.events()]
        # one event per result; a hand-out raises none
        assert events.count(ok) == 1 and f"{ok}.started" not in events


def test_in_progress_callback_resumes_with_the_previous_output(
    cp: ControlPlane, handlers: Registry
) -> None:
    with _worker(cp, handlers):
        task_id = cp.dispatch("cp_chunked", {"total": 3})
        done = cp.wait_status(task_id, "COMPLETED")
    assert done["outputData"] == {"done": 3, "resumedFrom": 2}


def test_result_survives_a_control_plane_restart(cp: ControlPlane, handlers: Registry) -> None:
    w = _worker(cp, handlers).start()
    try:
        task_id = cp.dispatch("cp_slow", {})
        cp.wait_status(task_id, "IN_PROGRESS")
        cp.stop()  # the Task API goes down with the task in flight
        handlers.gate.set()  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while not len(w.outbox) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(w.outbox) == 1
        time.sleep(1.0)
        cp.start()  # same port, same stores
        done = cp.wait_status(task_id, "COMPLETED")
        assert done["outputData"] == {"state": "done"}
    finally:
        w.stop(grace=3)


@pytest.mark.parametrize("inline", [False, True], ids=["uploaded", "inline"])
def test_an_oversized_output_fails_its_task_with_the_size_in_the_reason(
    cp: ControlPlane, handlers: Registry, inline: bool
) -> None:
    """Above the payload store's maximum of 500,000 bytes: refused by the upload (PUT
    413) or, posted inline (a worker threshold above the output), by the result post."""
    n = 600_000
    size = len(json.dumps({"blob": "x" * n}, separators=(",", ":")))
    changes: dict[str, Any] = {"payload_threshold": 10_000_000} if inline else {}
    with _worker(cp, handlers, **changes):
        task_id = cp.dispatch("cp_huge", {"n": n})
        failed = cp.wait_status(task_id, "FAILED_WITH_TERMINAL_ERROR")
    reason = failed["reasonForIncompletion"]
    assert f"outputData is {size} bytes" in reason, reason
    assert "500000" in reason, reason  # the server's limit, from its 413
    assert failed["outputData"] == {}
    events = [e for e in cp.signals.events() if e.name == task_id]
    assert [e.data["status"] for e in events] == ["FAILED_WITH_TERMINAL_ERROR"]


def test_a_busy_worker_takes_its_next_task_with_the_result(
    cp: ControlPlane, handlers: Registry
) -> None:
    """Three queued tasks, one handler thread: the first is polled, the others come with
    the results of the ones before (update-v2), each executed and its result accepted."""
    assert cp.deps is not None
    ids = [cp.dispatch("cp_echo", {"value": i}) for i in range(3)]
    w = _worker(cp, handlers)
    with w:
        for i, task_id in enumerate(ids):
            done = cp.wait_status(task_id, "COMPLETED")
            assert done["outputData"] == {"value": i} and done["workerId"] == "cp-worker"
    (runner,) = [r for r in w.runners if r.settings.task_type == "cp_echo"]
    assert runner.handed_with_result == 2
    assert [e.name for e in cp.signals.events() if e.name in ids] == ids
    for task_id in ids:
        lease = cp.deps.run_store.get_lease(task_id, 1)
        assert lease is not None and lease.worker_id == "token:w" and lease.released


def test_a_task_taken_with_a_result_and_abandoned_at_stop_is_left_to_time_out(
    cp: ControlPlane,
) -> None:
    """The worker stops while the task that update-v2 handed out is still running: the
    task stays leased to the worker (IN_PROGRESS, message deferred), so that its
    response timeout hands it out again; it is neither completed nor dropped."""
    assert cp.deps is not None
    reg = Registry()
    release = threading.Event()

    @worker_task("cp_slow", registry=reg)
    def slow(n: int) -> dict[str, int]:
        if n == 2:
            release.wait(10)
        return {"n": n}

    first = cp.dispatch("cp_slow", {"n": 1})
    second = cp.dispatch("cp_slow", {"n": 2})
    w = _worker(cp, reg).start()
    try:
        cp.wait_status(first, "COMPLETED")
        cp.wait_status(second, "IN_PROGRESS")
        (runner,) = w.runners
        assert runner.handed_with_result == 1  # the second came with the first's result
        assert w.stop(grace=0.3) is False  # its handler is still running
        row = cp.deps.run_store.get_task(second)
        lease = cp.deps.run_store.get_lease(second, 1)
        assert row is not None and row.status == TaskStatus.IN_PROGRESS
        assert lease is not None and lease.worker_id == "token:w" and not lease.released
        assert lease.expires_at > int(time.time() * 1000)  # its 60 s response timeout
        assert cp.deps.queue.depth("cp_slow").deferred == 1
        assert second not in [e.name for e in cp.signals.events()]
    finally:
        release.set()
