"""Long runs stay cheap per step: the interpreter bounds its history with continue-as-new.

A 5,000-iteration DO_WHILE of an inline task (whose rows, decided in one go, are too many
for one orchestration message: recorded in parts), and a 1,000-step sequence of HTTP tasks
against a local server (each step a real activity round trip through the backend)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from engine.adapters.backend.embedded import EmbeddedBackend
from engine.language.definitions import RunStatus, TaskStatus
from engine.runtime.interpreter import STEPS_PER_EXECUTION


class _Empty(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Empty)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _HistoryWatch:
    """Samples the backend's history length of one instance while it runs."""

    def __init__(self, backend: EmbeddedBackend, instance_id: str) -> None:
        self.servicer = backend.servicer
        self.instance_id = instance_id
        self.longest = 0
        #: samples that found the instance
        self.seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with self.servicer._lock:
                instance = self.servicer._instances.get(self.instance_id)
                if instance is not None:
                    self.seen += 1
                    self.longest = max(self.longest, len(instance.history))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.longest


def _executions(platform: Any, workflow_id: str) -> int:
    state = platform.client.get_orchestration_state(workflow_id)
    return int(json.loads(state.serialized_input).get("executions", 0))


@pytest.mark.slow
def test_five_thousand_iteration_loop_records_every_row(platform: Any) -> None:
    """Every iteration is a SET_VARIABLE decided in the same step: the run's rows come to
    about 2.5 MB, above the 1 MiB of an orchestration message, and the run still
    completes with every row recorded (it used to fail at about 2,050 iterations with
    "the end of the run would be an orchestration message of ... bytes")."""
    platform.register(
        {
            "name": "long_loop",
            "tasks": [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "$.loop['iteration'] < 5000",
                    "loopOver": [
                        {
                            "name": "count",
                            "taskReferenceName": "count",
                            "type": "SET_VARIABLE",
                            "inputParameters": {"n": "${loop.output.iteration}"},
                        }
                    ],
                }
            ],
            "outputParameters": {"n": "${workflow.variables.n}", "it": "${loop.output.iteration}"},
        }
    )
    started = time.monotonic()
    workflow_id = platform.start("long_loop")
    run = platform.wait(workflow_id, timeout=120)
    elapsed = time.monotonic() - started
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"n": 5000, "it": 5000}
    rows = platform.tasks(workflow_id)
    assert rows["count__5000"].status == TaskStatus.COMPLETED
    assert len(rows) == 5001
    assert all(rows[f"count__{n}"].status == TaskStatus.COMPLETED for n in (1, 2500))
    print(f"5,000 iterations in {elapsed:.1f} s")  # speed is measured in bench/


@pytest.mark.slow
def test_thousand_step_sequence_keeps_history_bounded(
    platform: Any, backend: EmbeddedBackend, http_url: str
) -> None:
    steps = 1000
    platform.register(
        {
            "name": "long_sequence",
            "tasks": [
                {
                    "name": "ping",
                    "taskReferenceName": f"ping{i}",
                    "type": "HTTP",
                    "inputParameters": {"http_request": {"uri": http_url, "method": "GET"}},
                }
                for i in range(steps)
            ],
            "outputParameters": {"last": f"${{ping{steps - 1}.output.response.statusCode}}"},
        }
    )
    started = time.monotonic()
    workflow_id = platform.start("long_sequence")
    watch = _HistoryWatch(backend, workflow_id)
    run = platform.wait(workflow_id, timeout=150)
    longest = watch.stop()
    elapsed = time.monotonic() - started
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"last": 200}
    assert _executions(platform, workflow_id) >= steps // STEPS_PER_EXECUTION - 1
    # one execution holds about STEPS_PER_EXECUTION steps of a few events each (none
    # where the steps are done in the work items that reach them, as here: the engine
    # hosts the activities too)
    assert watch.seen > 0 and longest < 20 * STEPS_PER_EXECUTION, (watch.seen, longest)
    rows = platform.tasks(workflow_id)
    assert len(rows) == steps
    assert all(r.status == TaskStatus.COMPLETED for r in rows.values())
    print(f"\n{steps} HTTP steps: {elapsed:.1f} s, {1000 * elapsed / steps:.1f} ms/step, "
          f"longest history {longest} events")  # fmt: skip
