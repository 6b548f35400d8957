"""A gated process that reads one API path at a steady pace and times each answer:
``python -m bench.probe_reads URL PATH OUT [INTERVAL_MS]``.

What a user of the API sees while the platform is busy (the drain): after ``go`` it
sends ``GET PATH`` every ``INTERVAL_MS`` (25) over one kept-alive connection, one
request at a time, until ``stop``; then it writes the answers' latencies in ms, one per
line, to ``OUT`` and reports its CPU (bench/gate.py). A request whose answer is not 200
ends the probe with an error instead of a latency."""

from __future__ import annotations

import http.client
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.common import percentile, python_env
from bench.gate import Gate, GatedProcesses


def read_path(workflow_id: str) -> str:
    """The read the probe makes: a run's status, as a client waiting for it reads it."""
    return f"/api/workflow/{workflow_id}?includeTasks=false"


class ReadProbe:
    """The parent side: one probe process reading ``path`` of the API at ``url``, ready
    once built; :meth:`go` with the workload, :meth:`stop` after it for the latencies'
    median and p99 (``read_p50_ms``, ``read_p99_ms``) and their number (``reads``)."""

    def __init__(self, url: str, path: str, log_dir: Path | None = None) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="bench-probe-")
        self._out = Path(self._dir.name) / "latencies"
        self._procs = GatedProcesses(
            "bench.probe_reads", [url, path, str(self._out)], 1, env=python_env(), log_dir=log_dir
        )

    def go(self) -> None:
        self._procs.go()

    def close(self) -> None:
        """Kill the probe if it still runs (a workload that failed); idempotent."""
        self._procs.kill()
        self._dir.cleanup()

    def stop(self) -> dict[str, Any]:
        self._procs.stop()
        try:
            lines = self._out.read_text().splitlines() if self._out.exists() else []
        finally:
            self._dir.cleanup()
        errors = [line for line in lines if line.startswith("error")]
        if errors or not lines:
            raise RuntimeError(f"the read probe failed: {errors or 'no reads'}")
        ms = [float(line) for line in lines]
        return {
            "read_p50_ms": percentile(ms, 50),
            "read_p99_ms": percentile(ms, 99),
            "reads": len(ms),
        }


def main() -> int:
    url, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    interval = (float(sys.argv[4]) if len(sys.argv) > 4 else 25.0) / 1000
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=60)
    conn.request("GET", path)  # connected and warm before go
    conn.getresponse().read()
    gate = Gate()
    stop = threading.Event()
    latencies: list[float] = []
    errors: list[str] = []

    def probe() -> None:
        next_at = time.perf_counter()
        while True:  # one read at least, however short the workload
            sent = time.perf_counter()
            conn.request("GET", path)
            answer = conn.getresponse()
            answer.read()
            if answer.status != 200:
                errors.append(f"GET {path}: {answer.status}")
                return
            latencies.append(1000 * (time.perf_counter() - sent))
            next_at = max(next_at + interval, time.perf_counter())
            if stop.wait(next_at - time.perf_counter()):
                return

    gate.ready()
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    gate.wait_stop()
    stop.set()
    thread.join(60)
    with open(out, "w") as f:
        f.writelines(f"{ms:.3f}\n" for ms in latencies)
        f.writelines(f"error {e}\n" for e in errors)
    gate.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
