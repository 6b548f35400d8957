"""The start burst (the ``starts`` workload): ``runs`` starts of a workflow fired at once
by a client process (``bench.load_client``), its WORKER tasks served by ``workers`` SDK
worker processes; shared by the systems that run it (``stepway dev`` and the engine and
control plane apart)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import REPO, median, percentile, python_env
from bench.gate import GatedProcesses


def start_burst(
    url: str,
    workflow: str,
    task_type: str,
    p: dict[str, Any],
    log_dir: Path,
    *,
    wait: Callable[[str], None],
    run: Callable[[str], dict[str, Any]],
) -> dict[str, Any]:
    """Fire ``p["runs"]`` starts of ``workflow`` at ``url``; ``wait`` waits for a run's
    end, ``run`` reads it through the workflow API."""
    n = p["runs"]
    workers = GatedProcesses(
        "bench.worker_sdk", [url, task_type], p["workers"], env=python_env(), log_dir=log_dir
    )
    client = subprocess.Popen(
        [sys.executable, "-m", "bench.load_client", url, workflow, str(n)],
        cwd=REPO,
        env=python_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdin is not None and client.stdout is not None
        if client.stdout.readline().strip() != "ready":
            raise RuntimeError("load client did not start")
        workers.go()
        client.stdin.write("go\n")
        client.stdin.flush()
        line = client.stdout.readline()
        if not line.startswith("result "):
            raise RuntimeError(f"load client: {line!r}")
        fired = json.loads(line.removeprefix("result "))
        for i in fired["ids"]:
            wait(i)
        runs = [run(i) for i in fired["ids"]]
    finally:
        client.wait(30)
        workers.stop()
    ended = [r for r in runs if r.get("endTime")]
    durations = [r["endTime"] - r["createTime"] for r in ended]
    # the whole burst: from the first run's creation to the last one's end (a run's own
    # duration depends on when it was created within the burst: a start answered sooner
    # starts its run's clock sooner)
    burst = max(r["endTime"] for r in ended) - min(r["createTime"] for r in runs)
    return {
        "start_p50": percentile(fired["ms"], 50),
        "start_p99": percentile(fired["ms"], 99),
        "run_p50": median(durations),
        "burst_ms": burst,
        "completed": sum(1 for r in runs if r["status"] == "COMPLETED"),
        "runs": n,
        "errors": fired["errors"],
    }
