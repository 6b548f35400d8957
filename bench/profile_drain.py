"""Where a drained run's server time goes: ``uv run --with py-spy python -m
bench.profile_drain [--runs 2000] [--workers 8]``.

The drain of the bench (``bench/sys_stepway.py``, ``w_drain``) on the in-process platform
of ``stepway dev``: ``--runs`` one-step WORKER runs are started and queued first, then
``--workers`` SDK worker processes are let go together, and py-spy samples this process
(``--gil``: the thread that holds the GIL, where the platform's CPU goes) from go to
the last run's end only. Prints runs/s, the process's CPU a run over that part, and the
functions with the most samples on the GIL, inclusive and self, in percent
(``bench.profile_steps.summarise``). ``--no-spy`` runs the same drain without py-spy;
``--out DIR`` keeps the raw samples (one collapsed stack per line) for flame graphs."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.common import python_env
from bench.gate import GatedProcesses
from bench.profile_steps import _spy, summarise
from bench.stepway_setup import StepwayDev
from bench.sys_stepway import _task


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--no-spy", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    # every run is queued before a worker polls: its "no worker polled" warning is noise
    logging.getLogger("engine.runtime.activities").setLevel(logging.ERROR)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-drain-"))
    out.mkdir(parents=True, exist_ok=True)
    sw = StepwayDev(Path(tempfile.mkdtemp(prefix="bench-drain-data-")))
    workers = GatedProcesses(
        "bench.worker_sdk", [sw.url, "bench_drain"], args.workers, env=python_env()
    )
    try:
        sw.put_taskdef("bench_drain")
        sw.put_workflow({"name": "bench_drain", "tasks": [_task("WORKER:bench_drain", 0, sw.url)]})
        ids = [sw.start("bench_drain") for _ in range(args.runs)]
        deadline = time.monotonic() + 600
        while sw.queued("bench_drain") < args.runs:
            if time.monotonic() > deadline:
                raise TimeoutError("runs not queued")
            time.sleep(0.05)
        time.sleep(1)  # the starts' episodes settle
        raw = out / "drain.raw"
        spy = None if args.no_spy else _spy(os.getpid(), raw, 600)
        if spy is not None:
            time.sleep(1)  # py-spy attached
        cpu0, started = time.process_time(), time.perf_counter()
        workers.go()
        sw.wait_ended(ids)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu0
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
    finally:
        workers.stop()
        sw.close()
    print(
        f"{args.runs} runs drained by {args.workers} SDK workers: {args.runs / elapsed:.0f}"
        f" runs/s, the platform's CPU {1000 * cpu / args.runs:.2f} ms a run"
    )
    if spy is not None and raw.exists():
        print("\n".join(summarise(raw, top=40)))
        print(f"raw samples: {raw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
