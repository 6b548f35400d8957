"""Work items handed to an engine process that dies are handed to the next one.

The backend runs in its own process (``python -m engine.adapters.backend.embedded``), the engine
processes are subprocesses killed with SIGKILL while they hold a work item, and the
client is this test process: three processes, the real gRPC protocol between them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from durabletask.client import OrchestrationStatus

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client

HERE = Path(__file__).parent
REPO = HERE.parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start_engine(address: str, mode: str, marker_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "worker_proc.py"), address, mode, str(marker_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _wait_for(path: Path, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "marker"),
    [("hang_activity", "activity_started"), ("hang_orchestrator", "orchestrator_started")],
)
def test_work_item_of_killed_engine_process_goes_to_the_next(
    backend_address: str, tmp_path: Path, mode: str, marker: str
) -> None:
    client = make_client(BackendConfig.embedded(backend_address))
    first = _start_engine(backend_address, mode, tmp_path)
    second: subprocess.Popen[str] | None = None
    try:
        iid = client.schedule_new_orchestration("kill_orch", input="x")
        _wait_for(tmp_path / marker)  # the first engine process holds the work item
        first.send_signal(signal.SIGKILL)
        first.wait(10)

        state = client.get_orchestration_state(iid)
        assert state is not None
        assert state.runtime_status in (OrchestrationStatus.PENDING, OrchestrationStatus.RUNNING)

        second = _start_engine(backend_address, "normal", tmp_path)
        state = client.wait_for_orchestration_completion(iid, timeout=20)
        assert state is not None
        assert state.runtime_status == OrchestrationStatus.COMPLETED, state.failure_details
        assert state.serialized_output == f'"done:x:{second.pid}"'
    finally:
        _stop(first)
        if second is not None:
            _stop(second)
        client.close()
