"""The deployed shape on one machine: ``stepway serve``, ``stepway engine --role
orchestrator`` and ``stepway engine --role activities`` as three processes configured only
by environment variables, on an embedded backend started by the test and a shared SQLite
data directory. A run completes only once the activities process is up (the orchestrator
process hosts no activity, and work item filtering hands it none), and SIGTERM stops every
process with exit code 0."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.runtime.activity_io import ACTIVITY_FINISH

REPO = Path(__file__).resolve().parents[2]

WORKFLOW = {
    "name": "deployed_shape",
    "version": 1,
    "tasks": [
        {
            "name": "note",
            "taskReferenceName": "note",
            "type": "SET_VARIABLE",
            "inputParameters": {"seen": "${workflow.input.value}"},
        }
    ],
    "outputParameters": {"seen": "${workflow.variables.seen}"},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def backend() -> Iterator[str]:
    embedded = EmbeddedBackend()
    address = embedded.start()
    try:
        yield address
    finally:
        embedded.stop()


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "control_plane.cli", *args],
        env=env,
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def stop(proc: subprocess.Popen[bytes], log: Path) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"did not stop on SIGTERM:\n{log.read_text()}") from None


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_split_roles_run_a_workflow_and_stop_on_sigterm(backend: str, tmp_path: Path) -> None:
    port = free_port()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("STEPWAY_", "AZURE_"))}
    env = {
        **base_env,
        "STEPWAY_DATA_DIR": str(tmp_path / "data"),
        "STEPWAY_BACKEND_KIND": "embedded",
        "STEPWAY_BACKEND_ADDRESS": backend,
        "STEPWAY_PAYLOAD_SECRET": "x" * 64,
    }
    logs = {name: tmp_path / f"{name}.log" for name in ("serve", "orch", "act")}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["serve"] = spawn(
            ["serve"],
            {
                **env,
                "STEPWAY_AUTH_MODE": "none",
                "STEPWAY_HOST": "127.0.0.1",
                "STEPWAY_PORT": str(port),
            },
            logs["serve"],
        )
        procs["orch"] = spawn(["engine", "--role", "orchestrator"], env, logs["orch"])
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

        def healthy() -> bool:
            assert procs["serve"].poll() is None, logs["serve"].read_text()
            try:
                return http.get("/health").status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, 60, "the control plane")
        r = http.post("/api/metadata/workflow", json=WORKFLOW)
        assert r.status_code in (200, 204), r.text
        r = http.post("/api/workflow/deployed_shape", json={"value": "hello"})
        assert r.status_code == 200, r.text
        workflow_id = r.text.strip().strip('"')

        def status() -> str:
            r = http.get(f"/api/workflow/{workflow_id}", params={"includeTasks": "false"})
            assert r.status_code == 200, r.text
            return str(r.json()["status"])

        # Only the orchestrator: the run's activities wait for an activities process.
        time.sleep(3)
        assert procs["orch"].poll() is None, logs["orch"].read_text()
        assert status() == "RUNNING"

        procs["act"] = spawn(["engine", "--role", "activities"], env, logs["act"])
        wait_for(lambda: status() != "RUNNING", 90, "the run to finish")
        run = http.get(f"/api/workflow/{workflow_id}").json()
        assert run["status"] == "COMPLETED", run
        assert run["output"] == {"seen": "hello"}
        # the orchestrator app writes nothing: the activities app recorded the end
        client = make_client(BackendConfig.embedded(backend))
        try:
            scheduled = [
                getattr(event, "name", None)
                for event in client.get_orchestration_history(workflow_id)
                if type(event).__name__ == "TaskScheduledEvent"
            ]
        finally:
            client.close()
        assert scheduled[-1] == ACTIVITY_FINISH, scheduled

        for name in ("act", "orch", "serve"):
            code = stop(procs.pop(name), logs[name])
            assert code == 0, f"{name} exited {code}:\n{logs[name].read_text()}"
        assert "stepway engine stopped" in logs["act"].read_text()
        assert "role activities" in logs["act"].read_text()
        assert "role orchestrator" in logs["orch"].read_text()
    finally:
        for name, proc in procs.items():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            print(f"--- {name}\n{logs[name].read_text()}")
