"""Stepway as the bench drives it. Every import of Stepway's own code is in this module,
so that a change of layout moves only these lines.

* :class:`StepwayDev`: the platform of ``stepway dev`` in this process (embedded
  backend, one engine worker, SQLite run store and queues) with the control plane served
  by uvicorn on a free loopback port. Definitions are registered and runs started over
  real HTTP; the bench waits for a run's end and reads its history through the durable
  backend's client, as the control plane itself would.
* :class:`TaskApiOnly`: the control plane alone over the embedded run store and queues,
  no engine: task rows and queue messages are written as the engine's dispatch activity
  writes them, and the results the Task API accepts are counted instead of being raised
  on runs. It measures the Task API's hand-offs (poll + accepted result) alone.
* :func:`embedded_backend`: the embedded durable backend, for the hand-written
  durabletask floor.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from bench.common import free_port
from control_plane.api.app import create_app
from control_plane.cli.dev import DevPlatform
from control_plane.cli.http_server import uvicorn_config
from control_plane.deps import Deps, Settings
from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_store_sql import SqlRunStore
from engine.app.config import EnvReader, read_gc_tuning, read_orchestration_sessions
from engine.app.garbage_collection import settle_heap
from engine.language.definitions import RunStatus, TaskStatus, TaskType
from engine.ports.run_store import NewRun, TaskRecord
from protocol.messages import TaskMessage, message_id

__all__ = ["StepwayDev", "TaskApiOnly", "backend_client", "embedded_backend", "trace_points"]


def embedded_backend() -> EmbeddedBackend:
    """A started embedded durable backend (stop it with ``.stop()``)."""
    backend = EmbeddedBackend()
    backend.start()
    return backend


def backend_client(address: str) -> Any:
    """A durable backend client (durabletask's ``TaskHubGrpcClient``) for ``address``."""
    return make_client(BackendConfig.embedded(address))


def wait_runs_ended(runs_db: Path, workflow_ids: list[str], timeout: float = 600) -> None:
    """Blocks until every run of ``workflow_ids`` has a terminal status in the SQLite run
    store ``runs_db``: the end a client of the workflow API sees. Reads one run's status
    at a time, in the order given, every 5 ms while it is running (as the DBOS cells poll
    their results), over a read-only connection of its own with one prepared query: the
    waiting is the benchmark's, not the platform's, and must not take the platform's
    CPU or GIL (a full ``get_run`` every 2 ms, its JSON columns decoded, was 15 % of the
    samples py-spy took of the platform's process over the drain, docs/benchmarks.md)."""
    deadline = time.monotonic() + timeout
    con = sqlite3.connect(f"file:{runs_db}?mode=ro", uri=True)
    try:
        for workflow_id in workflow_ids:
            while True:
                # the runs table of engine/adapters/run_store_sql.py
                row = con.execute(
                    "SELECT status FROM runs WHERE workflow_id = ?", (workflow_id,)
                ).fetchone()
                if row is not None and row[0] not in _RUNNING:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"run {workflow_id} did not end in {timeout:g} s")
                time.sleep(0.005)
    finally:
        con.close()


