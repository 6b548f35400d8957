"""The Task API's hand-offs alone (poll + accepted result), no engine: see
``bench.stepway_setup.TaskApiOnly``. Variant ``sdk``: one Task API process (this one)
and every worker polls it; ``two``: a second Task API process over the same data
directory (``bench.taskapi_child``), half of the workers polling each, as two replicas
of ``stepway serve`` on one SQLite data directory."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.common import python_env, wait_until
from bench.gate import GatedProcesses
from bench.stepway_setup import TaskApiOnly


class System:
    def __init__(self, config: dict[str, Any]) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-taskapi-")
        self.log_dir = Path(config["log_dir"])
        self.api = TaskApiOnly(
            Path(self._tmp.name), http=config.get("http", "auto"), loop=config.get("loop", "auto")
        )
        self.api.put_taskdef("bench_handoff")
        self._second: subprocess.Popen[str] | None = None
        self._second_url = ""

    def versions(self) -> dict[str, str]:
        return {"stepway": version("stepway")}

    def _second_api(self) -> tuple[subprocess.Popen[str], str]:
        if self._second is None:
            self._second = subprocess.Popen(
                [sys.executable, "-m", "bench.taskapi_child", self._tmp.name],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=python_env(),
            )
            assert self._second.stdout is not None
            self._second_url = self._second.stdout.readline().strip()
            if not self._second_url:
                raise RuntimeError("the second Task API process did not start")
        return self._second, self._second_url

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        if workload != "handoffs":
            raise ValueError(workload)
        n = p["tasks"]
        second = None
        results = self.api.signals.results
        if variant == "two":
            second, url = self._second_api()
            urls = [self.api.url, url]

            def done() -> bool:
                # the results each process accepted: its own count, asked of the second
                # over its stdin (a pipe round trip; no read of the run store)
                return self.api.signals.results - results + _ask_count(second) >= n

        else:
            urls = [self.api.url]

            def done() -> bool:
                return self.api.signals.results - results >= n

        share = max(1, p["workers"] // len(urls))
        groups = [
            GatedProcesses(
                "bench.worker_sdk",
                [url, "bench_handoff"],
                share,
                env=python_env(),
                log_dir=self.log_dir,
            )
            for url in urls
        ]
        worker_cpu: list[float] = []
        try:
            self.api.seed("bench_handoff", n)
            if second is not None:
                _tell(second, "go")
            cpu0, started = time.process_time(), time.perf_counter()
            for group in groups:
                group.go()
            wait_until(done, 600, interval=0.005)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu0
            if second is not None:
                _tell(second, "stop")
                assert second.stdout is not None
                cpu += float(second.stdout.readline())
        finally:
            for group in groups:
                worker_cpu += group.stop()
        return {
            "value": n / elapsed,
            "server_cpu_ms": 1000 * cpu / n,
            "worker_cpu_ms": 1000 * sum(worker_cpu) / n,
        }

    def end(self, workload: str) -> None:
        pass

    def close(self) -> None:
        if self._second is not None:
            assert self._second.stdin is not None
            self._second.stdin.close()
            try:
                self._second.wait(30)
            except subprocess.TimeoutExpired:
                self._second.kill()
        self.api.close()
        self._tmp.cleanup()


def _tell(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


def _ask_count(process: subprocess.Popen[str]) -> int:
    _tell(process, "count")
    assert process.stdout is not None
    return int(process.stdout.readline())
