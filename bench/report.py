"""Medians of the collected results, the tables (markdown, also printed) and the
targets of issue 13 checked against them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import median
from bench.workloads import COLUMNS, Cell, Workload

Results = dict[str, dict[int, list[dict[str, Any]]]]
"""workload id -> cell index -> one result per repetition ({"error": ...} on failure)."""


@dataclass
class Summary:
    value: float
    extra: dict[str, float]
    reps: int
    samples: int
    error: str | None = None
    raw: dict[str, Any] | None = None


def summarise(results: list[dict[str, Any]]) -> Summary | None:
    ok = [r for r in results if "error" not in r]
    if not ok:
        return Summary(math.nan, {}, 0, 0, error=results[0]["error"]) if results else None
    if "samples" in ok[0]:
        samples = [s for r in ok for s in r["samples"]]
        value = median(samples)
    elif "value" in ok[0]:
        samples = [r["value"] for r in ok]
        value = median(samples)
    else:
        samples = [r.get("events", math.nan) for r in ok]
        value = median(samples)
    keys = {k for r in ok for k, v in r.items() if isinstance(v, int | float)}
    extra = {k: median([r[k] for r in ok if k in r]) for k in keys if k not in ("value",)}
    return Summary(value, extra, len(ok), len(samples), raw=ok[0])


def _step_events(raw: dict[str, Any]) -> float:
    """Events per step without the orchestrator bookends (bench.history.BOOKENDS)."""
    if "step_events" in raw:
        return float(raw["step_events"])
    by_type = raw.get("by_type", {})
    return float(
        sum(
            v
            for k, v in by_type.items()
            if k not in ("OrchestratorStarted", "OrchestratorCompleted")
        )
    )


def fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    ax = abs(x)
    if ax >= 100:
        return f"{x:,.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


class Report:
    def __init__(
        self,
        workloads: Sequence[Workload],
        results: Results,
        skipped: dict[str, str],
    ) -> None:
        self.workloads = {w.id: w for w in workloads}
        self.order = [w.id for w in workloads]
        self.results = results
        self.skipped = skipped
        self.summaries: dict[str, dict[int, Summary | None]] = {
            wid: {i: summarise(rs) for i, rs in cells.items()} for wid, cells in results.items()
        }

    # --- lookups -----------------------------------------------------------------------

    def get(self, wid: str, system: str, variant: str) -> Summary | None:
        w = self.workloads.get(wid)
        if w is None or wid not in self.summaries:
            return None
        for i, cell in enumerate(w.cells):
            if cell.system == system and cell.variant == variant:
                return self.summaries[wid].get(i)
        return None

    def _cell_text(self, w: Workload, i: int, cell: Cell) -> str:
        if cell.system in self.skipped:
            return "skipped"
        s = self.summaries.get(w.id, {}).get(i)
        if s is None:
            return "-"
        if s.error is not None:
            return "error"
        if w.op == "drain" or w.op == "handoffs":
            parts = [fmt(s.value)]
            cpu = []
            if "server_cpu_ms" in s.extra and cell.system.startswith("stepway"):
                cpu.append(f"server {fmt(s.extra['server_cpu_ms'])}")
            if "worker_cpu_ms" in s.extra:
                cpu.append(f"workers {fmt(s.extra['worker_cpu_ms'])}")
            if cpu:
                parts.append("(CPU ms/run: " + ", ".join(cpu) + ")")
            if "read_p99_ms" in s.extra:
                parts.append(f"(status read p99 {fmt(s.extra['read_p99_ms'])} ms)")
            return " ".join(parts)
        if w.op == "starts":
            e = s.extra
            return (
                f"start p50 {fmt(e['start_p50'])} ms, p99 **{fmt(e['start_p99'])}** ms; "
                f"run p50 {fmt(e['run_p50'])} ms; all done {fmt(e.get('burst_ms'))} ms after "
                f"the first start; {int(e['completed'])}/{int(e['runs'])} complete"
            )
        return fmt(s.value)

    def _stepway_value(self, w: Workload) -> float | None:
        for i, cell in enumerate(w.cells):
            if cell.column == "stepway":
                s = self.summaries.get(w.id, {}).get(i)
                return s.value if s and s.error is None else None
        return None

    def _ratios(self, w: Workload) -> str:
        mine = self._stepway_value(w)
        if mine is None or math.isnan(mine) or w.op == "starts":
            return ""
        out = []
        for i, cell in enumerate(w.cells):
            if cell.column == "stepway":
                continue
            s = self.summaries.get(w.id, {}).get(i)
            if s is None or s.error is not None or math.isnan(s.value) or s.value == 0:
                continue
            speed = s.value / mine if w.better == "lower" else mine / s.value
            name = {"floor": "floor", "dbos": "DBOS", "temporal": "Temporal", "huey": "Huey"}[
                cell.column
            ]
            out.append(f"{name}{' ' + cell.label if cell.label else ''} {speed:.2f}x")
        return ", ".join(out)

    # --- tables ------------------------------------------------------------------------

    def main_table(self) -> list[str]:
        cols = list(COLUMNS)
        lines = [
            "| workload | unit | "
            + " | ".join(COLUMNS[c] for c in cols)
            + " | Stepway's speed vs each (>1: Stepway faster) |",
            "|---|---|" + "---|" * len(cols) + "---|",
        ]
        for wid in self.order:
            w = self.workloads[wid]
            if w.op in ("history", "scaling") or wid not in self.summaries:
                continue
            row = []
            for c in cols:
                texts = [
                    self._cell_text(w, i, cell)
                    for i, cell in enumerate(w.cells)
                    if cell.column == c
                ]
                labels = [cell.label for cell in w.cells if cell.column == c]
                text = " / ".join(texts) if texts else "-"
                if c == "stepway" and len(texts) > 1 and all(labels):
                    text += " (" + " / ".join(labels) + ")"
                if c == "stepway" and texts and w.op not in ("starts",):
                    text = f"**{text}**" if "**" not in text else text
                row.append(text)
            unit = w.unit
            lines.append(f"| {w.title} | {unit} | " + " | ".join(row) + f" | {self._ratios(w)} |")
        return lines

    def history_table(self) -> list[str]:
        w = self.workloads.get("history")
        if w is None or "history" not in self.summaries:
            return []
        lines = [
            "| step kind | history events per step | without the replay bookends | "
            "DTS-billable actions per step | events by type per step |",
            "|---|---:|---:|---:|---|",
        ]
        for i, cell in enumerate(w.cells):
            s = self.summaries["history"].get(i)
            if s is None:
                continue
            who = "floor: one activity" if cell.system == "floor" else f"Stepway {cell.label}"
            if s.error is not None or s.raw is None:
                lines.append(f"| {who} | error | | | |")
                continue
            by_type = ", ".join(f"{k} {fmt(v)}" for k, v in s.raw.get("by_type", {}).items())
            lines.append(
                f"| {who} | {fmt(s.raw['events'])} | {fmt(_step_events(s.raw))} | "
                f"{fmt(s.raw['actions'])} | {by_type} |"
            )
        return lines

    def scaling_table(self) -> list[str]:
        rows = [w for w in (self.workloads[i] for i in self.order) if w.op == "scaling"]
        rows = [w for w in rows if w.id in self.summaries]
        if not rows:
            return []
        lines = [
            "| steps | Stepway ms per step | floor ms per step | Stepway / floor |",
            "|---:|---:|---:|---:|",
        ]
        for w in rows:
            mine = self.get(w.id, "stepway", "http")
            floor = self.get(w.id, "floor", "http")
            a = mine.value if mine and mine.error is None else math.nan
            b = floor.value if floor and floor.error is None else math.nan
            lines.append(f"| {w.full['steps']:,} | {fmt(a)} | {fmt(b)} | {fmt(a / b)} |")
        return lines

    def targets(self) -> list[tuple[str, str, bool | None]]:
        """(target, measured, met) for each target of issue 13."""
        out: list[tuple[str, str, bool | None]] = []

        def v(wid: str, system: str, variant: str, key: str | None = None) -> float:
            s = self.get(wid, system, variant)
            if s is None or s.error is not None:
                return math.nan
            return s.extra.get(key, math.nan) if key else s.value

        def check(name: str, measured: str, ok: bool | None) -> None:
            out.append((name, measured, ok))

        def le(a: float, b: float) -> bool | None:
            return None if math.isnan(a) or math.isnan(b) else a <= b

        sw_http, floor_http = v("http20", "stepway", "http"), v("http20", "floor", "http")
        check(
            "built-in activity step at most 1.3x the hand-written floor (20 HTTP steps)",
            f"{fmt(sw_http / floor_http)}x",
            le(sw_http / floor_http, 1.3),
        )
        # INLINE and JSON_JQ_TRANSFORM are built-in activities too (README, first
        # paragraph); the floor's step for them is a no-op activity
        floor_noop = v("builtin20", "floor", "noop")
        for variant, label in (("inline", "INLINE"), ("jq", "JSON_JQ_TRANSFORM")):
            ratio = v("builtin20", "stepway", variant) / floor_noop
            check(
                f"built-in activity step at most 1.3x the floor (20 {label} steps against "
                "20 no-op activities)",
                f"{fmt(ratio)}x",
                le(ratio, 1.3),
            )
        for name, system, variant in (
            ("DBOS", "dbos", "http"),
            ("Temporal activities", "temporal", "activity"),
            ("Temporal local activities", "temporal", "local"),
        ):
            peer = v("http20", system, variant)
            check(
                f"20-step run faster than {name}",
                f"Stepway {fmt(sw_http)} ms, {name} {fmt(peer)} ms",
                le(sw_http, peer),
            )
        step = v("worker20", "stepway", "sdk")
        check(
            "WORKER step (SDK worker) median under 15 ms",
            f"{fmt(step)} ms/step (1-step run: {fmt(v('worker1', 'stepway', 'sdk'))} ms)",
            le(step, 15),
        )
        for system, variant, where in (
            ("stepway", "sdk", "stepway dev"),
            ("stepway_split", "split", "engine and control plane apart"),
        ):
            drain = v("drain", system, variant)
            check(
                f"queued one-step runs drained at 300 runs/s or more (8 workers; {where})",
                f"{fmt(drain)} runs/s",
                le(300, drain),
            )
            cpu = v("drain", system, variant, "server_cpu_ms")
            check(f"at most 3 ms of server CPU per run ({where})", f"{fmt(cpu)} ms", le(cpu, 3))
        for variant, where in (
            ("sdk", "one Task API process"),
            ("two", "two Task API processes on one data directory"),
        ):
            handoffs = v("handoffs", "stepway_taskapi", variant)
            check(
                f"Task API hand-offs at least 1,500/s (16 SDK workers; {where})",
                f"{fmt(handoffs)}/s",
                le(1500, handoffs),
            )
        p99 = v("starts", "stepway", "sdk", "start_p99")
        check("500 concurrent starts: start request p99 under 50 ms", f"{fmt(p99)} ms", le(p99, 50))
        done, runs = (
            v("starts", "stepway", "sdk", "completed"),
            v("starts", "stepway", "sdk", "runs"),
        )
        check(
            "500 concurrent starts: every run completes",
            f"{fmt(done)} of {fmt(runs)}",
            None if math.isnan(done) else done == runs,
        )
        # INLINE and JSON_JQ_TRANSFORM are built-in activities (README, first paragraph): since
        # issue 11 they run in killable evaluator processes, as activities
        for kind, limit, label in (
            ("worker", 4, "WORKER"),
            ("http", 2, "built-in activity (HTTP)"),
            ("inline", 2, "built-in activity (INLINE)"),
            ("jq", 2, "built-in activity (JSON_JQ_TRANSFORM)"),
        ):
            s = self.get("history", "stepway", kind)
            ev = _step_events(s.raw) if s and s.raw else math.nan
            every = s.raw["events"] if s and s.raw else math.nan
            check(
                f"history events per {label} step at most {limit} (without the replay "
                "bookends, as the floor's activity step is 2)",
                f"{fmt(ev)} ({fmt(every)} with them)",
                le(ev, limit),
            )
        control = []
        for kind in ("set_variable", "switch"):
            s = self.get("history", "stepway", kind)
            if s and s.raw:
                control.append(s.raw["events"])
        worst = max(control) if control else math.nan
        check(
            "history events per control step 0 (SET_VARIABLE, SWITCH)",
            f"at most {fmt(worst)}",
            le(worst, 0),
        )
        a, b = v("scaling10", "stepway", "http"), v("scaling1000", "stepway", "http")
        check(
            "cost per step at 1,000 steps within 1.5x of 10 steps",
            f"{fmt(b)} vs {fmt(a)} ms/step ({fmt(b / a)}x)",
            le(b / a, 1.5),
        )
        return out

    def targets_table(self) -> list[str]:
        lines = ["| target | measured | met |", "|---|---|---|"]
        for name, measured, ok in self.targets():
            mark = "n/a" if ok is None else ("yes" if ok else "**no**")
            lines.append(f"| {name} | {measured} | {mark} |")
        return lines