#: the statuses of a run that has not ended (engine/language/definitions.py, RunStatus)
_RUNNING = frozenset(s.value for s in RunStatus if not s.is_terminal)


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Served:
    """An ASGI app on uvicorn in a thread, on a free loopback port."""

    def __init__(self, app: Any, *, http: str, loop: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn_config(  # as stepway dev's
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="critical",  # its shutdown cancels open long polls, noisily
            access_log=False,
            http=http,  # type: ignore[arg-type]
            loop=loop,  # type: ignore[arg-type]
            backlog=4096,
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the control plane did not start")
            time.sleep(0.02)
        self.http = httpx.Client(base_url=self.url, timeout=120)

    def stop(self) -> None:
        self.http.close()
        self.server.should_exit = True
        self.thread.join(10)


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise RuntimeError(
            f"{response.request.method} {response.request.url}: "
            f"{response.status_code} {response.text[:500]}"
        )
    return response


class StepwayDev:
    """``stepway dev`` in this process; see the module docstring."""

    def __init__(self, data_dir: Path, *, http: str = "auto", loop: str = "auto") -> None:
        self.data_dir = data_dir
        port = free_port()
        # repo_root without workers/ or definitions/: no example registrations
        # STEPWAY_ORCHESTRATION_SESSIONS as `stepway dev` reads it (0: full replays)
        sessions = read_orchestration_sessions(EnvReader())
        self.platform = DevPlatform(
            data_dir=data_dir / "data",
            port=port,
            repo_root=data_dir,
            orchestration_sessions=sessions,
        )
        app = self.platform.start()
        self._served = _Served(app, http=http, loop=loop)
        settle_heap(read_gc_tuning(EnvReader()))  # as `stepway dev` once started
        self.url = self._served.url
        self.http = self._served.http
        self.client = self.platform.client  # the durable backend's client

    # --- metadata and runs, over HTTP --------------------------------------------------

    def put_taskdef(self, name: str, **fields: Any) -> None:
        body = {"name": name, "retryCount": 0, "responseTimeoutSeconds": 300, **fields}
        _check(self.http.put("/api/metadata/taskdefs", json=body))

    def put_workflow(self, definition: dict[str, Any]) -> None:
        _check(self.http.put("/api/metadata/workflow", json=[definition]))

    def start(self, name: str, input: dict[str, Any] | None = None) -> str:
        return _check(self.http.post(f"/api/workflow/{name}", json=input or {})).text

    def run(self, workflow_id: str, *, tasks: bool = False) -> dict[str, Any]:
        response = self.http.get(f"/api/workflow/{workflow_id}", params={"includeTasks": tasks})
        body: dict[str, Any] = _check(response).json()
        return body

    # --- the durable backend -----------------------------------------------------------

    def wait(self, workflow_id: str, timeout: float = 600) -> None:
        """Blocks until the run's orchestration has ended (the interpreter records the
        run's end before its orchestration ends; read the status with ``status``)."""
        state = self.client.wait_for_orchestration_completion(workflow_id, timeout=timeout)
        if state is None:
            raise RuntimeError(f"run {workflow_id} is unknown to the backend")

    def wait_ended(self, workflow_ids: list[str], timeout: float = 600) -> None:
        """Blocks until every run has ended in the run store (:func:`wait_runs_ended`)."""
        runs_db = self.platform.services.run_store.engine.url.database
        assert runs_db is not None  # stepway dev's run store is a SQLite file
        wait_runs_ended(Path(runs_db), workflow_ids, timeout)

    def status(self, workflow_id: str) -> str:
        """The run's status as the workflow API reports it."""
        return str(self.run(workflow_id)["status"])

    def history(self, workflow_id: str) -> list[Any]:
        """The history events of the run's current execution (durabletask.history)."""
        return list(self.client.get_orchestration_history(workflow_id))

    def queued(self, task_type: str) -> int:
        """Messages of a task type's queue that a worker could receive now."""
        return int(self.platform.services.queue.depth(task_type).active)

    def close(self) -> None:
        self._served.stop()
        self.platform.stop()


class _CountingSignals:
    """The control plane's RunSignals with no engine behind it: counts the result
    events (``.started`` events are dropped)."""

    round_trips = False  # counts in memory: answers at once

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.results = 0

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None:
        if not event_name.endswith(".started"):
            with self._lock:
                self.results += 1

    def start_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        raise RuntimeError("no engine: runs cannot be started")

    def suspend(self, workflow_id: str, reason: str | None = None) -> None:
        raise RuntimeError("no engine")

    def resume(self, workflow_id: str, reason: str | None = None) -> None:
        raise RuntimeError("no engine")

    def ended_outside(self, workflow_id: str) -> str | None:
        return None


class TaskApiOnly:
    """The Task API alone; see the module docstring."""

    def __init__(self, data_dir: Path, *, http: str = "auto", loop: str = "auto") -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.store = SqlRunStore(f"sqlite:///{data_dir / 'runs.db'}")
        self.queue = SqliteTaskQueue(data_dir / "queues.db")
        self.signals = _CountingSignals()
        deps = Deps(
            run_store=self.store,
            queue=self.queue,
            provisioner=SqliteQueueProvisioner(data_dir / "queues.db"),
            payloads=None,
            signals=self.signals,
            local_adapters=True,  # as stepway dev's
        )
        self._app = create_app(Settings(), deps)
        self._served = _Served(self._app, http=http, loop=loop)
        settle_heap(read_gc_tuning(EnvReader()))  # as `stepway serve` once started
        self.url = self._served.url
        self.http = self._served.http
        self._runs = 0

    def put_taskdef(self, name: str, **fields: Any) -> None:
        body = {"name": name, "retryCount": 0, "responseTimeoutSeconds": 300, **fields}
        _check(self.http.put("/api/metadata/taskdefs", json=body))

    def seed(self, task_type: str, n: int) -> None:
        """``n`` scheduled tasks of ``task_type`` in one run, queued as the engine's
        dispatch activity queues them (a task row, then the message)."""
        self._runs += 1
        workflow_id = f"handoffs-{self._runs}-{time.time_ns()}"
        now = _now_ms()
        self.store.create_run(
            NewRun(workflow_id=workflow_id, name="handoffs", version=1, create_time=now)
        )
        for i in range(n):
            task_id = f"{workflow_id}-{i}"
            self.store.upsert_task(
                TaskRecord(
                    task_id=task_id,
                    workflow_id=workflow_id,
                    reference_task_name=f"t{i}",
                    task_type=TaskType.WORKER.value,
                    status=TaskStatus.SCHEDULED,
                    seq=now + i,
                    input_data={"i": i},
                    scheduled_time=now,
                    task_def_name=task_type,
                    queue_name=task_type,
                ),
                now,
            )
            body = TaskMessage(
                task_id=task_id,
                workflow_id=workflow_id,
                workflow_type="handoffs",
                task_ref=f"t{i}",
                task_type=task_type,
                attempt=1,
                input={"i": i},
            ).body()
            self.queue.send(task_type, body, message_id=message_id(task_id, 1))

    def close(self) -> None:
        self._served.stop()
        self._app.close()
        self.store.close()


def trace_points() -> list[tuple[Any, str, str]]:
    """(class, method, label) of the hops of a step that ``bench.trace_steps`` times:
    the engine worker's orchestrator and activity executions (durabletask) and the
    dispatch of a WORKER task in an orchestrator's work item, the embedded
    backend's completions, events and hand-outs, and the Task API's poll, hand-out,
    result and signals."""
    import durabletask.worker as dt_worker

    from control_plane.services.task_handout import TaskHandout
    from control_plane.services.task_results import TaskResults
    from control_plane.services.task_support import TaskSupport
    from engine.adapters.backend.embedded import StepwayInMemoryBackend
    from engine.adapters.backend.sessions import SessionWorkerMixin
    from engine.runtime.activities import RunActivities

    return [
        # the worker of stepway dev keeps orchestration sessions: its override runs
        (SessionWorkerMixin, "_execute_orchestrator", "engine: orchestrator work item"),
        (dt_worker.TaskHubGrpcWorker, "_execute_activity", "engine: activity"),
        # a WORKER task queued in the orchestrator's work item (the engine hosts both)
        (RunActivities, "dispatch_here", "engine: dispatch"),
        (StepwayInMemoryBackend, "CompleteOrchestratorTask", "backend: orchestrator completed"),
        (StepwayInMemoryBackend, "CompleteActivityTask", "backend: activity completed"),
        (StepwayInMemoryBackend, "RaiseEvent", "backend: event raised"),
        (StepwayInMemoryBackend, "_lease", "backend: work item handed out"),
        (TaskHandout, "poll", "task API: poll"),
        (TaskHandout, "_hand_out", "task API: hand-out"),
        (TaskResults, "update", "task API: result"),
        (TaskSupport, "_signal", "task API: event to the run"),
    ]
