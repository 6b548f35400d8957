"""The C# worker SDK (``workers/sdk-dotnet``) against the real platform: ``stepway dev``
started as a user starts it (its CLI, a free port, a fresh data dir), definitions and runs
through the HTTP API, and worker apps built with Mono running as processes of their own:

- ``tests/E2eWorker``: test task types (``cs_*``) next to Python SDK handlers with the same
  logic (``py_*``), so that IN_PROGRESS callbacks and terminal errors can be compared with
  what the Python SDK does, as a user sees them on the run;
- ``examples/ConnectorWorker``: the example app (``lodge_return``) against a fake tax
  authority on a local port.

Nothing here imports the engine or the control plane: only the CLI and the HTTP API.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from stepway_worker import (
    InProgress,
    Registry,
    TaskContext,
    TerminalError,
    Worker,
    WorkerSettings,
    worker_task,
)

from tests.dotnet_build import build_dotnet, require_mono

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
#: the CLI installed with the project (next to the interpreter running the tests)
STEPWAY = Path(sys.executable).with_name("stepway")
#: `stepway dev` on a loaded machine takes a while to come up
START_SECONDS = 180
RUN_SECONDS = 90
CS_TYPES = ["cs_greet", "cs_count_words", "cs_chunked", "cs_reject", "cs_flaky"]
PY_TYPES = ["py_upper", "py_chunked", "py_reject"]
TASK_DEFS: list[dict[str, Any]] = [
    *(
        {"name": name, "retryCount": 0, "responseTimeoutSeconds": 60}
        for name in [
            "cs_greet",
            "cs_count_words",
            "py_upper",
            "cs_chunked",
            "py_chunked",
            "cs_slow",
        ]
    ),
    # a terminal error must not be retried although the task definition allows it
    *(
        {"name": name, "retryCount": 2, "retryDelaySeconds": 0, "responseTimeoutSeconds": 60}
        for name in ["cs_reject", "py_reject"]
    ),
    {"name": "cs_flaky", "retryCount": 1, "retryDelaySeconds": 0, "responseTimeoutSeconds": 60},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(url: str, worker_id: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "STEPWAY_SERVER_URL": url,
        "STEPWAY_WORKER_ID": worker_id,
        "STEPWAY_LONG_POLL_MS": "1000",
        "STEPWAY_POLL_INTERVAL": "0.2",
        "STEPWAY_SHUTDOWN_GRACE": "20",
        **extra,
    }


@dataclass
class Proc:
    """A child process whose output goes to a file (read it for failure messages)."""

    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, seconds: float = 30) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(seconds)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return self.popen.returncode


def _spawn(args: list[str], log: Path, env: dict[str, str], cwd: Path) -> Proc:
    with log.open("wb") as out:
        popen = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    return Proc(popen, log)


@dataclass
class Dev:
    url: str
    http: httpx.Client
    build: Path
    logs: Path

    def start_worker(self, exe: str, worker_id: str, *args: str, **env: str) -> Proc:
        return _spawn(
            ["mono", "--debug", str(self.build / exe), *args],
            self.logs / f"{worker_id}.log",
            _env(self.url, worker_id, **env),
            self.build,
        )

    def wait_polled(self, worker_id: str, types: list[str], proc: Proc | None = None) -> None:
        """Until ``worker_id`` has polled every type in ``types``."""
        deadline = time.monotonic() + 60
        seen: set[str] = set()
        while time.monotonic() < deadline:
            seen = {
                p["queueName"]
                for p in self.http.get("/api/tasks/queue/polldata/all").json()
                if p["workerId"] == worker_id
            }
            if seen >= set(types):
                return
            if proc is not None and proc.popen.poll() is not None:
                break
            time.sleep(0.2)
        detail = proc.output() if proc is not None else ""
        pytest.fail(f"{worker_id} never polled {sorted(set(types) - seen)}\n{detail}")

    def register(self, name: str, tasks: list[dict[str, Any]], output: dict[str, Any]) -> None:
        response = self.http.post(
            "/api/metadata/workflow",
            json={"name": name, "version": 1, "tasks": tasks, "outputParameters": output},
        )
        assert response.status_code < 300, response.text

    def run(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """Start a run and return it (with its tasks) once it is no longer RUNNING."""
        started = self.http.post(f"/api/workflow/{name}", json=data)
        assert started.status_code == 200, started.text
        return self.finished(started.text)

    def finished(self, workflow_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + RUN_SECONDS
        while True:
            run: dict[str, Any] = self.http.get(
                f"/api/workflow/{workflow_id}", params={"includeTasks": True}
            ).json()
            if run["status"] != "RUNNING":
                return run
            assert time.monotonic() < deadline, f"run {workflow_id} still RUNNING: {run}"
            time.sleep(0.1)

    def task_log(self, task_id: str) -> list[str]:
        return [entry["log"] for entry in self.http.get(f"/api/tasks/{task_id}/log").json()]


def _task(name: str, ref: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "taskReferenceName": ref, "type": "SIMPLE", "inputParameters": inputs}


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    require_mono()
    assert STEPWAY.exists(), f"no stepway CLI at {STEPWAY}: run the tests with uv run pytest"
    build = build_dotnet(tmp_path_factory.mktemp("dotnet"))
    logs = tmp_path_factory.mktemp("logs")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    data_dir = tmp_path_factory.mktemp("data")
    platform = _spawn(
        [str(STEPWAY), "dev", "--port", str(port), "--data-dir", str(data_dir)],
        logs / "stepway-dev.log",
        {**os.environ, "PYTHONUNBUFFERED": "1"},
        REPO,
    )
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            deadline = time.monotonic() + START_SECONDS
            while True:
                try:
                    if http.get("/api/metadata/taskdefs").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if platform.popen.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"stepway dev did not come up:\n{platform.output()}")
                time.sleep(0.2)
            # the example app serves the connector area's types with their task definitions
            connector = [
                json.loads(path.read_text())
                for path in sorted((REPO / "workers" / "connector" / "taskdefs").glob("*.json"))
            ]
            registered = http.post("/api/metadata/taskdefs", json=TASK_DEFS + connector)
            assert registered.status_code < 300, registered.text
            yield Dev(url, http, build, logs)
    finally:
        platform.stop(signal.SIGINT)


@pytest.fixture(scope="module")
def workers(dev: Dev) -> Iterator[None]:
    """The C# test worker (every cs_* type but cs_slow) and Python SDK handlers with the
    same logic, polling the platform for the whole module."""
    reg = Registry()

    @worker_task("py_upper", registry=reg)
    def upper(text: str) -> dict[str, Any]:
        return {"text": text.upper()}

    @worker_task("py_chunked", registry=reg)
    def chunked(ctx: TaskContext, total: int) -> Any:
        cursor = int(ctx.previous_output.get("cursor", 0)) + 10
        ctx.log(f"cursor {cursor}")
        if cursor < total:
            return InProgress(callback_after_seconds=1, output={"cursor": cursor})
        return {"done": total, "polls": ctx.poll_count}

    @worker_task("py_reject", registry=reg)
    def reject(reference: str) -> None:
        raise TerminalError(f"return {reference} was already lodged")

    python = Worker(
        reg,
        settings=WorkerSettings(
            server_url=dev.url, worker_id="python-e2e", long_poll_ms=1000, poll_interval=0.2
        ),
    ).start()
    csharp = dev.start_worker("E2eWorker.exe", "dotnet-e2e", *CS_TYPES, STEPWAY_THREADS="2")
    try:
        dev.wait_polled("dotnet-e2e", CS_TYPES, csharp)
        dev.wait_polled("python-e2e", PY_TYPES)
        yield
    finally:
        code = csharp.stop()
        python.stop(grace=5)
        assert code == 0, csharp.output()


def test_a_worker_task_served_by_the_csharp_worker(dev: Dev, workers: None) -> None:
    dev.register(
        "dotnet_greeting",
        [_task("cs_greet", "greet", {"name": "${workflow.input.who}", "times": 2})],
        {"message": "${greet.output.message}", "worker": "${greet.output.worker}"},
    )
    run = dev.run("dotnet_greeting", {"who": "Ada"})
    assert run["status"] == "COMPLETED", run
    assert run["output"] == {"message": "Hello, Ada! Hello, Ada!", "worker": "dotnet"}
    (task,) = run["tasks"]
    assert task["status"] == "COMPLETED" and task["workerId"] == "dotnet-e2e"
    assert dev.task_log(task["taskId"]) == ["greeting Ada"]

    # invalid input: a terminal error naming the field, not retried
    run = dev.run("dotnet_greeting", {})
    assert run["status"] == "FAILED", run
    (task,) = run["tasks"]
    assert task["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert task["reasonForIncompletion"].startswith("invalid input for cs_greet: ")
    assert "'name'" in task["reasonForIncompletion"]


def _summary(dev: Dev, run: dict[str, Any], prefix: str) -> dict[str, Any]:
    """What a user sees of a one-task run, with the worker's type prefix taken out."""
    (task,) = run["tasks"]
    return {
        "run": run["status"],
        "output": run["output"],
        # the failed task's id is unique to the run: left out of the comparison
        "reason": re.sub(
            r"^Task [0-9a-f-]+ ", "Task <id> ", (run.get("reasonForIncompletion") or "")
        ).replace(prefix, "X_"),
        "task": task["status"],
        "taskReason": task.get("reasonForIncompletion"),
        "retryCount": task["retryCount"],
        "pollCount": task["pollCount"],
        "log": dev.task_log(task["taskId"]),
    }


