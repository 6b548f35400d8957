"""A gated Huey consumer: ``python -m bench.worker_huey WORKERS`` (``BENCH_HUEY_DB``
names the SQLite file). Its worker processes poll every 1 ms (Huey's default starts at
0.1 s and backs off to 10 s when idle)."""

from __future__ import annotations

import resource
import sys

from bench.gate import Gate
from bench.huey_app import huey


def main() -> int:
    workers = int(sys.argv[1])
    consumer = huey.create_consumer(
        workers=workers,
        worker_type="process",
        initial_delay=0.001,
        backoff=1.0,
        max_delay=0.001,
        periodic=False,
        check_worker_health=False,
    )
    gate = Gate()
    gate.ready()
    consumer.start()
    gate.wait_stop()
    consumer.stop(graceful=True)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    gate.report(extra_cpu=children.ru_utime + children.ru_stime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
