"""``uv run python -m bench``: every workload for Stepway and each installed peer.

uv sync --group bench                      # the peers (DBOS, Temporal, Huey)
uv run python -m bench                     # full run; rewrites docs/benchmarks.md
uv run python -m bench --smoke             # tiny sizes (what CI runs)
uv run python -m bench --only http20,worker1 --systems stepway,floor
"""

from __future__ import annotations

import argparse
import json
import os
import platform as stdlib_platform
import queue
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import MARK, REPO, python_env
from bench.report import Report, Results
from bench.workloads import WORKLOADS, Workload

SYSTEMS = ("stepway", "stepway_taskapi", "stepway_split", "floor", "dbos", "temporal", "huey")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


class Child:
    """A system under test in its own process (``bench.child``)."""

    def __init__(self, name: str, config: dict[str, Any], log_dir: Path) -> None:
        self.name = name
        self.log = open(log_dir / f"child-{name}.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.child", name, json.dumps(config)],
            cwd=REPO,
            env=python_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.versions: dict[str, str] = {}
        self.skip: str | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                self._lines.put(json.loads(line[len(MARK) :]))
        self._lines.put(None)

    def answer(self, timeout: float) -> dict[str, Any]:
        try:
            message = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.name}: no answer in {timeout} s") from None
        if message is None:
            raise RuntimeError(f"{self.name} exited (see its log)")
        return message

    def started(self, timeout: float = 180) -> None:
        first = self.answer(timeout)
        if "skip" in first:
            self.skip = str(first["skip"])
        else:
            self.versions = first["ready"]

    def send(self, command: dict[str, Any], timeout: float = 1800) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.answer(timeout)

    def quit(self) -> None:
        """Asks the child to tear its system down (``close`` waits for it)."""
        try:
            stdin = self.proc.stdin
            if self.proc.poll() is None and stdin is not None and not stdin.closed:
                stdin.write(json.dumps({"op": "quit"}) + "\n")
                stdin.flush()
                stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def close(self) -> None:
        self.quit()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _stub_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.stub_http"],
        cwd=REPO,
        env=python_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    return proc, f"http://127.0.0.1:{line[1]}/"


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), {stdlib_platform.system()} "
        f"{stdlib_platform.machine()}, Python {stdlib_platform.python_version()}"
    )


def run(args: argparse.Namespace) -> tuple[Report, dict[str, Any]]:
    smoke: bool = args.smoke
    only = set(args.only.split(",")) if args.only else None
    systems = [s for s in (args.systems.split(",") if args.systems else SYSTEMS)]
    plan = [w for w in WORKLOADS if only is None or w.id in only or w.op in only]
    needed = {c.system for w in plan for c in w.cells} & set(systems)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    stub, url = _stub_server()
    children: dict[str, Child] = {}
    skipped: dict[str, str] = {s: "not selected (--systems)" for s in SYSTEMS if s not in systems}
    results: Results = {}
    began = time.monotonic()
    try:
        config = {"url": url, "log_dir": str(log_dir), "http": args.http, "loop": args.loop}
        for name in sorted(needed, key=SYSTEMS.index):
            children[name] = Child(name, config, log_dir)
        for name, child in list(children.items()):
            try:
                child.started()
            except (TimeoutError, RuntimeError) as exc:
                child.skip = f"did not start: {exc}"
            if child.skip:
                print(f"skip {name}: {child.skip}", flush=True)
                skipped[name] = child.skip
                child.close()
                del children[name]
            else:
                print(f"{name}: {child.versions}", flush=True)
        for w in plan:
            _run_workload(w, children, results, smoke, args.reps)
    finally:
        try:
            for child in children.values():
                child.quit()
            for child in children.values():
                child.close()
        finally:
            stub.terminate()
            stub.wait()
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _machine(),
        "versions": {n: c.versions for n, c in children.items()},
        "skipped": skipped,
        "seconds": time.monotonic() - began,
        "mode": "smoke" if smoke else "full",
        "logs": str(log_dir),
        "command": "uv run python -m bench " + " ".join(sys.argv[1:]),
    }
    return Report(plan, results, skipped), meta


