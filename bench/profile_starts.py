"""Where the time of a burst of starts goes: ``uv run --with py-spy python -m
bench.profile_starts [--runs 500] [--workers 8]``.

The ``starts`` workload on the in-process platform of ``stepway dev``: ``--runs``
starts of a 3-step WORKER workflow fired at once by the gated load client
(``bench/load_client.py``), served by ``--workers`` SDK worker processes, while py-spy
samples this process at 250 Hz, counting only the thread that holds the GIL, from "go"
until the last start answered. Prints the start latencies, then the functions with the
most samples, inclusive and self, in percent (``bench/profile_steps.py``'s summary).
The raw samples are kept (``--out DIR``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, percentile, python_env
from bench.gate import GatedProcesses
from bench.profile_steps import summarise
from bench.stepway_setup import StepwayDev
from bench.sys_stepway import _task


def _spy(pid: int, out: Path, idle: bool) -> subprocess.Popen[bytes]:
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: uv run --with py-spy python -m bench...")
    # --gil: only the thread holding the GIL (where the CPU goes); --idle: every thread,
    # waiting ones too (where the requests wait)
    mode = ["--idle"] if idle else ["--gil"]
    command = [spy, "record", "--pid", str(pid), "--rate", "250", *mode, "--format", "raw"]
    command += ["--duration", "600", "--output", str(out), "--nonblocking"]
    return subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--no-spy", action="store_true", help="measure without py-spy")
    parser.add_argument(
        "--idle", action="store_true", help="sample every thread, waiting ones too (not --gil)"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-profile-starts-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-profile-data-"))
    sw = StepwayDev(root)
    workers: GatedProcesses | None = None
    spy: subprocess.Popen[bytes] | None = None
    client: subprocess.Popen[str] | None = None
    try:
        sw.put_taskdef("bench_start")
        name = "bench_profile_start"
        sw.put_workflow(
            {
                "name": name,
                "tasks": [_task("WORKER:bench_start", i, "") for i in range(args.steps)],
            }
        )
        if args.workers:
            workers = GatedProcesses(
                "bench.worker_sdk",
                [sw.url, "bench_start"],
                args.workers,
                env=python_env(),
                log_dir=out,
            )
            workers.go()
        warm = sw.start(name, {})  # one start first: imports, caches, connections
        sw.wait(warm)
        client = subprocess.Popen(
            [sys.executable, "-m", "bench.load_client", sw.url, name, str(args.runs)],
            cwd=REPO,
            env=python_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert client.stdin is not None and client.stdout is not None
        if client.stdout.readline().strip() != "ready":
            raise RuntimeError("load client did not start")
        if not args.no_spy:
            spy = _spy(os.getpid(), out / "platform.raw", args.idle)
            time.sleep(1.0)
        started, cpu = time.perf_counter(), time.process_time()
        client.stdin.write("go\n")
        client.stdin.flush()
        line = client.stdout.readline()
        burst = time.perf_counter() - started
        cpu = time.process_time() - cpu
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        if not line.startswith("result "):
            raise RuntimeError(f"load client: {line!r}")
        fired = json.loads(line.removeprefix("result "))
        for i in fired["ids"]:
            sw.wait(i)
        statuses = [sw.status(i) for i in fired["ids"]]
    finally:
        if client is not None:
            client.wait(30)
        if workers is not None:
            workers.stop()
        sw.close()
        shutil.rmtree(root, ignore_errors=True)
    ms = fired["ms"]
    print(
        f"{args.runs} starts in {burst:.2f} s, platform CPU {1000 * cpu:.0f} ms "
        f"({1000 * cpu / args.runs:.2f} ms a start, workers' calls included): "
        f"min {min(ms):.0f} ms, p10 {percentile(ms, 10):.0f} ms, p50 {percentile(ms, 50):.0f} ms, "
        f"p99 {percentile(ms, 99):.0f} ms, max {max(ms):.0f} ms; errors {fired['errors']}; "
        f"completed {statuses.count('COMPLETED')}/{len(statuses)}"
    )
    raw = out / "platform.raw"
    if raw.exists() and raw.stat().st_size:
        print("\n".join(summarise(raw, args.top)))
        print(f"\nraw samples in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
