"""Stepway's workloads, driven through its public surfaces (bench.stepway_setup)."""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench import history
from bench.common import python_env
from bench.gate import GatedProcesses
from bench.probe_reads import ReadProbe, read_path
from bench.start_burst import start_burst
from bench.stepway_setup import StepwayDev


def _task(kind: str, i: int, url: str) -> dict[str, Any]:
    """Step ``i`` of a definition whose steps are all of ``kind``."""
    ref = f"s{i}"
    base: dict[str, Any] = {"name": ref, "taskReferenceName": ref}
    if kind == "HTTP":
        return {
            **base,
            "type": "HTTP",
            "inputParameters": {"http_request": {"uri": url, "method": "GET"}},
        }
    if kind == "INLINE":
        return {
            **base,
            "type": "INLINE",
            "inputParameters": {"evaluatorType": "javascript", "expression": "$.a + 1", "a": i},
        }
    if kind == "JSON_JQ_TRANSFORM":
        return {
            **base,
            "type": "JSON_JQ_TRANSFORM",
            "inputParameters": {"queryExpression": "{b: (.a + 1)}", "a": i},
        }
    if kind == "SET_VARIABLE":
        return {**base, "type": "SET_VARIABLE", "inputParameters": {f"v{i}": i}}
    if kind == "SWITCH":
        return {
            **base,
            "type": "SWITCH",
            "evaluatorType": "value-param",
            "expression": "k",
            "inputParameters": {"k": "x"},
            "decisionCases": {"y": []},
            "defaultCase": [],
        }
    if kind == "WAIT":
        return {**base, "type": "WAIT", "inputParameters": {"duration": "1s"}}
    if kind == "SUB_WORKFLOW":
        return {
            **base,
            "type": "SUB_WORKFLOW",
            "subWorkflowParam": {"name": "bench_child", "version": 1},
        }
    if kind.startswith("WORKER:"):
        return {**base, "name": kind.split(":", 1)[1], "type": "WORKER", "inputParameters": {}}
    raise ValueError(kind)


HISTORY_KINDS = {
    "worker": "WORKER:bench_hist",
    "http": "HTTP",
    "inline": "INLINE",
    "jq": "JSON_JQ_TRANSFORM",
    "set_variable": "SET_VARIABLE",
    "switch": "SWITCH",
    "wait": "WAIT",
    "sub_workflow": "SUB_WORKFLOW",
}


