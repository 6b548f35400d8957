"""The workloads of the side-by-side table, their sizes (full and smoke) and which
system runs each cell."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# table columns, in order
COLUMNS = {
    "floor": "floor (hand-written durabletask)",
    "dbos": "DBOS (SQLite)",
    "temporal": "Temporal dev (activities / local)",
    "huey": "Huey (SQLite)",
    "stepway": "Stepway",
}


@dataclass(frozen=True)
class Cell:
    system: str
    """The child system (``bench.sys_<system>``) that runs it."""
    variant: str
    column: str
    label: str = ""


@dataclass(frozen=True)
class Workload:
    id: str
    op: str
    """The workload name the systems know."""
    title: str
    unit: str
    better: Literal["lower", "higher"]
    cells: tuple[Cell, ...]
    full: dict[str, Any]
    smoke: dict[str, Any]
    reps: int = 5
    warmup: bool = True
    smoke_variants: frozenset[str] | None = None
    extra: dict[str, str] = field(default_factory=dict)
    """Further metrics a result carries: key -> label."""


SW = "stepway"
HTTP_CELLS = (
    Cell("floor", "http", "floor"),
    Cell("dbos", "http", "dbos"),
    Cell("temporal", "activity", "temporal", "activities"),
    Cell("temporal", "local", "temporal", "local"),
    Cell(SW, "http", "stepway", "HTTP"),
)

WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "http20",
        "http20",
        "20 HTTP steps, serial",
        "ms per run",
        "lower",
        HTTP_CELLS,
        full={"steps": 20, "runs": 3},
        smoke={"steps": 3, "runs": 1},
    ),
    Workload(
        "builtin20",
        "builtin20",
        "20 INLINE / 20 JSON_JQ steps (peers: no-op steps)",
        "ms per run",
        "lower",
        (
            Cell("floor", "noop", "floor"),
            Cell("dbos", "noop", "dbos"),
            Cell(SW, "inline", "stepway", "INLINE"),
            Cell(SW, "jq", "stepway", "JSON_JQ"),
        ),
        full={"steps": 20, "runs": 3},
        smoke={"steps": 3, "runs": 1},
    ),
    Workload(
        "concurrent",
        "concurrent",
        "50 concurrent 20-step runs (HTTP steps)",
        "steps/s",
        "higher",
        HTTP_CELLS,
        full={"runs": 50, "steps": 20},
        smoke={"runs": 3, "steps": 3},
        warmup=False,
    ),
    Workload(
        "worker1",
        "worker1",
        "1-step WORKER run end to end (peers: a 1-step queued workflow or task)",
        "ms",
        "lower",
        (
            Cell("dbos", "queue", "dbos"),
            Cell("temporal", "activity", "temporal", "activities"),
            Cell("huey", "task", "huey"),
            Cell(SW, "sdk", "stepway", "SDK worker"),
            Cell(SW, "plain", "stepway", "plain HTTP worker"),
        ),
        full={"runs": 5},
        smoke={"runs": 1},
    ),
    Workload(
        "worker20",
        "worker20",
        "20-step WORKER run (SDK worker)",
        "ms per step",
        "lower",
        (
            Cell(SW, "sdk", "stepway", "stepway dev"),
            Cell("stepway_split", "split", "stepway", "engine and control plane apart"),
        ),
        full={"steps": 20, "runs": 2},
        smoke={"steps": 3, "runs": 1},
    ),
    Workload(
        "drain",
        "drain",
        "queued one-step runs drained by 8 worker processes",
        "runs/s",
        "higher",
        (
            Cell("dbos", "queue", "dbos"),
            Cell("huey", "task", "huey"),
            Cell(SW, "sdk", "stepway", "stepway dev"),
            Cell("stepway_split", "split", "stepway", "engine and control plane apart"),
        ),
        full={"runs": 500, "workers": 8},
        smoke={"runs": 5, "workers": 1},
        warmup=False,
        extra={
            "server_cpu_ms": "server CPU ms per run",
            "worker_cpu_ms": "worker CPU ms per run",
            "read_p99_ms": "p99 ms of a run's status read every 25 ms during the drain",
        },
    ),
    Workload(
        "handoffs",
        "handoffs",
        "Task API hand-offs alone (poll + accepted result), 16 SDK worker processes",
        "hand-offs/s",
        "higher",
        (
            Cell("stepway_taskapi", "sdk", "stepway", "one Task API process"),
            Cell("stepway_taskapi", "two", "stepway", "two Task API processes, one data directory"),
        ),
        full={"tasks": 1000, "workers": 16},
        smoke={"tasks": 10, "workers": 2},
        warmup=False,
        extra={"server_cpu_ms": "server CPU ms per hand-off"},
    ),
    Workload(
        "starts",
        "starts",
        "500 concurrent starts of a 3-step WORKER workflow (8 SDK workers)",
        "start p99 ms",
        "lower",
        (
            Cell(SW, "sdk", "stepway", "stepway dev"),
            Cell("stepway_split", "split", "stepway", "engine and control plane apart"),
        ),
        full={"runs": 500, "steps": 3, "workers": 8},
        smoke={"runs": 5, "steps": 3, "workers": 1},
        warmup=False,
        extra={
            "start_p50": "start p50 ms",
            "start_p99": "start p99 ms",
            "run_p50": "run p50 ms",
            "burst_ms": "all runs done, ms after the first start",
            "completed": "completed",
            "runs": "runs",
        },
    ),
    Workload(
        "history",
        "history",
        "history events and DTS-billable actions per step",
        "events per step",
        "lower",
        (
            Cell("floor", "activity", "floor", "activity"),
            *(
                Cell(SW, kind, "stepway", kind)
                for kind in (
                    "worker",
                    "http",
                    "inline",
                    "jq",
                    "set_variable",
                    "switch",
                    "wait",
                    "sub_workflow",
                )
            ),
        ),
        full={"k": 4},
        smoke={"k": 1},
        reps=1,
        warmup=False,
        smoke_variants=frozenset({"activity", "worker", "http", "inline", "switch"}),
        extra={"actions": "actions per step"},
    ),
    *(
        Workload(
            f"scaling{n}",
            "scaling",
            f"{n:,} HTTP steps",
            "ms per step",
            "lower",
            (Cell("floor", "http", "floor"), Cell(SW, "http", "stepway")),
            full={"steps": n},
            smoke={"steps": s},
            reps=3 if n < 1000 else 1,
            warmup=False,
        )
        for n, s in ((10, 2), (100, 4), (1000, 6))
    ),
)
