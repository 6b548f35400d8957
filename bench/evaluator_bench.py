"""What an INLINE or JSON_JQ_TRANSFORM step costs: time per step and history events.

    uv run python bench/evaluator_bench.py [--sizes 20,200]

Runs, on one EmbeddedBackend (in this process, over real gRPC) with one engine worker, a
definition of n INLINE tasks (``$.x + 1`` over the previous task's result) and one of n
JSON_JQ_TRANSFORM tasks (``.x + 1``), and prints seconds per run and ms per step.

History events per step are counted on a run short enough to fit one orchestration
execution (fewer steps than the interpreter's continue-as-new interval): the events of a
run of k steps minus those of a run of 0 steps, divided by k, by kind. Every step is one
episode of the orchestration, which the backend brackets with orchestratorStarted and
orchestratorCompleted whatever the step does; the step's own events are the rest.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform as stdlib_platform
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from durabletask.client import OrchestrationStatus

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client, start_worker, stop_worker
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.app.host import (
    LocalSettings,
    build_local_services,
    make_engine_worker,
)
from engine.ports.run_store import NewRun
from engine.runtime.interpreter import STEPS_PER_EXECUTION
from protocol.runs import ORCHESTRATOR_NAME, RunInput


def _task(kind: str, i: int) -> dict[str, Any]:
    previous = f"${{t{i - 1}.output.result}}" if i else 0
    if kind == "INLINE":
        params: dict[str, Any] = {"expression": "$.x + 1", "x": previous}
    else:
        params = {"queryExpression": ".x + 1", "x": previous}
    return {"name": "t", "taskReferenceName": f"t{i}", "type": kind, "inputParameters": params}


def _run(client: Any, services: Any, kind: str, n: int) -> tuple[str, float]:
    name = f"bench_{kind.lower()}_{n}"
    definition = {"name": name, "tasks": [_task(kind, i) for i in range(n)]}
    now = int(time.time() * 1000)
    services.run_store.put_definition(name, 1, definition, now)
    services.definitions.invalidate(name)
    workflow_id = f"{name}-{time.time_ns()}"
    started = time.perf_counter()
    services.run_store.create_run(NewRun(workflow_id=workflow_id, name=name, version=1,
                                         create_time=now))  # fmt: skip
    client.schedule_new_orchestration(
        ORCHESTRATOR_NAME,
        input=RunInput(name=name, version=1).model_dump(mode="json", by_alias=True),
        instance_id=workflow_id,
    )
    state = client.wait_for_orchestration_completion(workflow_id, timeout=900)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED, state
    run = services.run_store.get_run(workflow_id)
    assert run is not None and run.status == "COMPLETED", run
    return workflow_id, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,200")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    logging.disable(logging.WARNING)

    with tempfile.TemporaryDirectory() as tmp, EmbeddedBackend() as backend:
        config = BackendConfig.embedded(backend.address)
        services = build_local_services(LocalSettings(data_dir=Path(tmp)), config)
        worker = make_engine_worker(config, services)
        start_worker(worker)
        client = make_client(config)

        def events(workflow_id: str) -> Counter[str]:
            history = backend.servicer._instances[workflow_id].history
            return Counter(str(event.WhichOneof("eventType")) for event in history)

        try:
            print(f"machine: {os.cpu_count()} cores, {stdlib_platform.platform()}, "
                  f"Python {stdlib_platform.python_version()}")  # fmt: skip
            k = min(10, STEPS_PER_EXECUTION - 1)
            for kind in ("INLINE", "JSON_JQ_TRANSFORM"):
                _run(client, services, kind, 1)  # warm up (definition load, evaluators)
                empty, _ = _run(client, services, kind, 0)
                short, _ = _run(client, services, kind, k)
                added = events(short)
                added.subtract(events(empty))
                kinds = ", ".join(f"{name} {n / k:g}" for name, n in sorted(added.items()) if n)
                print(f"{kind}: {added.total() / k:g} history events per step ({kinds})")
                for n in sizes:
                    _, seconds = _run(client, services, kind, n)
                    print(f"{kind}: {n:>5} steps {seconds:>7.2f} s {1000 * seconds / n:>7.1f} "
                          "ms/step", flush=True)  # fmt: skip
        finally:
            stop_worker(worker)
            client.close()
            services.close()


if __name__ == "__main__":
    main()
