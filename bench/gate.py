"""Worker processes that start, get ready, and begin work only when told.

A gated process imports and builds everything it needs, prints ``ready`` and waits for
``go`` on stdin; it works until ``stop`` (or the end of stdin), then prints the CPU
seconds it used since ``go`` and exits. Measurements thus exclude process start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from bench.common import REPO, python_env


class Gate:
    """The worker side: ``ready()`` blocks until go; ``wait_stop()`` until stop. Both
    read stdin in the calling thread (a thread blocked on stdin would deadlock a later
    fork, which closes stdin in the child)."""

    def __init__(self) -> None:
        self.cpu_at_go = 0.0

    def ready(self) -> None:
        print("ready", flush=True)
        line = sys.stdin.readline()
        if line.strip() != "go":
            raise SystemExit(0)
        self.cpu_at_go = time.process_time()

    def wait_stop(self) -> None:
        sys.stdin.readline()  # "stop" or EOF

    def report(self, extra_cpu: float = 0.0) -> None:
        """Prints the CPU used since go and ends the process at once (the work is done;
        a graceful stop would only wait out an open long poll)."""
        print(f"cpu {time.process_time() - self.cpu_at_go + extra_cpu:.6f}", flush=True)
        os._exit(0)


class GatedProcesses:
    """The parent side: start ``n`` processes of ``module`` with ``args``, wait until
    all are ready, ``go()`` them together, ``stop()`` them and collect their CPU."""

    def __init__(
        self,
        module: str,
        args: Sequence[str],
        n: int,
        *,
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        ready_timeout: float = 120.0,
    ) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self._logs: list[IO[str]] = []
        for i in range(n):
            stderr: IO[str] | int = subprocess.DEVNULL
            if log_dir is not None:
                log = open(log_dir / f"{module.rsplit('.', 1)[-1]}-{i}.log", "a")  # noqa: SIM115
                self._logs.append(log)
                stderr = log
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", module, *args],
                    cwd=REPO,
                    env=env or python_env(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                )
            )
        deadline = time.monotonic() + ready_timeout
        for proc in self.procs:
            assert proc.stdout is not None
            while True:
                line = proc.stdout.readline()
                if not line:
                    self.kill()
                    raise RuntimeError(f"{module} exited before it was ready")
                if line.strip() == "ready":
                    break
                if time.monotonic() > deadline:
                    self.kill()
                    raise TimeoutError(f"{module} not ready")

    def go(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()

    def stop(self, timeout: float = 60.0) -> list[float]:
        """Stops every process; returns the CPU seconds each used after go."""
        for proc in self.procs:
            assert proc.stdin is not None
            try:
                proc.stdin.write("stop\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        cpu: list[float] = []
        for proc in self.procs:
            assert proc.stdout is not None
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out = proc.stdout.read()
            proc.stdout.close()
            for line in out.splitlines():
                if line.startswith("cpu "):
                    cpu.append(float(line.split()[1]))
        for log in self._logs:
            log.close()
        return cpu

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for log in self._logs:
            log.close()
