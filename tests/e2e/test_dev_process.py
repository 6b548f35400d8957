"""``stepway dev`` as its users run it: SIGTERM and SIGINT stop it cleanly with its
children, and after a crash (kill -9) no worker is handed work of a run that was lost."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from control_plane.cli.dev import LOST_REASON

from .dev_process import DevProcess, alive, children_of


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_stepway_dev_with_its_workers_and_exit_code_0(
    tmp_path: Path, signum: int
) -> None:
    dev = DevProcess(tmp_path / "data", with_workers=True)
    try:
        deadline = time.monotonic() + 60
        children = children_of(dev.proc.pid)
        while len(children) < 2 and time.monotonic() < deadline:  # workers, evaluators
            time.sleep(0.2)
            children = children_of(dev.proc.pid)
        assert children, dev.output()
        dev.signal(signum)
        assert dev.wait(120) == 0, dev.output()
        assert "Stepway stopped." in dev.output()
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in children if alive(pid)], "children outlived stepway dev"
    finally:
        dev.close()


@pytest.mark.slow
def test_after_a_kill_9_no_task_of_a_lost_run_is_handed_to_a_worker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    dev = DevProcess(data)
    try:
        dev.register_task_def("lost_work")
        dev.register_workflow(
            {
                "name": "lost_flow",
                "tasks": [{"name": "lost_work", "taskReferenceName": "w", "type": "SIMPLE"}],
            }
        )
        ids = [dev.start("lost_flow", {"i": i}) for i in range(4)]
        # every run has queued its task; one of them is handed to a worker before the crash
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = [dev.run(i).get("tasks") or [] for i in ids]
            if all(rows):
                break
            time.sleep(0.2)
        held = dev.poll("lost_work", timeout_ms=2000)[:1]
        assert held, "no task was handed out before the crash"
        dev.kill()
    finally:
        dev.close()

    again = DevProcess(data, port=dev.port)
    try:
        for workflow_id in ids:
            run = again.run(workflow_id)
            assert run["status"] == "FAILED"
            assert run["reasonForIncompletion"] == LOST_REASON
            assert {t["status"] for t in run["tasks"]} == {"CANCELED"}
        # nothing of the lost runs is handed out, however long a worker polls
        for _ in range(3):
            assert again.poll("lost_work", timeout_ms=1000) == []
        # the worker that held a task before the crash gets 409 for its result
        task = held[0]
        posted = again.http.post(
            "/api/tasks",
            json={
                "workflowInstanceId": task["workflowInstanceId"],
                "taskId": task["taskId"],
                "workerId": "w1",
                "status": "COMPLETED",
                "outputData": {"done": True},
            },
        )
        assert posted.status_code == 409, posted.text
    finally:
        again.close()
