"""The floor: hand-written durabletask orchestrations on the same embedded backend as
Stepway (in its own process): what any engine on this backend pays at the least."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Generator
from importlib.metadata import version
from typing import Any

import httpx
from durabletask import task as dt
from durabletask.client import OrchestrationStatus, TaskHubGrpcClient
from durabletask.worker import TaskHubGrpcWorker

from bench import history
from bench.stepway_setup import embedded_backend


def floor_sequence(ctx: dt.OrchestrationContext, data: dict[str, Any]) -> Generator[Any, Any, int]:
    """``n`` activities in a row: ``floor_get`` of ``url``, or ``floor_noop``."""
    for i in range(int(data["n"])):
        if data.get("url"):
            yield ctx.call_activity("floor_get", input=data["url"])
        else:
            yield ctx.call_activity("floor_noop", input=i)
    return int(data["n"])


class System:
    def __init__(self, config: dict[str, Any]) -> None:
        self.url: str = config["url"]
        self.backend = embedded_backend()
        http = httpx.Client(timeout=30)
        self._http = http

        def floor_get(ctx: dt.ActivityContext, url: str) -> dict[str, Any]:
            response = http.get(url)
            return {"statusCode": response.status_code, "body": response.text}

        def floor_noop(ctx: dt.ActivityContext, value: Any) -> Any:
            return value

        self.worker = TaskHubGrpcWorker(host_address=self.backend.address, secure_channel=False)
        self.worker.add_orchestrator(floor_sequence)
        self.worker.add_activity(floor_get)
        self.worker.add_activity(floor_noop)
        self.worker.start()
        self.client = TaskHubGrpcClient(host_address=self.backend.address, secure_channel=False)

    def versions(self) -> dict[str, str]:
        return {"durabletask": version("durabletask")}

    def _start(self, n: int, http: bool) -> str:
        data = {"n": n, "url": self.url if http else None}
        return str(self.client.schedule_new_orchestration(floor_sequence, input=data))

    def _wait(self, instance_id: str) -> None:
        state = self.client.wait_for_orchestration_completion(instance_id, timeout=900)
        if state is None or state.runtime_status != OrchestrationStatus.COMPLETED:
            raise RuntimeError(f"{instance_id}: {state}")

    def _timed(self, n: int, http: bool) -> float:
        started = time.perf_counter()
        self._wait(self._start(n, http))
        return (time.perf_counter() - started) * 1000

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        if workload == "http20":
            return {"samples": [self._timed(p["steps"], True) for _ in range(p["runs"])]}
        if workload == "builtin20":
            return {"samples": [self._timed(p["steps"], False) for _ in range(p["runs"])]}
        if workload == "concurrent":
            started = time.perf_counter()
            ids = [self._start(p["steps"], True) for _ in range(p["runs"])]
            for i in ids:
                self._wait(i)
            return {"value": p["runs"] * p["steps"] / (time.perf_counter() - started)}
        if workload == "scaling":
            return {"value": self._timed(p["steps"], True) / p["steps"]}
        if workload == "history":
            k = p["k"]
            counts = []
            for n in (1, 1 + k):
                instance_id = self._start(n, True)
                self._wait(instance_id)
                counts.append(history.count(self.client.get_orchestration_history(instance_id)))
            diff = Counter({t: counts[1][t] - counts[0][t] for t in counts[1] | counts[0]})
            return {
                "events": sum(diff.values()) / k,
                "actions": history.actions(diff) / k,
                "step_events": history.without_bookends(diff) / k,
                "by_type": {t: n / k for t, n in sorted(diff.items()) if n},
            }
        raise ValueError(workload)

    def end(self, workload: str) -> None:
        pass

    def close(self) -> None:
        self.worker.stop()
        self.client.close()
        self.backend.stop()
        self._http.close()
