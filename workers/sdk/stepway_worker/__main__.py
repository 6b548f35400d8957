"""``python -m stepway_worker --app workers.document``: import the app module (its
``@worker_task`` handlers register themselves) and poll until SIGTERM. With an exporter
configured (:mod:`stepway_worker.telemetry`) the process's spans are exported; its tracer
provider is also OpenTelemetry's global one, so the handlers' own spans go there too."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from stepway_worker.registry import registry
from stepway_worker.runner import run
from stepway_worker.telemetry import tracer_provider_from_env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stepway_worker", description=__doc__)
    parser.add_argument(
        "--app", action="append", required=True, help="module(s) that register handlers"
    )
    parser.add_argument("--server-url", help="Task API base URL (STEPWAY_SERVER_URL)")
    parser.add_argument("--worker-id", help="worker id (STEPWAY_WORKER_ID)")
    parser.add_argument("--threads", type=int, help="threads per task type (STEPWAY_THREADS)")
    parser.add_argument(
        "--poll-interval", type=float, help="longest idle wait, s (STEPWAY_POLL_INTERVAL)"
    )
    parser.add_argument("--domain", help="domain to poll (STEPWAY_DOMAIN)")
    parser.add_argument(
        "--task-type", action="append", help="run only these task types (default: all)"
    )
    parser.add_argument("--log-level", default=os.environ.get("STEPWAY_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s",
        stream=sys.stderr,
    )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in args.app:
        importlib.import_module(module)
    if not len(registry):
        parser.error(f"{', '.join(args.app)} registered no handlers")
    provider = tracer_provider_from_env()
    if provider is not None:
        from opentelemetry import trace

        trace.set_tracer_provider(provider)
    try:
        ok = run(
            threads=args.threads,
            poll_interval=args.poll_interval,
            domain=args.domain,
            worker_id=args.worker_id,
            server_url=args.server_url,
            task_types=args.task_type,
            tracer_provider=provider,
        )
    finally:
        if provider is not None:
            provider.shutdown()  # exports the spans still batched
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
