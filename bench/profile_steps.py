"""Where the time of a step goes: ``uv run --with py-spy python -m bench.profile_steps
worker|http|inline|jq [--seconds 20]``.

Runs 20-step runs of WORKER steps (served by one SDK worker process), HTTP, INLINE or
JSON_JQ_TRANSFORM steps back to back on the in-process platform of ``stepway dev`` for
``--seconds``, while py-spy samples this process (and the worker) at 250 Hz, counting
only the thread that holds the GIL (``--gil``: the platform is one Python process, so
that is where its CPU goes). Prints:

* ms per step, and the wall-clock split of a step from the task records (queued ->
  handed out -> ended -> next step queued);
* the functions with the most samples on the GIL, inclusive and self, in percent.

The raw py-spy samples are kept (``--out DIR``) for flame graphs (``py-spy`` raw
format: one collapsed stack per line)."""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import REPO, median, python_env
from bench.gate import GatedProcesses
from bench.stepway_setup import StepwayDev
from bench.sys_stepway import _task

_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: uv run --with py-spy python -m bench...")
    return subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--gil",
            "--format",
            "raw",
            "--duration",
            str(int(seconds) + 2),
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _where(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    path = m["file"]
    for marker in ("site-packages/", "/work/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m['fn']} ({path})"


def summarise(raw: Path, top: int = 25) -> list[str]:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        total += count
        frames = [_where(f) for f in stack.split(";")[1:]]  # [0] is the thread
        for f in set(frames):
            inclusive[f] += count
        if frames:
            own[frames[-1]] += count
    out = [f"{total} samples on the GIL"]
    out.append("inclusive:")
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in inclusive.most_common(top)]
    out.append("self:")
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    return out


def _split(runs: list[dict[str, Any]]) -> list[str]:
    """Median ms of each part of a step, from the task records of the runs (built-in
    activities record no start time)."""
    queued, working, whole, turnaround = [], [], [], []
    for run in runs:
        tasks = sorted(run["tasks"], key=lambda t: t["scheduledTime"])
        for a, b in itertools.pairwise(tasks):
            turnaround.append(b["scheduledTime"] - a["endTime"])
        for t in tasks:
            whole.append(t["endTime"] - t["scheduledTime"])
            if t.get("startTime"):
                queued.append(t["startTime"] - t["scheduledTime"])
                working.append(t["endTime"] - t["startTime"])
    lines = [f"queued -> ended: {median(whole):.1f} ms"]
    if queued:
        lines += [
            f"  queued -> handed out: {median(queued):.1f} ms",
            f"  handed out -> ended (result recorded): {median(working):.1f} ms",
        ]
    lines.append(f"ended -> next step queued (engine turnaround): {median(turnaround):.1f} ms")
    return lines


#: the step kinds to profile: the bench's step definitions (``bench.sys_stepway._task``)
_KINDS = {
    "worker": "WORKER:bench_profile",
    "http": "HTTP",
    "inline": "INLINE",
    "jq": "JSON_JQ_TRANSFORM",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=tuple(_KINDS))
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--http", default="auto", help="uvicorn --http")
    parser.add_argument("--loop", default="auto", help="uvicorn --loop")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    stub = subprocess.Popen(
        [sys.executable, "-m", "bench.stub_http"],
        cwd=REPO,
        env=python_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stub.stdout is not None
    url = f"http://127.0.0.1:{stub.stdout.readline().split()[1]}/"
    root = Path(tempfile.mkdtemp(prefix="bench-profile-data-"))
    sw = StepwayDev(root, http=args.http, loop=args.loop)
    workers: GatedProcesses | None = None
    spies = []
    try:
        kind = _KINDS[args.kind]
        if args.kind == "worker":
            sw.put_taskdef("bench_profile")
            workers = GatedProcesses(
                "bench.worker_sdk", [sw.url, "bench_profile"], 1, env=python_env(), log_dir=out
            )
            workers.go()
        sw.put_workflow(
            {"name": "bench_profile", "tasks": [_task(kind, i, url) for i in range(args.steps)]}
        )
        for _ in range(3):  # warm up
            warm = sw.start("bench_profile")
            sw.wait(warm)
            if sw.status(warm) != "COMPLETED":
                raise RuntimeError(f"run {warm}: {sw.run(warm)}")
        spies.append(_spy(os.getpid(), out / "platform.raw", args.seconds))
        if workers is not None:
            spies.append(_spy(workers.procs[0].pid, out / "worker.raw", args.seconds))
        time.sleep(1.0)
        ids, started = [], time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            run_id = sw.start("bench_profile")
            sw.wait(run_id)
            ids.append(run_id)
        elapsed = time.perf_counter() - started
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        runs = [sw.run(i, tasks=True) for i in ids]
        failed = [r["workflowId"] for r in runs if r["status"] != "COMPLETED"]
        if failed:
            raise RuntimeError(f"runs did not complete: {failed}")
    finally:
        if workers is not None:
            workers.stop()
        sw.close()
        stub.terminate()
        shutil.rmtree(root, ignore_errors=True)
    steps = len(ids) * args.steps
    print(f"{args.kind}: {len(ids)} runs, {steps} steps, {1000 * elapsed / steps:.1f} ms/step")
    print("\n".join(_split(runs)))
    for name in ("platform", "worker"):
        raw = out / f"{name}.raw"
        if raw.exists() and raw.stat().st_size:
            print(f"\n== {name} process")
            print("\n".join(summarise(raw)))
    print(f"\nraw samples in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
