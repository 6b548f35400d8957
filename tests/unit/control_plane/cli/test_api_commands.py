"""`stepway apply`, `run`, `status`, `runs`, `workers` against a live control plane."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from control_plane.cli.main import app
from tests.unit.control_plane.conftest import Server, taskdef


def test_apply_dry_run_then_apply_then_runs(srv: Server, tmp_path: Path) -> None:
    (tmp_path / "parse.json").write_text(json.dumps(taskdef("parse")))
    (tmp_path / "wf.json").write_text(
        json.dumps(
            {
                "name": "wf",
                "version": 1,
                "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
            }
        )
    )
    cli = CliRunner()
    srv_opt = ["--server", srv.url]
    dry = cli.invoke(app, ["apply", str(tmp_path / "parse.json"), "--dry-run", *srv_opt])
    assert dry.exit_code == 0, dry.output
    assert "taskdef parse: would create" in dry.output and "queue parse-high" in dry.output
    assert srv.deps.run_store.list_task_defs() == []
    done = cli.invoke(app, ["apply", str(tmp_path), *srv_opt])
    assert done.exit_code == 0, done.output
    assert "workflow wf v1: create" in done.output
    again = cli.invoke(app, ["apply", str(tmp_path), *srv_opt])
    assert "taskdef parse: unchanged" in again.output
    started = cli.invoke(app, ["run", "wf", "--input", '{"a": 1}', *srv_opt])
    assert started.exit_code == 0, started.output
    wid = started.output.strip()
    shown = cli.invoke(app, ["status", wid, *srv_opt])
    assert "RUNNING" in shown.output
    listed = cli.invoke(app, ["runs", "--status", "RUNNING", *srv_opt])
    assert wid in listed.output
    workers = cli.invoke(app, ["workers", *srv_opt])
    assert "parse" in workers.output and "WARNING: no active worker" in workers.output
    bad = cli.invoke(app, ["run", "nope", *srv_opt])
    assert bad.exit_code == 1 and "404" in bad.output
