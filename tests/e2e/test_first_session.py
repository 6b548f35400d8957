"""The README's first session on a fresh machine: a new data dir, no environment variables
(no CONNECTOR_*, no STEPWAY_*), every step through the real CLI as a subprocess.

``stepway dev --with-workers`` gives the connector worker its local sandbox tax authority,
so the invoice run ends COMPLETED with a sandbox lodgement id.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "control_plane.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str, env: dict[str, str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_first_session_of_the_readme_completes(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STEPWAY_", "CONNECTOR_")) and k not in ("HOME",)
    }
    env.update(HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1", NO_COLOR="1")
    (tmp_path / "home").mkdir()
    dev_log = tmp_path / "dev.log"
    with dev_log.open("wb") as log:
        dev = subprocess.Popen(
            [*CLI, "dev", "--with-workers", "--port", str(port), "--data-dir", str(tmp_path / "d")],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # the README's other terminals talk to the default server; this test's port differs
    cli_env = {**env, "STEPWAY_SERVER_URL": f"http://127.0.0.1:{port}"}
    run: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 60
        while "Stepway is running" not in dev_log.read_text(errors="replace"):
            assert dev.poll() is None, dev_log.read_text(errors="replace")
            assert time.monotonic() < deadline, "stepway dev did not start"
            time.sleep(0.2)
        banner = dev_log.read_text(errors="replace")
        assert "SANDBOX" in banner, banner

        run = subprocess.Popen(
            [*CLI, "run", "invoice_intake", "--input", "@docs/samples/invoice.json", "--wait"],
            cwd=REPO,
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # find the run, as the README says: `stepway runs --status RUNNING`
        workflow_id = None
        deadline = time.monotonic() + 60
        while workflow_id is None:
            assert time.monotonic() < deadline, "the run did not come to wait for the approval"
            assert run.poll() is None, run.communicate()
            listed = _cli("runs", "--status", "RUNNING", env=cli_env)
            assert listed.returncode == 0, listed.stderr
            ids = [
                line.split()[0] for line in listed.stdout.splitlines() if "invoice_intake" in line
            ]
            for candidate in ids:
                shown = _cli("status", candidate, env=cli_env)
                if "waiting for a person: approval" in shown.stdout:
                    workflow_id = candidate
            time.sleep(0.5)

        done = _cli(
            "complete",
            workflow_id,
            "approval",
            "--output",
            '{"approved": true, "amount": 120.5}',
            env=cli_env,
        )
        assert done.returncode == 0, done.stderr

        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, (out, err)
        assert out.splitlines()[0].strip() == workflow_id
        result = json.loads(out.split("\n", 1)[1])
        assert result["status"] == "COMPLETED", (out, err)
        assert result["output"]["outcome"] == "lodged"
        assert result["output"]["documentClass"] == "invoice"
        assert str(result["output"]["lodgementId"]).startswith("SANDBOX-")
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.communicate()
        if dev.poll() is None:
            os.kill(dev.pid, signal.SIGINT)
            try:
                dev.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(dev.pid, signal.SIGKILL)
                dev.wait()
