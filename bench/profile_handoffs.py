"""Where the Task API's time goes in hand-offs alone: ``uv run --with py-spy python -m
bench.profile_handoffs [--tasks 3000] [--workers 16]``.

The control plane alone (:class:`bench.stepway_setup.TaskApiOnly`, no engine) in this
process, ``--tasks`` queued tasks, ``--workers`` SDK worker processes
(``bench.worker_sdk``) that poll them and post their results, while py-spy samples this
process at 250 Hz, counting only the thread that holds the GIL. Prints hand-offs/s, the
server's and the workers' CPU per hand-off, the requests per hand-off, and the functions
with the most samples (inclusive and self, in percent). ``--spy-worker`` samples the
first worker process instead of the server (all its threads, GIL holder only);
``--no-spy`` measures without py-spy; ``--no-fast-path`` serves the hot routes through
FastAPI too (for comparison)."""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import python_env
from bench.gate import GatedProcesses
from bench.profile_steps import _spy, summarise
from bench.stepway_setup import TaskApiOnly


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="handler threads per worker")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--no-spy", action="store_true", help="measure without py-spy")
    parser.add_argument(
        "--no-fast-path",
        action="store_true",
        help="serve the hot Task API routes through FastAPI too (control_plane/api/fast_path.py)",
    )
    parser.add_argument(
        "--spy-worker", action="store_true", help="sample the first worker, not the server"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-profile-handoffs-"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-handoffs-data-") as data:
        api = TaskApiOnly(Path(data))
        if args.no_fast_path:
            api._served.server.config.app.fast_path = None
        requests = _RequestCounter(api)
        workers = GatedProcesses(
            "bench.worker_sdk",
            [api.url, "bench_handoff", str(args.threads)],
            args.workers,
            env=python_env(),
            log_dir=out,
        )
        spy = None
        worker_cpu: list[float] = []
        raw = out / ("worker.raw" if args.spy_worker else "taskapi.raw")
        try:
            api.put_taskdef("bench_handoff")
            api.seed("bench_handoff", args.tasks)
            if not args.no_spy:
                pid = workers.procs[0].pid if args.spy_worker else os.getpid()
                spy = _spy(pid, raw, 600)
                time.sleep(1.0)
            before, asked = api.signals.results, requests.count
            cpu0, started = time.process_time(), time.perf_counter()
            workers.go()
            while api.signals.results - before < args.tasks:
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu0
            asked = requests.count - asked
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
        finally:
            worker_cpu = workers.stop()
            api.close()
    n = args.tasks
    print(
        f"{n} hand-offs by {args.workers} workers: {n / elapsed:.0f}/s, "
        f"server CPU {1000 * cpu / n:.2f} ms a hand-off, {asked / n:.2f} requests a hand-off"
    )
    # every worker's CPU from go to stop (the idle long polls after the last hand-off too)
    print(
        f"worker CPU {1000 * sum(worker_cpu) / n:.2f} ms a hand-off "
        f"({len(worker_cpu)} of {args.workers} workers reported)"
    )
    for kind, count in requests.kinds.most_common():
        print(f"  {count:6d}  {kind}")
    if raw.exists() and raw.stat().st_size:
        print("\n".join(summarise(raw, args.top)))
        print(f"\nraw samples in {out}")
    return 0


class _RequestCounter:
    """Counts the HTTP requests the app receives (an outermost ASGI wrapper)."""

    def __init__(self, api: TaskApiOnly) -> None:
        self.count = 0
        self.kinds: Counter[str] = Counter()
        server = api._served.server
        inner = server.config.loaded_app

        async def counting(scope, receive, send):  # type: ignore[no-untyped-def]
            if scope["type"] == "http":
                self.count += 1
                path = str(scope["path"]).split("/")
                self.kinds[f"{scope['method']} {'/'.join(path[:5])}"] += 1
            await inner(scope, receive, send)

        server.config.loaded_app = counting
        # the running server's protocol instances read the app from the config
        server.config.app = counting


if __name__ == "__main__":
    raise SystemExit(main())
