"""Huey on SQLite: a plain task queue (no workflow), consumer processes of its own."""

from __future__ import annotations

import os
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.common import python_env
from bench.gate import GatedProcesses

RESULT_POLL_SECONDS = 0.001


class System:
    def __init__(self, config: dict[str, Any]) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-huey-")
        self.log_dir = Path(config["log_dir"])
        self.env = python_env(BENCH_HUEY_DB=str(Path(self._tmp.name) / "huey.db"))
        os.environ["BENCH_HUEY_DB"] = self.env["BENCH_HUEY_DB"]
        from bench import huey_app

        self.app = huey_app
        self._consumer: GatedProcesses | None = None

    def versions(self) -> dict[str, str]:
        return {"huey": version("huey")}

    def _get(self, result: Any) -> None:
        result.get(blocking=True, timeout=300, backoff=1.0, max_delay=RESULT_POLL_SECONDS)

    def _one(self) -> float:
        started = time.perf_counter()
        self._get(self.app.noop(1))
        return (time.perf_counter() - started) * 1000

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        if workload == "worker1":
            if self._consumer is None:
                self._consumer = GatedProcesses(
                    "bench.worker_huey", ["1"], 1, env=self.env, log_dir=self.log_dir
                )
                self._consumer.go()
            return {"samples": [self._one() for _ in range(p["runs"])]}
        if workload == "drain":
            n = p["runs"]
            consumer = GatedProcesses(
                "bench.worker_huey", [str(p["workers"])], 1, env=self.env, log_dir=self.log_dir
            )
            try:
                results = [self.app.noop(i) for i in range(n)]
                started = time.perf_counter()
                consumer.go()
                for r in results:
                    self._get(r)
                elapsed = time.perf_counter() - started
            finally:
                cpu = consumer.stop()
            return {"value": n / elapsed, "worker_cpu_ms": 1000 * sum(cpu) / n}
        raise ValueError(workload)

    def end(self, workload: str) -> None:
        if self._consumer is not None:
            self._consumer.stop()
            self._consumer = None

    def close(self) -> None:
        self.end("")
        self._tmp.cleanup()
