"""Stepway in the deployed shape on one machine: the control plane (``stepway serve``)
and the engine (``stepway engine --role all``) as processes of their own, configured by
environment variables as on Azure, on an embedded durable backend this process hosts and
a shared SQLite data directory (as ``tests/e2e/test_deployed_processes.py`` runs them).

Unlike ``stepway dev`` (``bench/sys_stepway.py``), the Task API, the engine and the
backend's gRPC server do not share one GIL; the SQLite queue wakes a long poll of
another process by ringing its doorbell (``engine/adapters/queue_doorbell.py``), where on
Azure Service Bus delivers.
Server CPU counts all three processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx

from bench.common import REPO, free_port, python_env
from bench.gate import GatedProcesses
from bench.probe_reads import ReadProbe, read_path
from bench.start_burst import start_burst
from bench.stepway_setup import (
    backend_client,
    embedded_backend,
    wait_runs_ended,
)
from bench.sys_stepway import _task


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class System:
    def __init__(self, config: dict[str, Any]) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-split-")
        tmp = Path(self._tmp.name)
        self._data_dir = tmp / "data"
        self.log_dir = Path(config["log_dir"])
        self.backend = embedded_backend()
        address = self.backend.address
        self.client = backend_client(address)
        port = free_port()
        env = python_env(
            STEPWAY_DATA_DIR=str(self._data_dir),
            STEPWAY_BACKEND_KIND="embedded",
            STEPWAY_BACKEND_ADDRESS=address,
            STEPWAY_PAYLOAD_SECRET="b" * 64,
        )
        env = {k: v for k, v in env.items() if not k.startswith("AZURE_")}
        self.procs = {
            "serve": self._spawn(
                ["serve"],
                {
                    **env,
                    "STEPWAY_AUTH_MODE": "none",
                    "STEPWAY_HOST": "127.0.0.1",
                    "STEPWAY_PORT": str(port),
                },
            ),
            "engine": self._spawn(["engine", "--role", "all"], env),
        }
        self.url = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(base_url=self.url, timeout=30)
        deadline = time.monotonic() + 120
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"stepway {name} exited {proc.returncode}")
            try:
                if self.http.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the control plane did not come up")
            time.sleep(0.2)
        self._defined: set[str] = set()
        self._worker: GatedProcesses | None = None

    def _spawn(self, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"split-{args[0]}.log").open("wb")
        return subprocess.Popen(
            [sys.executable, "-m", "control_plane.cli", *args],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def versions(self) -> dict[str, str]:
        return {"stepway": version("stepway")}

    def _cpu_by_process(self) -> dict[str, float]:
        """CPU seconds so far of each server process: the backend (this process, which
        hosts the embedded durable backend), ``stepway serve`` and ``stepway engine``."""
        return {
            "backend": time.process_time(),
            **{name: _cpu_seconds(p.pid) for name, p in self.procs.items()},
        }

    def _check(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text}")
        return response

    def _status(self, workflow_id: str) -> str:
        r = self._check(
            self.http.get(f"/api/workflow/{workflow_id}", params={"includeTasks": False})
        )
        return str(r.json()["status"])

    def _define_workers(self, name: str, task_type: str, steps: int) -> None:
        """A workflow ``name`` of ``steps`` WORKER steps of ``task_type``."""
        if name in self._defined:
            return
        self._check(
            self.http.put(
                "/api/metadata/taskdefs",
                json={"name": task_type, "retryCount": 0, "responseTimeoutSeconds": 300},
            )
        )
        tasks = [_task(f"WORKER:{task_type}", i, "") for i in range(steps)]
        self._check(self.http.put("/api/metadata/workflow", json=[{"name": name, "tasks": tasks}]))
        self._defined.add(name)

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        if workload == "worker20":
            return self._worker20(p)
        if workload == "drain":
            return self._drain(p)
        if workload == "starts":
            name = f"bench_split_start{p['steps']}"
            self._define_workers(name, "bench_split_start", p["steps"])
            return start_burst(
                self.url,
                name,
                "bench_split_start",
                p,
                self.log_dir,
                wait=lambda i: self.client.wait_for_orchestration_completion(i, timeout=600),
                run=lambda i: self._check(
                    self.http.get(f"/api/workflow/{i}", params={"includeTasks": False})
                ).json(),
            )
        raise ValueError(workload)

    def _worker20(self, p: dict[str, Any]) -> dict[str, Any]:
        """As ``stepway dev``'s cell: ms per step of a run of WORKER steps served by one
        SDK worker process; here the Task API's poll waits in another process than the
        engine's dispatch that queues the task."""
        name = f"bench_split_w{p['steps']}"
        self._define_workers(name, "bench_split20", p["steps"])
        if self._worker is None:
            self._worker = GatedProcesses(
                "bench.worker_sdk",
                [self.url, "bench_split20"],
                1,
                env=python_env(),
                log_dir=self.log_dir,
            )
            self._worker.go()
        samples = []
        for _ in range(p["runs"]):
            started = time.perf_counter()
            workflow_id = self._check(self.http.post(f"/api/workflow/{name}", json={})).text
            self.client.wait_for_orchestration_completion(workflow_id, timeout=600)
            samples.append((time.perf_counter() - started) * 1000 / p["steps"])
            if (status := self._status(workflow_id)) != "COMPLETED":
                raise RuntimeError(f"run {workflow_id} ended {status}")
        return {"samples": samples}

    def _drain(self, p: dict[str, Any]) -> dict[str, Any]:
        n = p["runs"]
        self._define_workers("bench_drain", "bench_drain", 1)
        workers = GatedProcesses(
            "bench.worker_sdk",
            [self.url, "bench_drain"],
            p["workers"],
            env=python_env(),
            log_dir=self.log_dir,
        )
        probe: ReadProbe | None = None
        try:
            ids = [
                self._check(self.http.post("/api/workflow/bench_drain", json={})).text
                for _ in range(n)
            ]
            deadline = time.monotonic() + 600
            while True:
                size = self._check(
                    self.http.get("/api/tasks/queue/size", params={"taskType": "bench_drain"})
                ).json()
                if int(size) >= n:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("runs not queued")
                time.sleep(0.05)
            probe = ReadProbe(self.url, read_path(ids[-1]), self.log_dir)
            cpu0, started = self._cpu_by_process(), time.perf_counter()
            workers.go()
            probe.go()
            # the run store STEPWAY_DATA_DIR names (engine/app/config.py)
            wait_runs_ended(self._data_dir / "runs.db", ids)
            elapsed = time.perf_counter() - started
            cpu1 = self._cpu_by_process()
            by_process = {name: cpu1[name] - cpu0[name] for name in cpu0}
            reads = probe.stop()
        finally:
            worker_cpu = workers.stop()
            if probe is not None:
                probe.close()
        statuses = Counter(self._status(i) for i in ids)
        if statuses != Counter({"COMPLETED": n}):
            raise RuntimeError(f"runs ended {statuses}")
        return {
            "value": n / elapsed,
            "server_cpu_ms": 1000 * sum(by_process.values()) / n,
            **{f"{name}_cpu_ms": 1000 * used / n for name, used in by_process.items()},
            "worker_cpu_ms": 1000 * sum(worker_cpu) / n,
            **reads,
        }

    def end(self, workload: str) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    def close(self) -> None:
        self.end("")
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.http.close()
        self.client.close()
        self.backend.stop()
        self._tmp.cleanup()
