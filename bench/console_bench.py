"""How fast the console's pages answer with many runs in the store.

    uv run python bench/console_bench.py [--runs 10000] [--repeat 30]

Builds a SQLite run store with ``--runs`` finished and running runs of the example
definitions (4 task rows each, 1 in 50 runs waiting on a HUMAN approval, a few with logs),
serves the control plane (API and console, auth ``none``) with uvicorn on a free loopback
port, and times each console page over real HTTP: the median and the 95th percentile of
``--repeat`` requests after one warm-up request. No engine runs; the pages read what the
interpreter would have recorded.
"""

from __future__ import annotations

import argparse
import platform
import socket
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from control_plane.api.app import create_app
from control_plane.cli.http_server import uvicorn_config
from control_plane.deps import Deps, Settings
from control_plane.services.metadata import MetadataService
from engine.adapters.payload_local import LocalPayloadStore
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_signals_recording import RecordingRunSignals
from engine.adapters.run_store_sql import SqlRunStore, runs, tasks
from engine.language.loading import load_paths

REPO = Path(__file__).resolve().parents[1]
STATUSES = ["COMPLETED"] * 6 + ["FAILED", "TERMINATED", "RUNNING", "TIMED_OUT"]
TARGET_MS = 200.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fill(store: SqlRunStore, count: int) -> dict[str, str]:
    """``count`` runs with their task rows, in one transaction. Returns sample ids."""
    now = int(time.time() * 1000)
    run_rows: list[dict[str, Any]] = []
    task_rows: list[dict[str, Any]] = []
    samples: dict[str, str] = {}
    for i in range(count):
        workflow_id = str(uuid.UUID(int=i + 1))
        created = now - (count - i) * 60_000
        status = STATUSES[i % len(STATUSES)]
        waiting = i % 50 == 0
        if waiting:
            status = "RUNNING"
        name = "invoice_intake" if i % 3 else "month_end_close"
        run_rows.append(
            {
                "workflow_id": workflow_id,
                "name": name,
                "version": 1,
                "status": status,
                "input": {"documentUrl": f"docs/{i}.pdf", "submittedBy": "bench"},
                "input_ref": None,
                "output": {"outcome": "lodged"} if status == "COMPLETED" else None,
                "output_ref": None,
                "variables": {"outcome": "pending"},
                "correlation_id": f"order-{i}",
                "priority": 0,
                "task_to_domain": {},
                "idempotency_key": None,
                "parent_workflow_id": None,
                "parent_task_id": None,
                "reason_for_incompletion": "boom" if status == "FAILED" else None,
                "failed_reference_task_names": ["classify"] if status == "FAILED" else [],
                "create_time": created,
                "update_time": created + 5_000,
                "end_time": None if status == "RUNNING" else created + 9_000,
            }
        )
        for j, (ref, kind, queue) in enumerate(
            [
                ("parse", "WORKER", "parse_pdf"),
                ("classify", "WORKER", "classify_document"),
                ("route", "SWITCH", None),
                ("approval", "HUMAN", None),
            ]
        ):
            done = not (waiting and ref == "approval")
            task_rows.append(
                {
                    "task_id": f"{workflow_id}-{ref}",
                    "workflow_id": workflow_id,
                    "reference_task_name": ref,
                    "task_type": kind,
                    "status": "COMPLETED" if done else "SCHEDULED",
                    "attempt": 1,
                    "retry_count": 0,
                    "seq": created + j,
                    "input_data": {"text": "x" * 200},
                    "input_ref": None,
                    "output_data": {"documentClass": "invoice", "selectedCase": "invoice"},
                    "output_ref": None,
                    "reason_for_incompletion": None,
                    "scheduled_time": created + j * 1000,
                    "start_time": created + j * 1000 + 10,
                    "end_time": created + j * 1000 + 500 if done else None,
                    "update_time": created + j * 1000 + 500,
                    "worker_id": "bench-worker" if kind == "WORKER" else None,
                    "poll_count": 1,
                    "callback_after_seconds": 0,
                    "domain": None,
                    "queue_name": queue,
                    "task_def_name": queue,
                    "iteration": 0,
                }
            )
        if i == count // 2:
            samples["finished"] = workflow_id
        if waiting:
            samples["waiting"] = workflow_id
    with store.engine.begin() as conn:
        conn.execute(runs.insert(), run_rows)
        conn.execute(tasks.insert(), task_rows)
    return samples