def test_in_progress_with_a_callback_as_in_the_python_sdk(dev: Dev, workers: None) -> None:
    summaries = {}
    for prefix in ("cs_", "py_"):
        dev.register(
            f"{prefix}chunks",
            [_task(f"{prefix}chunked", "chunks", {"total": "${workflow.input.total}"})],
            {"done": "${chunks.output.done}", "polls": "${chunks.output.polls}"},
        )
        summaries[prefix] = _summary(dev, dev.run(f"{prefix}chunks", {"total": 30}), prefix)
    assert summaries["cs_"] == {
        "run": "COMPLETED",
        "output": {"done": 30, "polls": 3},
        "reason": "",
        "task": "COMPLETED",
        "taskReason": None,
        "retryCount": 0,  # one attempt, handed out three times
        "pollCount": 3,
        "log": ["cursor 10", "cursor 20", "cursor 30"],
    }
    assert summaries["cs_"] == summaries["py_"]


def test_a_terminal_error_as_in_the_python_sdk(dev: Dev, workers: None) -> None:
    summaries = {}
    for prefix in ("cs_", "py_"):
        dev.register(
            f"{prefix}rejects",
            [_task(f"{prefix}reject", "lodge", {"reference": "${workflow.input.reference}"})],
            {},
        )
        summaries[prefix] = _summary(dev, dev.run(f"{prefix}rejects", {"reference": "R1"}), prefix)
    cs = summaries["cs_"]
    assert cs["run"] == "FAILED"
    assert cs["task"] == "FAILED_WITH_TERMINAL_ERROR"
    assert cs["taskReason"] == "return R1 was already lodged"
    assert cs["retryCount"] == 0  # not retried although the task definition allows 2
    assert summaries["cs_"] == summaries["py_"]


