"""DBOS on SQLite: workflows of steps in this process; a queue drained by worker
processes (bench.worker_dbos) for the throughput workload."""

from __future__ import annotations

import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSClient

from bench import dbos_app
from bench.common import python_env
from bench.gate import GatedProcesses

RESULT_POLL_SECONDS = 0.005


class System:
    def __init__(self, config: dict[str, Any]) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-dbos-")
        self.url: str = config["url"]
        self.log_dir = Path(config["log_dir"])
        self.database_url = f"sqlite:///{Path(self._tmp.name) / 'dbos.sqlite'}"
        DBOS(config=dbos_app.config(self.database_url))
        DBOS.listen_queues([dbos_app.QUEUE])
        DBOS.launch()
        self.queue = DBOS.register_queue(
            dbos_app.QUEUE, polling_interval_sec=dbos_app.POLLING_SECONDS
        )
        DBOS.register_queue(dbos_app.DRAIN_QUEUE, polling_interval_sec=dbos_app.POLLING_SECONDS)
        self.client = DBOSClient(system_database_url=self.database_url)

    def versions(self) -> dict[str, str]:
        return {"dbos": version("dbos")}

    def _timed(self, fn: Any, *args: Any) -> float:
        started = time.perf_counter()
        fn(*args)
        return (time.perf_counter() - started) * 1000

    def _queued_one(self) -> None:
        self.queue.enqueue(dbos_app.noop_workflow, 1).get_result(
            polling_interval_sec=RESULT_POLL_SECONDS
        )

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        if workload == "http20":
            return {
                "samples": [
                    self._timed(dbos_app.get_workflow, p["steps"], self.url)
                    for _ in range(p["runs"])
                ]
            }
        if workload == "builtin20":
            return {
                "samples": [
                    self._timed(dbos_app.noop_workflow, p["steps"]) for _ in range(p["runs"])
                ]
            }
        if workload == "concurrent":
            started = time.perf_counter()
            handles = [
                DBOS.start_workflow(dbos_app.get_workflow, p["steps"], self.url)
                for _ in range(p["runs"])
            ]
            for h in handles:
                h.get_result(polling_interval_sec=RESULT_POLL_SECONDS)
            return {"value": p["runs"] * p["steps"] / (time.perf_counter() - started)}
        if workload == "worker1":
            return {"samples": [self._timed(self._queued_one) for _ in range(p["runs"])]}
        if workload == "drain":
            return self._drain(p["runs"], p["workers"])
        raise ValueError(workload)

    def _drain(self, n: int, workers: int) -> dict[str, Any]:
        procs = GatedProcesses(
            "bench.worker_dbos",
            [self.database_url],
            workers,
            env=python_env(),
            log_dir=self.log_dir,
        )
        try:
            options: Any = {
                "queue_name": dbos_app.DRAIN_QUEUE,
                "workflow_name": dbos_app.noop_workflow.__qualname__,
            }
            procs.go()
            engine = self.client._sys_db.engine
            with engine.begin() as conn:  # the whole batch becomes visible at commit
                handles = [self.client.enqueue_in_transaction(conn, options, 1) for _ in range(n)]
                started = time.perf_counter()
            for h in handles:
                h.get_result(polling_interval_sec=RESULT_POLL_SECONDS)
            elapsed = time.perf_counter() - started
        finally:
            cpu = procs.stop()
        return {"value": n / elapsed, "worker_cpu_ms": 1000 * sum(cpu) / n}

    def end(self, workload: str) -> None:
        pass

    def close(self) -> None:
        self.client.destroy()
        DBOS.destroy()
        self._tmp.cleanup()
