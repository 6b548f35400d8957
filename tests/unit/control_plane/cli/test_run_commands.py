"""The CLI's run commands against a live control plane: human times, ``--output json``,
``run --wait`` progress and failure report, the run actions, ``defs``/``taskdefs`` and
``logs``. Rerun and skip (Conductor paths the control plane does not serve yet) are
checked against a local HTTP server that records what the CLI sends."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from typer.testing import CliRunner

from control_plane.cli.main import app
from control_plane.cli.present import human_time, table
from control_plane.durations import human_duration
from engine.language.definitions import RunStatus
from engine.ports.run_store import RunQuery, RunUpdate, TaskRecord, TaskStatus
from tests.unit.control_plane.conftest import Server, taskdef

WF = {
    "name": "wf",
    "version": 1,
    "description": "two steps",
    "inputParameters": ["a"],
    "tasks": [
        {"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"},
        {
            "name": "pick",
            "taskReferenceName": "pick",
            "type": "SWITCH",
            "evaluatorType": "value-param",
            "expression": "k",
            "inputParameters": {"k": "${workflow.input.a}"},
            "decisionCases": {"x": [{"name": "parse", "taskReferenceName": "p2"}]},
        },
    ],
}


def _cli(*args: str, server: str) -> Any:
    return CliRunner().invoke(app, [*args, "--server", server])


def _setup(srv: Server) -> None:
    srv.register(taskdef("parse", description="parses"))
    r = srv.client.post("/api/metadata/workflow", json=WF)
    assert r.status_code == 200, r.text


def _now() -> int:
    return int(time.time() * 1000)


def test_human_times_and_durations() -> None:
    now = 1_800_000_000_000
    assert human_time(now - 5_000, now) == "5 s ago"
    assert human_time(now - 300_000, now) == "5 min ago"
    assert human_time(now - 3 * 3_600_000, now).endswith("(3 h ago)")
    old = human_time(now - 40 * 86_400_000, now)
    assert len(old) == 16 and old[4] == "-" and old[13] == ":"  # 2026-11-01 14:03
    assert human_time(None, now) == "-"
    assert [human_duration(v) for v in (250, 1500, 125_000, 7_260_000)] == [
        "250 ms",
        "1.5 s",
        "2 min 5 s",
        "2 h 1 min",
    ]
    assert table(["A", "BB"], [["xyz", "1"]]) == "A    BB\nxyz  1"


def test_runs_and_status_show_human_times_and_json_for_scripts(srv: Server) -> None:
    _setup(srv)
    started = _cli("run", "wf", "--input", '{"a": 1}', "--correlation-id", "c-9", server=srv.url)
    assert started.exit_code == 0, started.output
    wid = started.stdout.strip()
    listed = _cli("runs", server=srv.url)
    assert listed.exit_code == 0
    assert wid in listed.stdout and "wf v1" in listed.stdout and "s ago" in listed.stdout
    assert str(srv.deps.run_store.get_run(wid).create_time) not in listed.stdout  # type: ignore[union-attr]
    as_json = json.loads(_cli("runs", "--output", "json", server=srv.url).stdout)
    assert as_json["totalHits"] == 1 and as_json["results"][0]["workflowId"] == wid
    by_corr = _cli("runs", "--correlation-id", "nope", "-o", "json", server=srv.url)
    assert json.loads(by_corr.stdout)["totalHits"] == 0
    shown = _cli("status", wid, server=srv.url)
    assert "started" in shown.stdout and "s ago" in shown.stdout and "c-9" in shown.stdout
    assert json.loads(_cli("status", wid, "-o", "json", server=srv.url).stdout)["workflowId"] == wid
    bad = _cli("runs", "--output", "yaml", server=srv.url)
    assert bad.exit_code == 2 and "--output must be text or json" in bad.stderr


def _fail_it(srv: Server, done: threading.Event) -> None:
    """Play the engine: the first task runs, then fails, and the run ends FAILED."""
    store = srv.deps.run_store
    deadline = time.monotonic() + 20
    while not store.search_runs(RunQuery(name="wf")).results:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    wid = store.search_runs(RunQuery(name="wf")).results[0].workflow_id
    now = _now()
    row = TaskRecord(
        task_id=f"{wid}-p1",
        workflow_id=wid,
        reference_task_name="p1",
        task_type="WORKER",
        status=TaskStatus.IN_PROGRESS,
        scheduled_time=now,
        start_time=now,
        queue_name="parse",
        task_def_name="parse",
    )
    store.upsert_task(row, now)
    time.sleep(0.8)
    store.upsert_task(
        row.model_copy(
            update={
                "status": TaskStatus.FAILED,
                "end_time": now + 900,
                "reason_for_incompletion": "the PDF is encrypted",
            }
        ),
        now,
    )
    store.update_run(
        wid,
        RunUpdate(
            status=RunStatus.FAILED,
            reason_for_incompletion="task p1 failed: the PDF is encrypted",
            failed_reference_task_names=["p1"],
        ),
        _now(),
    )
    done.set()


def test_run_wait_shows_progress_then_the_reason_and_failed_task(srv: Server) -> None:
    _setup(srv)
    done = threading.Event()
    engine = threading.Thread(target=_fail_it, args=(srv, done), daemon=True)
    engine.start()
    result = _cli("run", "wf", "--wait", server=srv.url)
    engine.join(10)
    assert done.is_set()
    assert result.exit_code == 1, result.output
    wid, _, rest = result.stdout.partition("\n")
    outcome = json.loads(rest)
    assert outcome["workflowId"] == wid.strip() and outcome["status"] == "FAILED"
    assert outcome["reasonForIncompletion"] == "task p1 failed: the PDF is encrypted"
    assert outcome["failedTasks"] == [
        {
            "referenceTaskName": "p1",
            "taskType": "parse",
            "status": "FAILED",
            "reasonForIncompletion": "the PDF is encrypted",
        }
    ]
    err = result.stderr
    assert "p1: IN_PROGRESS" in err and "p1: FAILED in 900 ms" in err  # progress
    assert "ended FAILED" in err and "reason: task p1 failed: the PDF is encrypted" in err
    assert "failed task: p1 (parse) FAILED: the PDF is encrypted" in err
    shown = _cli("status", wid.strip(), server=srv.url)
    assert "failed task: p1 (parse) FAILED" in shown.stdout


def test_run_actions_steer_the_run(srv: Server) -> None:
    _setup(srv)
    wid = _cli("run", "wf", server=srv.url).stdout.strip()
    assert _cli("pause", wid, server=srv.url).stdout.strip() == f"paused {wid}"
    assert _cli("resume", wid, server=srv.url).stdout.strip() == f"resumed {wid}"
    refused = _cli("retry", wid, server=srv.url)
    assert refused.exit_code == 1 and "409" in refused.stderr and "RUNNING" in refused.stderr
    ended = _cli("terminate", wid, "--reason", "duplicate", server=srv.url)
    assert ended.exit_code == 0 and "terminated" in ended.stdout
    kinds = [(c.kind, c.name, c.data) for c in srv.signals.calls if c.workflow_id == wid]
    assert kinds[1:] == [
        ("suspend", None, "paused through the API"),
        ("resume", None, "resumed through the API"),
        ("event", "stepway.terminate", {"reason": "duplicate"}),
    ]
    srv.deps.run_store.update_run(wid, RunUpdate(status=RunStatus.TERMINATED), _now())
    assert _cli("restart", wid, server=srv.url).exit_code == 0
    assert [c.kind for c in srv.signals.calls if c.workflow_id == wid][-1] == "start"


@dataclass
class Recorder:
    url: str = ""
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    routes: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """A local HTTP server answering the CLI from ``routes`` and recording requests."""
    rec = Recorder()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else None
            path = self.path.split("?")[0]
            rec.requests.append((self.command, self.path, body))
            status, answer = rec.routes.get((self.command, path), (404, {"message": "Not Found"}))
            data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()


def test_rerun_and_skip_send_conductors_requests(recorder: Recorder) -> None:
    recorder.routes[("GET", "/api/workflow/w1")] = (
        200,
        {"workflowId": "w1", "tasks": [{"referenceTaskName": "p1", "taskId": "t-p1"}]},
    )
    recorder.routes[("POST", "/api/workflow/w1/rerun")] = (200, "w1")
    recorder.routes[("PUT", "/api/workflow/w1/skiptask/p2")] = (200, "")
    rerun = _cli(
        "rerun", "w1", "--from-task", "p1", "--task-input", '{"x": 1}', server=recorder.url
    )
    assert rerun.exit_code == 0, rerun.output
    assert rerun.stdout.strip() == "w1"
    skipped = _cli("skip", "w1", "p2", "--task-output", '{"y": 2}', server=recorder.url)
    assert skipped.exit_code == 0 and "skipped p2 of w1" in skipped.stdout
    assert recorder.requests[1:] == [
        (
            "POST",
            "/api/workflow/w1/rerun",
            {"reRunFromWorkflowId": "w1", "taskInput": {"x": 1}, "reRunFromTaskId": "t-p1"},
        ),
        ("PUT", "/api/workflow/w1/skiptask/p2", {"taskOutput": {"y": 2}}),
    ]
    missing = _cli("rerun", "w1", "--from-task", "nope", server=recorder.url)
    assert missing.exit_code == 1 and "has no task 'nope'" in missing.stderr
    # a control plane without the route says so
    recorder.routes.pop(("PUT", "/api/workflow/w1/skiptask/p2"))
    old = _cli("skip", "w1", "p2", server=recorder.url)
    assert old.exit_code == 1 and "does not support skip yet" in old.stderr


def test_defs_taskdefs_and_logs(srv: Server) -> None:
    _setup(srv)
    listed = _cli("defs", server=srv.url)
    assert listed.exit_code == 0, listed.output
    assert "wf" in listed.stdout and "two steps" in listed.stdout
    assert "3" in listed.stdout.splitlines()[1]  # tasks, nested ones counted
    shown = _cli("defs", "show", "wf", server=srv.url)
    assert "p1  (SIMPLE parse)" in shown.stdout and "case x:" in shown.stdout
    assert (
        json.loads(_cli("defs", "show", "wf", "-o", "json", server=srv.url).stdout)["name"] == "wf"
    )
    assert _cli("defs", "show", "nope", server=srv.url).exit_code == 1
    tds = _cli("taskdefs", "list", server=srv.url)
    assert "parse" in tds.stdout and "1 FIXED" in tds.stdout
    one = _cli("taskdefs", "show", "parse", server=srv.url)
    assert "response 60 s" in one.stdout
    assert json.loads(_cli("taskdefs", "-o", "json", server=srv.url).stdout)[0]["name"] == "parse"

    wid = srv.run(name="wf")
    task_id = srv.dispatch("parse", workflow_id=wid, ref="p1")
    srv.deps.run_store.append_task_log(task_id, "opened the PDF", _now())
    srv.deps.run_store.append_task_log(task_id, "3 pages", _now())
    logs = _cli("logs", wid, server=srv.url)
    assert logs.exit_code == 0, logs.output
    lines = logs.stdout.splitlines()
    assert len(lines) == 2 and "p1  opened the PDF" in lines[0] and "p1  3 pages" in lines[1]
    entries = json.loads(_cli("logs", wid, "p1", "-o", "json", server=srv.url).stdout)
    assert [e["log"] for e in entries] == ["opened the PDF", "3 pages"]
    assert _cli("logs", wid, "nope", server=srv.url).exit_code == 1