def _time(client: httpx.Client, path: str, repeat: int) -> tuple[float, float, int]:
    response = client.get(path)  # warm-up
    assert response.status_code == 200, (path, response.status_code, response.text[:300])
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, path
    times.sort()
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    return statistics.median(times), p95, len(response.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store = SqlRunStore(f"sqlite:///{folder}/runs.db")
        queue = SqliteTaskQueue(folder / "queues.db")
        signals = RecordingRunSignals()
        port = _free_port()
        deps = Deps(
            run_store=store,
            queue=queue,
            provisioner=SqliteQueueProvisioner(folder / "queues.db"),
            payloads=LocalPayloadStore(
                folder / "payloads", secret="bench-secret-0123456789", base_url="http://x"
            ),
            signals=signals,
        )
        settings = Settings()
        loaded = load_paths([REPO / "workers", REPO / "definitions"])
        metadata = MetadataService(settings, deps)
        metadata.register_task_defs([i.data for i in loaded.items if i.kind == "taskdef"])
        metadata.register_workflows(
            [i.data for i in loaded.items if i.kind == "workflow"], single=False, create_only=False
        )
        started = time.perf_counter()
        samples = _fill(store, args.runs)
        fill_s = time.perf_counter() - started
        server = uvicorn.Server(
            uvicorn_config(  # as stepway serve's
                create_app(settings, deps), host="127.0.0.1", port=port, log_level="warning"
            )
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        finished, waiting = samples["finished"], samples["waiting"]
        pages = [
            ("runs, first page", "/"),
            ("runs, 100 per page", "/?size=100"),
            ("runs, last page", f"/?start={args.runs - 25}"),
            ("runs by status", "/?status=FAILED"),
            ("runs by definition", "/?name=month_end_close"),
            ("runs by correlation id", f"/?correlation=order-{args.runs // 3}"),
            ("runs in the last 24 h", "/?within=24h"),
            ("runs, live table", "/?fragment=table"),
            ("a finished run", f"/runs/{finished}"),
            ("a run with a task open", f"/runs/{finished}?task={finished}-classify"),
            ("a run waiting on a person", f"/runs/{waiting}"),
            ("a run's live part", f"/runs/{waiting}/live"),
            ("inbox", "/inbox"),
            ("task types", "/task-types"),
            ("workflow definitions", "/workflows"),
            ("a workflow definition", "/workflows/invoice_intake"),
            ("task definitions", "/taskdefs"),
            ("start form", "/start?name=invoice_intake"),
        ]
        print(
            f"{args.runs:,} runs ({args.runs * 4:,} task rows) in SQLite, filled in "
            f"{fill_s:.1f} s; {args.repeat} requests per page over loopback HTTP; "
            f"{platform.machine()}, Python {platform.python_version()}"
        )
        print(f"| page | median ms | p95 ms | bytes | within {TARGET_MS:.0f} ms (p95) |")
        print("|---|---:|---:|---:|---|")
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                for label, path in pages:
                    median, p95, size = _time(client, path, args.repeat)
                    verdict = "yes" if p95 <= TARGET_MS else "NO"
                    print(f"| {label} | {median:.1f} | {p95:.1f} | {size:,} | {verdict} |")
        finally:
            server.should_exit = True
            thread.join(10)
            store.close()
            queue.close()


if __name__ == "__main__":
    main()