def _run_workload(
    w: Workload, children: dict[str, Child], results: Results, smoke: bool, reps: int | None
) -> None:
    params = w.smoke if smoke else w.full
    n_reps = 1 if smoke else (reps or w.reps)
    cells = [
        (i, c)
        for i, c in enumerate(w.cells)
        if c.system in children
        and (not smoke or w.smoke_variants is None or c.variant in w.smoke_variants)
    ]
    if not cells:
        return
    results[w.id] = {i: [] for i, _ in cells}
    started = time.monotonic()
    print(f"== {w.id}: {w.title} ({n_reps} rep(s), {params})", flush=True)
    if w.warmup and not smoke:
        for _, c in cells:
            warm = {**params, "runs": 1} if "runs" in params else params
            children[c.system].send(
                {"op": "run", "workload": w.op, "variant": c.variant, "params": warm}
            )
    for rep in range(n_reps):
        for i, c in cells:
            answer = children[c.system].send(
                {"op": "run", "workload": w.op, "variant": c.variant, "params": params}
            )
            if "result" in answer:
                results[w.id][i].append(answer["result"])
                shown = {k: v for k, v in answer["result"].items() if k != "by_type"}
                print(f"  rep {rep + 1} {c.system}/{c.variant}: {_short(shown)}", flush=True)
            else:
                error = str(answer.get("error"))
                results[w.id][i].append({"error": error})
                print(f"  rep {rep + 1} {c.system}/{c.variant}: ERROR\n{error}", flush=True)
    for name in {c.system for _, c in cells}:
        children[name].send({"op": "end", "workload": w.op})
    print(f"   ({time.monotonic() - started:.0f} s)", flush=True)


def _short(result: dict[str, Any]) -> str:
    parts = []
    for k, v in result.items():
        if isinstance(v, list):
            parts.append(
                f"{k}=[{', '.join(f'{x:.1f}' for x in v[:8])}{'...' if len(v) > 8 else ''}]"
            )
        elif isinstance(v, float):
            parts.append(f"{k}={v:.2f}")
        else:
            parts.append(f"{k}={v}")
    return " ".join(parts)


def render(report: Report, meta: dict[str, Any]) -> str:
    versions: dict[str, str] = {}
    for v in meta["versions"].values():
        versions.update(v)
    lines = [
        BEGIN,
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['mode']} mode, "
        f"{meta['seconds'] / 60:.1f} min).",
        "",
        f"* Machine: {meta['machine']}.",
        "* Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".",
    ]
    for name, why in sorted(meta["skipped"].items()):
        lines.append(f"* Skipped: {name}: {why}.")
    lines += ["", "### Side by side", "", *report.main_table(), ""]
    if report.history_table():
        lines += ["### History per step (the cloud cost)", "", *report.history_table(), ""]
    if report.scaling_table():
        lines += ["### Cost per step as runs grow", "", *report.scaling_table(), ""]
    lines += ["### Targets of issue 13", "", *report.targets_table(), "", END]
    return "\n".join(lines) + "\n"


def write_doc(path: Path, generated: str) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + generated.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n" + generated
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--only", help="workload ids or names, comma-separated")
    parser.add_argument("--systems", help=f"comma-separated subset of {','.join(SYSTEMS)}")
    parser.add_argument("--reps", type=int, help="repetitions (default per workload, >= 5)")
    parser.add_argument(
        "--out",
        help="markdown file whose generated part is rewritten "
        "(default docs/benchmarks.md in a full run of every workload)",
    )
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--http", default="auto", help="uvicorn --http for Stepway")
    parser.add_argument("--loop", default="auto", help="uvicorn --loop for Stepway")
    parser.add_argument(
        "--render",
        help="re-render the tables from a --json file of an earlier run instead of measuring",
    )
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        meta = saved["meta"]
        results = {
            w: {int(i): rs for i, rs in cells.items()} for w, cells in saved["results"].items()
        }
        ran = [w for w in WORKLOADS if w.id in results]
        report = Report(ran, results, meta["skipped"])
        generated = render(report, meta)
        print(generated)
        if args.out:
            write_doc(Path(args.out), generated)
        return 0
    report, meta = run(args)
    generated = render(report, meta)
    print()
    print(generated)
    out = args.out
    if out is None and not args.smoke and not args.only and not args.systems:
        out = str(REPO / "docs" / "benchmarks.md")
    if out:
        write_doc(Path(out), generated)
        print(f"wrote {out}")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "results": report.results}, indent=1))
    failed = [
        f"{wid}/{i}"
        for wid, cells in report.results.items()
        for i, rs in cells.items()
        if any("error" in r for r in rs)
    ]
    if failed:
        print(f"errors in: {', '.join(failed)} (logs in {meta['logs']})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
