"""engine/app/garbage_collection.py: once a process settles its heap, what start-up made
is out of reach of later collections and the thresholds are the server's; turned off, the
process keeps CPython's defaults. Each case runs in a fresh interpreter: the collector's
state belongs to the whole process, and pytest's must stay as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.app.garbage_collection import SERVER_THRESHOLDS

ROOT = Path(__file__).resolve().parents[4]

# start-up makes 50,000 long-lived containers, then the process settles; a full
# collection afterwards visits only what was made since
PROBE = """
import gc, json, sys
from engine.app.garbage_collection import settle_heap
made_at_start_up = [[i] for i in range(50_000)]
before = gc.get_threshold()
settle_heap(sys.argv[1] == "on")
later = [[j] for j in range(10)]
print(json.dumps({
    "before": before,
    "threshold": gc.get_threshold(),
    "frozen": gc.get_freeze_count(),
    "visited": len(gc.get_objects()),
    "start_up_alive": len(made_at_start_up),
}))
"""


def probe(mode: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_settled_heap_freezes_start_up_and_raises_thresholds() -> None:
    settled = probe("on")
    assert settled["threshold"] == list(SERVER_THRESHOLDS)
    assert settled["threshold"] != settled["before"]
    frozen, visited = settled["frozen"], settled["visited"]
    assert isinstance(frozen, int) and frozen > 50_000
    # the 50,000 containers of start-up are not among what a collection visits
    assert isinstance(visited, int) and visited < 50_000
    assert settled["start_up_alive"] == 50_000  # frozen, not freed


def test_turned_off_keeps_cpythons_collector() -> None:
    kept = probe("off")
    assert kept["threshold"] == kept["before"]
    assert kept["frozen"] == 0
    visited = kept["visited"]
    assert isinstance(visited, int) and visited > 50_000