class System:
    def __init__(self, config: dict[str, Any]) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-stepway-")
        self.root = Path(self._tmp.name)
        self.url: str = config["url"]
        self.log_dir = Path(config["log_dir"])
        self.sw = StepwayDev(
            self.root, http=config.get("http", "auto"), loop=config.get("loop", "auto")
        )
        self._defined: set[str] = set()
        self._workers: dict[str, GatedProcesses] = {}
        self.sw.put_workflow({"name": "bench_child", "tasks": [_task("SET_VARIABLE", 0, "")]})

    def versions(self) -> dict[str, str]:
        import uvicorn

        http = "httptools" if _installed("httptools") else "h11"
        return {
            "stepway": version("stepway"),
            "durabletask": version("durabletask"),
            "uvicorn": f"{uvicorn.__version__} ({http})",
        }

    # --- helpers -----------------------------------------------------------------------

    def _define(self, name: str, kind: str, steps: int) -> str:
        if name not in self._defined:
            if kind.startswith("WORKER:"):
                self.sw.put_taskdef(kind.split(":", 1)[1])
            tasks = [_task(kind, i, self.url) for i in range(steps)]
            self.sw.put_workflow({"name": name, "tasks": tasks})
            self._defined.add(name)
        return name

    def _workers_for(self, key: str, module: str, args: list[str], n: int) -> GatedProcesses:
        """Long-lived gated workers (kept until the workload ends)."""
        if key not in self._workers:
            procs = GatedProcesses(module, args, n, env=python_env(), log_dir=self.log_dir)
            procs.go()
            self._workers[key] = procs
        return self._workers[key]

    def _timed_run(self, name: str) -> float:
        started = time.perf_counter()
        run_id = self.sw.start(name)
        self.sw.wait(run_id)
        elapsed = (time.perf_counter() - started) * 1000
        status = self.sw.status(run_id)
        if status != "COMPLETED":
            raise RuntimeError(f"run {run_id} of {name} ended {status}")
        return elapsed

    # --- workloads ---------------------------------------------------------------------

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, f"w_{workload}")(variant, p)  # type: ignore[no-any-return]

    def w_http20(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        name = self._define(f"bench_http_{p['steps']}", "HTTP", p["steps"])
        return {"samples": [self._timed_run(name) for _ in range(p["runs"])]}

    def w_builtin20(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        kind = {"inline": "INLINE", "jq": "JSON_JQ_TRANSFORM"}[variant]
        name = self._define(f"bench_{variant}_{p['steps']}", kind, p["steps"])
        return {"samples": [self._timed_run(name) for _ in range(p["runs"])]}

    def w_concurrent(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        name = self._define(f"bench_http_{p['steps']}", "HTTP", p["steps"])
        started = time.perf_counter()
        ids = [self.sw.start(name) for _ in range(p["runs"])]
        for i in ids:
            self.sw.wait(i)
        elapsed = time.perf_counter() - started
        statuses = [self.sw.status(i) for i in ids]
        if any(s != "COMPLETED" for s in statuses):
            raise RuntimeError(f"runs ended {Counter(statuses)}")
        return {"value": p["runs"] * p["steps"] / elapsed}

    def w_worker1(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        task_type = f"bench_{variant}1"
        name = self._define(f"bench_{variant}_w1", f"WORKER:{task_type}", 1)
        module = "bench.worker_sdk" if variant == "sdk" else "bench.worker_plain"
        self._workers_for(variant, module, [self.sw.url, task_type], 1)
        return {"samples": [self._timed_run(name) for _ in range(p["runs"])]}

    def w_worker20(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        name = self._define(f"bench_sdk_w{p['steps']}", "WORKER:bench_sdk20", p["steps"])
        self._workers_for("sdk20", "bench.worker_sdk", [self.sw.url, "bench_sdk20"], 1)
        return {"samples": [self._timed_run(name) / p["steps"] for _ in range(p["runs"])]}

    def w_drain(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        """``runs`` one-step runs started and queued first; then ``workers`` SDK worker
        processes are let go together; measured from go to the last run's end."""
        n = p["runs"]
        name = self._define("bench_drain", "WORKER:bench_drain", 1)
        workers = GatedProcesses(
            "bench.worker_sdk",
            [self.sw.url, "bench_drain"],
            p["workers"],
            env=python_env(),
            log_dir=self.log_dir,
        )
        probe: ReadProbe | None = None
        try:
            ids = [self.sw.start(name) for _ in range(n)]
            deadline = time.monotonic() + 600
            while self.sw.queued("bench_drain") < n:
                if time.monotonic() > deadline:
                    raise TimeoutError("runs not queued")
                time.sleep(0.05)
            probe = ReadProbe(self.sw.url, read_path(ids[-1]), self.log_dir)
            cpu0, started = time.process_time(), time.perf_counter()
            workers.go()
            probe.go()
            self.sw.wait_ended(ids)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu0
            reads = probe.stop()
        finally:
            worker_cpu = workers.stop()
            if probe is not None:
                probe.close()
        statuses = [self.sw.status(i) for i in ids]
        if any(s != "COMPLETED" for s in statuses):
            raise RuntimeError(f"runs ended {Counter(statuses)}")
        return {
            "value": n / elapsed,
            "server_cpu_ms": 1000 * cpu / n,
            "worker_cpu_ms": 1000 * sum(worker_cpu) / n,
            **reads,
        }

    def w_starts(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        """``runs`` starts of a 3-step WORKER workflow fired at once by a client process,
        served by ``workers`` SDK worker processes."""
        name = self._define(f"bench_start{p['steps']}", "WORKER:bench_start", p["steps"])
        return start_burst(
            self.sw.url, name, "bench_start", p, self.log_dir, wait=self.sw.wait, run=self.sw.run
        )

    def w_history(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        """Events and billable actions per step of one kind: runs of 1 and 1+k steps of
        that kind, the difference divided by k (no continue-as-new in between)."""
        kind = HISTORY_KINDS[variant]
        if kind.startswith("WORKER:"):
            # The worker answers after 50 ms, so that each step's result comes in an
            # episode of its own. (Where the dispatch was an activity, a result that came
            # before its completion ended a run's last step without it, and one run
            # doing so and the other not put a whole event more or less on k steps.)
            self._workers_for(
                "hist", "bench.worker_sdk", [self.sw.url, "bench_hist", "1", "0.05"], 1
            )
        k = p["k"]
        counts = []
        for steps in (1, 1 + k):
            name = self._define(f"bench_hist_{variant}_{steps}", kind, steps)
            run_id = self.sw.start(name)
            self.sw.wait(run_id)
            if self.sw.status(run_id) != "COMPLETED":
                raise RuntimeError(f"history run {run_id} did not complete")
            events = self.sw.history(run_id)
            if history.continued(events):
                raise RuntimeError("the run continued as new: choose a smaller k")
            for child in history.children(events):
                events += self.sw.history(child)
            counts.append(history.count(events))
        diff = Counter({t: counts[1][t] - counts[0][t] for t in counts[1] | counts[0]})
        return {
            "events": sum(diff.values()) / k,
            "actions": history.actions(diff) / k,
            "step_events": history.without_bookends(diff) / k,
            "by_type": {t: n / k for t, n in sorted(diff.items()) if n},
        }

    def w_scaling(self, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        name = self._define(f"bench_http_{p['steps']}", "HTTP", p["steps"])
        return {"value": self._timed_run(name) / p["steps"]}

    # --- lifecycle ---------------------------------------------------------------------

    def end(self, workload: str) -> None:
        for procs in self._workers.values():
            procs.stop()
        self._workers.clear()

    def close(self) -> None:
        self.end("")
        self.sw.close()
        self._tmp.cleanup()


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
