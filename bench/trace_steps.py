"""A step's timeline: ``python -m bench.trace_steps worker|http [--runs 5]``.

Wraps the hops of a step (``bench.stepway_setup.trace_points``) with timing, runs
10-step runs of WORKER steps (one SDK worker process) or HTTP steps on the in-process
platform, and prints, for the steps in the middle of the runs, grouped by the order
their hops came in (the two most common orders), the median time of each hop's start
(``>``) and end (``<``) after the step began (a WORKER task's dispatch in the
orchestrator's work item, an HTTP step's activity) and since the hop before:
where the wall-clock time of a step goes, hop by hop. Timing wrappers cost a few microseconds."""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import REPO, median, python_env
from bench.gate import GatedProcesses
from bench.stepway_setup import StepwayDev, trace_points
from bench.sys_stepway import _task

Event = tuple[float, str, str]


def _describe(args: tuple[Any, ...]) -> str:
    """What a hop was about: the activity name, the event kind, the work item kind."""
    for arg in args[1:3]:
        name = getattr(arg, "name", None)
        if isinstance(name, str) and name:
            if name.endswith(".started"):
                return ".started event"
            return "result event" if len(name) >= 36 and name[8] == "-" else name
        which = getattr(arg, "WhichOneof", None)
        if which is not None:
            is_work_item = type(arg).__name__ == "WorkItem"
            kind = which("request") if is_work_item else None
            if kind:
                return str(kind)
            events = getattr(arg, "newEvents", None)
            if events is not None:
                kinds = [e.WhichOneof("eventType") for e in events]
                return "+".join(k for k in kinds if k != "orchestratorStarted")
        if isinstance(arg, str) and arg.endswith(".started"):
            return ".started event"
    if len(args) > 2 and isinstance(args[2], str) and not args[2].endswith(".started"):
        return "result event"
    return ""


def install(events: list[Event]) -> None:
    lock = threading.Lock()

    def wrap(owner: Any, attr: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            try:
                what = _describe(args)
            except Exception:  # a label is not worth breaking the hop
                what = ""
            with lock:
                events.append((time.perf_counter(), label + " >", what))
            try:
                return original(*args, **kwargs)
            finally:
                with lock:
                    events.append((time.perf_counter(), label + " <", what))

        setattr(owner, attr, timed)

    for owner, attr, label in trace_points():
        wrap(owner, attr, label)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("worker", "http"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    events: list[Event] = []
    install(events)
    stub = subprocess.Popen(
        [sys.executable, "-m", "bench.stub_http"],
        cwd=REPO,
        env=python_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stub.stdout is not None
    url = f"http://127.0.0.1:{stub.stdout.readline().split()[1]}/"
    sw = StepwayDev(Path(tempfile.mkdtemp(prefix="bench-trace-")))
    workers = None
    try:
        kind = "WORKER:bench_trace" if args.kind == "worker" else "HTTP"
        if args.kind == "worker":
            sw.put_taskdef("bench_trace")
            workers = GatedProcesses(
                "bench.worker_sdk", [sw.url, "bench_trace"], 1, env=python_env()
            )
            workers.go()
        sw.put_workflow({"name": "bench_trace", "tasks": [_task(kind, i, url) for i in range(10)]})
        for _ in range(3):
            sw.wait(sw.start("bench_trace"))
        events.clear()
        started = time.perf_counter()
        for _ in range(args.runs):
            sw.wait(sw.start("bench_trace"))
        elapsed = time.perf_counter() - started
    finally:
        if workers is not None:
            workers.stop()
        sw.close()
        stub.terminate()
    # a WORKER step starts with its dispatch (in the orchestrator's work item), an HTTP
    # step with its activity
    anchor = ("engine: dispatch >", "") if args.kind == "worker" else None
    starts = [
        i
        for i, (_, hop, what) in enumerate(events)
        if (hop, what) == anchor or (hop == "engine: activity >" and what == "stepway.builtin")
    ]
    # steps grouped by the order their hops came in: the medians of one order add up
    # (a step whose result came while its work item was still running has other hops)
    orders: dict[tuple[tuple[str, str], ...], list[list[float]]] = defaultdict(list)
    for a, b in itertools.pairwise(starts):
        t0 = events[a][0]
        if events[b][0] - t0 > 1.0:  # the end of one run and the start of the next
            continue
        hops = tuple((hop, what) for _, hop, what in events[a : b + 1])
        orders[hops].append([1000 * (t - t0) for t, _, _ in events[a : b + 1]])
    print(
        f"{args.kind}: {1000 * elapsed / (10 * args.runs):.1f} ms per step over "
        f"{args.runs} 10-step runs (start and finish included)"
    )
    steps = sum(len(v) for v in orders.values())
    for hops, samples in sorted(orders.items(), key=lambda kv: -len(kv[1]))[:2]:
        print(
            f"\n{len(samples)} of {steps} steps had these hops in this order; median ms "
            "after the step's dispatch or activity started, and since the hop before:"
        )
        previous = 0.0
        for i, (hop, what) in enumerate(hops):
            at = median([sample[i] for sample in samples])
            label = "next step's start >" if i == len(hops) - 1 else hop
            print(f"  {at:7.2f}  +{at - previous:5.2f}  {label:40} {what}")
            previous = at
    return 0


if __name__ == "__main__":
    sys.exit(main())
