"""``stepway dev`` as a process of its own, reached over real HTTP (for the tests that
must stop, kill or load it without stopping the test itself)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("PPid:") and int(line.split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


class DevProcess:
    """``python -m control_plane.cli dev`` on a free port and its own data directory."""

    def __init__(
        self,
        data_dir: Path,
        env: dict[str, str] | None = None,
        with_workers: bool = False,
        port: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "control_plane.cli", "dev", "--port", str(self.port)]
        args += ["--data-dir", str(data_dir)]
        if with_workers:
            args.append("--with-workers")
        self.log = data_dir.parent / f"stepway-dev-{self.port}.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log.open("wb")
        self.proc = subprocess.Popen(
            args,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, timeout=30)
        self.wait_healthy()

    def wait_healthy(self, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"stepway dev exited {self.proc.returncode}: {self.output()}")
            try:
                if self.http.get("/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"stepway dev did not answer /health: {self.output()}")

    def output(self) -> str:
        self._log_file.flush()
        return self.log.read_text(errors="replace")[-4000:]

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, seconds: float = 60) -> int:
        return self.proc.wait(seconds)

    def kill(self) -> None:
        """kill -9, as a crash would."""
        self.proc.kill()
        self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.http.close()
        self._log_file.close()

    # -- API helpers ---------------------------------------------------------------------

    def ok(self, response: httpx.Response) -> Any:
        assert response.status_code < 300, (response.status_code, response.text)
        if "json" not in response.headers.get("content-type", ""):
            return response.text
        return response.json() if response.content else None

    def register_workflow(self, definition: dict[str, Any]) -> None:
        self.ok(self.http.post("/api/metadata/workflow", json=definition))

    def register_task_def(self, name: str, **fields: Any) -> None:
        body = {"name": name, "responseTimeoutSeconds": 600, "retryCount": 0, **fields}
        self.ok(self.http.put("/api/metadata/taskdefs", json=body))

    def start(self, name: str, input: dict[str, Any] | None = None) -> str:
        response = self.http.post(f"/api/workflow/{name}", json=input or {})
        assert response.status_code == 200, response.text
        return response.text.strip('"')

    def run(self, workflow_id: str) -> dict[str, Any]:
        body: dict[str, Any] = self.ok(
            self.http.get(f"/api/workflow/{workflow_id}", params={"includeTasks": True})
        )
        return body

    def poll(self, task_type: str, worker: str = "w1", timeout_ms: int = 500) -> list[Any]:
        polled = self.ok(
            self.http.get(
                f"/api/tasks/poll/batch/{task_type}",
                params={"workerid": worker, "count": 10, "timeout": timeout_ms},
            )
        )
        return list(polled or [])
