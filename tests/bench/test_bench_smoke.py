"""The benchmark suite keeps working: ``python -m bench --smoke`` (tiny sizes) runs every
workload for Stepway (as ``stepway dev``, and with engine and control plane apart) and
the hand-written durabletask floor (the peers are an optional dependency group that CI
does not install) and writes its tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke_run_measures_every_workload(tmp_path: Path) -> None:
    out, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    out.write_text("# Benchmarks\n\nhand-written text stays\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--systems",
            "stepway,stepway_taskapi,stepway_split,floor",
            "--out",
            str(out),
            "--json",
            str(raw),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    results = json.loads(raw.read_text())["results"]
    from bench.workloads import WORKLOADS

    for workload in WORKLOADS:
        assert workload.id in results, f"{workload.id} was not run"
        for cell, reps in results[workload.id].items():
            assert reps and all("error" not in r for r in reps), (workload.id, cell, reps)
    starts = results["starts"]["0"][0]
    assert starts["completed"] == starts["runs"] == 5

    doc = out.read_text()
    assert doc.startswith("# Benchmarks\n\nhand-written text stays\n")
    for heading in (
        "### Side by side",
        "### History per step",
        "### Cost per step",
        "### Targets of issue 13",
    ):
        assert heading in doc
    assert "| 20 HTTP steps, serial | ms per run |" in doc
