"""The Task API's hand-offs alone (poll + accepted result), no engine: see
``bench.stepway_setup.TaskApiOnly``."""

from __future__ import annotations

import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.common import python_env
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

    def versions(self) -> dict[str, str]:
        return {"stepway": version("stepway")}

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        if workload != "handoffs":
            raise ValueError(workload)
        n = p["tasks"]
        workers = GatedProcesses(
            "bench.worker_sdk",
            [self.api.url, "bench_handoff"],
            p["workers"],
            env=python_env(),
            log_dir=self.log_dir,
        )
        try:
            self.api.seed("bench_handoff", n)
            before = self.api.signals.results
            cpu0, started = time.process_time(), time.perf_counter()
            workers.go()
            deadline = time.monotonic() + 600
            while self.api.signals.results - before < n:
                if time.monotonic() > deadline:
                    raise TimeoutError("hand-offs not done")
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu0
        finally:
            worker_cpu = workers.stop()
        return {
            "value": n / elapsed,
            "server_cpu_ms": 1000 * cpu / n,
            "worker_cpu_ms": 1000 * sum(worker_cpu) / n,
        }

    def end(self, workload: str) -> None:
        pass

    def close(self) -> None:
        self.api.close()
        self._tmp.cleanup()
