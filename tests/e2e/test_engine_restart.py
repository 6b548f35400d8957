"""The engine process is killed (SIGKILL) mid-run and a new one finishes the run.

Three processes, as in production: the backend (``python -m engine.adapters.backend.embedded``),
the engine (``tests/e2e/engine_proc.py``) and this test, which plays the control plane and
the worker on the same SQLite run store and queues."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.app.host import LocalSettings, build_local_services
from engine.language.definitions import RunStatus, TaskStatus

from .conftest import Platform

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SECRET = "e2e-restart-secret"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _engine(address: str, data_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "engine_proc.py"), address, str(data_dir), SECRET],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.slow
def test_run_survives_a_killed_engine_process(backend_address: str, tmp_path: Path) -> None:
    config = BackendConfig.embedded(backend_address)
    services = build_local_services(LocalSettings(data_dir=tmp_path, payload_secret=SECRET), config)
    platform = Platform(
        services, make_client(config), SqliteQueueProvisioner(tmp_path / "queues.db")
    )
    platform.register_task_def({"name": "step", "retryCount": 0})
    platform.register(
        {
            "name": "restartable",
            "tasks": [
                {
                    "name": "step",
                    "taskReferenceName": "step",
                    "type": "WORKER",
                    "inputParameters": {"n": "${workflow.input.n}"},
                },
                {
                    "name": "after",
                    "taskReferenceName": "after",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"seen": "${step.output.n}"},
                },
                {
                    "name": "wait",
                    "taskReferenceName": "wait",
                    "type": "WAIT",
                    "inputParameters": {"duration": "1s"},
                },
            ],
            "outputParameters": {"seen": "${workflow.variables.seen}"},
        }
    )
    first = _engine(backend_address, tmp_path)
    second: subprocess.Popen[str] | None = None
    try:
        workflow_id = platform.start("restartable", {"n": 5})
        body = platform.take("step")  # the WORKER task is pending in the run
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        platform.complete(body, {"n": 5})
        time.sleep(0.5)
        assert platform.services.run_store.get_run(workflow_id).status == RunStatus.RUNNING
        second = _engine(backend_address, tmp_path)
        run = platform.wait(workflow_id, timeout=30)
        assert run.status == RunStatus.COMPLETED
        assert run.output == {"seen": 5}
        rows = platform.tasks(workflow_id)
        assert {r: t.status for r, t in rows.items()} == {
            "step": TaskStatus.COMPLETED,
            "after": TaskStatus.COMPLETED,
            "wait": TaskStatus.COMPLETED,
        }
    finally:
        _stop(first)
        if second is not None:
            _stop(second)
        platform.client.close()
