"""A DBOS queue worker process: ``python -m bench.worker_dbos DATABASE_URL``. It
launches DBOS listening only to the drain queue, then reports ready (DBOS has no way to
hold a queue: the bench makes the whole batch visible at once, in one transaction)."""

from __future__ import annotations

import sys

from dbos import DBOS

from bench import dbos_app
from bench.gate import Gate


def main() -> int:
    DBOS(config=dbos_app.config(sys.argv[1]))
    DBOS.listen_queues([dbos_app.DRAIN_QUEUE])
    DBOS.launch()
    DBOS.register_queue(dbos_app.DRAIN_QUEUE, polling_interval_sec=dbos_app.POLLING_SECONDS)
    gate = Gate()
    gate.ready()
    gate.wait_stop()
    gate.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
