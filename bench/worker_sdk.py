"""A gated worker process on Stepway's own SDK: ``python -m bench.worker_sdk URL TYPES
[THREADS [DELAY_SECONDS]]``. Every handler answers ``{"ok": true}``, at once or after
``DELAY_SECONDS``. The ``STEPWAY_*`` environment applies (e.g.
``STEPWAY_NEXT_TASK_WITH_RESULT=false``)."""

from __future__ import annotations

import os
import sys
import time

from stepway_worker import Registry, Worker, WorkerSettings, worker_task

from bench.gate import Gate


def main() -> int:
    url, types = sys.argv[1], sys.argv[2].split(",")
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    registry = Registry()
    for task_type in types:

        def handler() -> dict[str, bool]:
            if delay:
                time.sleep(delay)
            return {"ok": True}

        worker_task(task_type, registry=registry)(handler)
    # from the environment too: STEPWAY_NEXT_TASK_WITH_RESULT=false measures the plain post
    settings = WorkerSettings.from_env(
        server_url=url, worker_id=f"bench-sdk-{os.getpid()}", threads=threads
    )
    worker = Worker(registry, settings=settings)
    gate = Gate()
    gate.ready()
    worker.start()
    gate.wait_stop()
    gate.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