def test_an_exception_fails_the_attempt_and_the_engine_retries_it(dev: Dev, workers: None) -> None:
    dev.register(
        "dotnet_flaky", [_task("cs_flaky", "flaky", {})], {"attempt": "${flaky.output.attempt}"}
    )
    run = dev.run("dotnet_flaky", {})
    assert run["status"] == "COMPLETED", run
    assert run["output"] == {"attempt": 2}
    # as in Conductor, each attempt is a task of its own: the failed one, then its retry
    failed, task = run["tasks"]
    assert failed["status"] == "FAILED" and task["status"] == "COMPLETED"
    assert task["retryCount"] == 1
    (trace,) = dev.task_log(failed["taskId"])
    assert trace.startswith("System.TimeoutException: the ledger did not answer")


def test_python_and_csharp_workers_serve_one_run(dev: Dev, workers: None) -> None:
    dev.register(
        "polyglot",
        [
            _task("py_upper", "upper", {"text": "${workflow.input.text}"}),
            _task("cs_count_words", "count", {"text": "${upper.output.text}"}),
        ],
        {"text": "${count.output.text}", "words": "${count.output.words}"},
    )
    run = dev.run("polyglot", {"text": "hello brave  new world"})
    assert run["status"] == "COMPLETED", run
    assert run["output"] == {"text": "HELLO BRAVE  NEW WORLD", "words": 4}
    assert [(t["referenceTaskName"], t["status"], t["workerId"]) for t in run["tasks"]] == [
        ("upper", "COMPLETED", "python-e2e"),
        ("count", "COMPLETED", "dotnet-e2e"),
    ]


