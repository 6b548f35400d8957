"""Time per step of the interpreter against a hand-written durabletask orchestration.

    uv run python bench/interpreter_bench.py [--sizes 10,100,1000]

Both run on one EmbeddedBackend (in this process, over real gRPC) with one engine worker.
A step is one trivial activity that does I/O: a GET of ``{}`` from a local HTTP server.

* Stepway: a definition of n HTTP tasks run by the WorkflowInterpreter (records its task
  rows in the SQLite run store, bounds its history with continue-as-new).
* Baseline: an orchestration that calls an activity doing the same GET n times in a row
  (no records, no continue-as-new).

Prints seconds per run, ms per step and the ratio Stepway / baseline per size.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform as stdlib_platform
import tempfile
import threading
import time
import urllib.request
from collections.abc import Generator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from durabletask import task as dt
from durabletask.client import OrchestrationStatus

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_worker, register, start_worker, stop_worker
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.app.host import LocalSettings, build_local_services, make_engine_client
from engine.ports.run_store import NewRun
from engine.runtime.registry import activities, orchestrators
from protocol.runs import ORCHESTRATOR_NAME, RunInput


class _Empty(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


def bench_get(ctx: dt.ActivityContext, url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return {"statusCode": response.status, "body": response.read().decode()}


def bench_sequence(ctx: dt.OrchestrationContext, data: dict[str, Any]) -> Generator[Any, Any, int]:
    for _ in range(int(data["n"])):
        yield ctx.call_activity("bench_get", input=data["url"])
    return int(data["n"])


def _wait(client: Any, instance_id: str) -> None:
    state = client.wait_for_orchestration_completion(instance_id, timeout=900)
    assert state is not None and state.runtime_status == OrchestrationStatus.COMPLETED, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    logging.disable(logging.WARNING)

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Empty)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"

    with tempfile.TemporaryDirectory() as tmp, EmbeddedBackend() as backend:
        config = BackendConfig.embedded(backend.address)
        services = build_local_services(LocalSettings(data_dir=Path(tmp)), config)
        worker = make_worker(config)
        register(
            worker,
            "all",
            {**orchestrators(services), "bench_sequence": bench_sequence},
            {**activities(services), "bench_get": bench_get},
        )
        start_worker(worker)
        client = make_engine_client(config)
        try:
            print(f"machine: {os.cpu_count()} cores, {stdlib_platform.platform()}, "
                  f"Python {stdlib_platform.python_version()}")  # fmt: skip
            print(f"{'steps':>6} {'stepway s':>10} {'ms/step':>8} {'baseline s':>11} "
                  f"{'ms/step':>8} {'ratio':>6}")  # fmt: skip
            for n in sizes:
                name = f"bench_{n}"
                definition = {
                    "name": name,
                    "tasks": [
                        {
                            "name": "get",
                            "taskReferenceName": f"get{i}",
                            "type": "HTTP",
                            "inputParameters": {"http_request": {"uri": url}},
                        }
                        for i in range(n)
                    ],
                }
                services.run_store.put_definition(name, 1, definition, int(time.time() * 1000))
                workflow_id = f"{name}-{time.time_ns()}"
                started = time.perf_counter()
                services.run_store.create_run(
                    NewRun(workflow_id=workflow_id, name=name, version=1,
                           create_time=int(time.time() * 1000))
                )  # fmt: skip
                client.schedule_new_orchestration(
                    ORCHESTRATOR_NAME,
                    input=RunInput(name=name, version=1).wire(),
                    instance_id=workflow_id,
                )
                _wait(client, workflow_id)
                stepway = time.perf_counter() - started

                started = time.perf_counter()
                baseline_id = client.schedule_new_orchestration(
                    "bench_sequence", input={"n": n, "url": url}
                )
                _wait(client, baseline_id)
                baseline = time.perf_counter() - started
                print(
                    f"{n:>6} {stepway:>10.2f} {1000 * stepway / n:>8.1f} {baseline:>11.2f} "
                    f"{1000 * baseline / n:>8.1f} {stepway / baseline:>6.2f}",
                    flush=True,
                )
        finally:
            stop_worker(worker)
            client.close()
            server.shutdown()


if __name__ == "__main__":
    main()
