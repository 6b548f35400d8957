"""A gated plain HTTP worker process: ``python -m bench.worker_plain URL TYPE``.

What a worker written against the Task API with nothing but an HTTP client does: a
batch long poll for one task, then the result posted, in one loop on one connection."""

from __future__ import annotations

import os
import sys
import threading

import httpx

from bench.gate import Gate


def work(url: str, task_type: str, worker_id: str) -> None:
    http = httpx.Client(base_url=url, timeout=60)
    while True:
        response = http.get(
            f"/api/tasks/poll/batch/{task_type}",
            params={"workerid": worker_id, "count": 1, "timeout": 5000},
        )
        response.raise_for_status()
        for task in response.json():
            http.post(
                "/api/tasks",
                json={
                    "workflowInstanceId": task["workflowInstanceId"],
                    "taskId": task["taskId"],
                    "workerId": worker_id,
                    "status": "COMPLETED",
                    "outputData": {"ok": True},
                },
            ).raise_for_status()


def main() -> int:
    url, task_type = sys.argv[1], sys.argv[2]
    gate = Gate()
    gate.ready()
    args = (url, task_type, f"bench-plain-{os.getpid()}")
    threading.Thread(target=work, args=args, daemon=True).start()
    gate.wait_stop()
    gate.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