def test_sigterm_finishes_the_task_in_hand_and_posts_it(dev: Dev) -> None:
    slow = dev.start_worker("E2eWorker.exe", "dotnet-slow", "cs_slow")
    try:
        dev.wait_polled("dotnet-slow", ["cs_slow"], slow)
        dev.register(
            "dotnet_slow",
            [_task("cs_slow", "slow", {"seconds": 2})],
            {"slept": "${slow.output.slept}"},
        )
        workflow_id = dev.http.post("/api/workflow/dotnet_slow", json={}).text
        deadline = time.monotonic() + RUN_SECONDS
        task_id = None
        while time.monotonic() < deadline:
            tasks = dev.http.get(
                f"/api/workflow/{workflow_id}", params={"includeTasks": True}
            ).json()["tasks"]
            if tasks and tasks[0].get("taskId") and dev.task_log(tasks[0]["taskId"]) == ["started"]:
                task_id = tasks[0]["taskId"]
                break
            time.sleep(0.05)
        assert task_id, f"the task never started\n{slow.output()}"
    finally:
        code = slow.stop(signal.SIGTERM)
    assert code == 0, slow.output()
    assert "stopping" in slow.output()
    run = dev.finished(workflow_id)
    assert run["status"] == "COMPLETED", run
    assert run["output"] == {"slept": 2}


class _TaxAuthority(BaseHTTPRequestHandler):
    """A fake tax authority: ``POST /returns`` lodges, reference ``DUP`` gets 409."""

    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"headers": dict(self.headers), "path": self.path, "body": body})
        if body.get("reference") == "DUP":
            answer, status = {"error": "already lodged"}, 409
        else:
            answer, status = {"lodgementId": f"L-{len(self.seen)}", "status": "LODGED"}, 201
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_example_connector_app_lodges_a_return(dev: Dev) -> None:
    handler = type("Tax", (_TaxAuthority,), {"seen": []})
    tax = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=tax.serve_forever, daemon=True).start()
    app = dev.start_worker(
        "ConnectorWorker.exe",
        "dotnet-connector",
        CONNECTOR_TAX_URL=f"http://127.0.0.1:{tax.server_address[1]}",
        CONNECTOR_BANK_URL="http://127.0.0.1:9",
        CONNECTOR_API_KEY="k-123",
    )
    try:
        dev.wait_polled("dotnet-connector", ["lodge_return", "fetch_bank_feed"], app)
        dev.register(
            "dotnet_lodge",
            [
                _task(
                    "lodge_return",
                    "lodge",
                    {
                        "documentUrl": "https://docs.example.com/r1.pdf",
                        "amount": 1250.5,
                        "reference": "${workflow.input.reference}",
                    },
                )
            ],
            {"lodgementId": "${lodge.output.lodgementId}", "status": "${lodge.output.status}"},
        )
        run = dev.run("dotnet_lodge", {"reference": "R-7"})
        assert run["status"] == "COMPLETED", (run, app.output())
        assert run["output"] == {"lodgementId": "L-1", "status": "LODGED"}
        (task,) = run["tasks"]
        (call,) = handler.seen
        assert call["path"] == "/returns"
        assert call["headers"]["Authorization"] == "Bearer k-123"
        assert call["headers"]["Idempotency-Key"] == task["taskId"]
        assert call["body"] == {
            "documentUrl": "https://docs.example.com/r1.pdf",
            "amount": 1250.5,
            "reference": "R-7",
        }
        assert dev.task_log(task["taskId"]) == ["lodged R-7: L-1"]

        # a 4xx from the tax authority is final: FAILED_WITH_TERMINAL_ERROR, no retry
        run = dev.run("dotnet_lodge", {"reference": "DUP"})
        assert run["status"] == "FAILED", run
        (task,) = run["tasks"]
        assert task["status"] == "FAILED_WITH_TERMINAL_ERROR"
        assert task["retryCount"] == 0
        assert "409" in task["reasonForIncompletion"]
        assert "k-123" not in json.dumps(run)
    finally:
        code = app.stop()
        tax.shutdown()
    assert code == 0, app.output()
