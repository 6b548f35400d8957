"""The processes that hold the task queue sweep the deferred messages of attempts that
are over and that no one settled: ``stepway engine`` hosting the activities, and
``stepway dev`` (engine/runtime/deferred_sweep.py). Here a previous session left one:
a task handed out and completed an hour ago while the queue was unavailable."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from control_plane.cli.dev import DevPlatform
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_store_sql import SqlRunStore
from engine.app.config import EngineConfig
from engine.app.process import run_engine
from engine.ports.queue import QueueSettings, dead_letter_queue_name
from engine.ports.run_store import NewRun, RunStatus, TaskRecord, TaskStatus, TaskUpdate
from engine.runtime.deferred_sweep import DeferredSweep
from engine.runtime.settlement import DEAD_LETTER_REASON
from tests.e2e.conftest import Platform

REPO = Path(__file__).resolve().parents[2]
QUEUE = "parse"
HOUR_MS = 3_600_000


def _now_ms() -> int:
    return int(time.time() * 1000)


def leave_deferred(data_dir: Path) -> None:
    """In the run store and queue files of ``data_dir`` (the layout of ``stepway dev``): a
    run that COMPLETED an hour ago, whose task's message is still deferred (its result
    was recorded while the queue was unavailable)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    store = SqlRunStore(f"sqlite:///{data_dir / 'runs.db'}")
    SqliteQueueProvisioner(data_dir / "queues.db").ensure_queue(QUEUE, QueueSettings())
    queue = SqliteTaskQueue(data_dir / "queues.db")
    then = _now_ms() - HOUR_MS
    try:
        store.create_run(
            NewRun(
                workflow_id="w1", name="wf", version=1, status=RunStatus.COMPLETED, create_time=then
            )
        )
        store.upsert_task(
            TaskRecord(
                task_id="t1",
                workflow_id="w1",
                reference_task_name="p",
                task_type="WORKER",
                task_def_name=QUEUE,
                queue_name=QUEUE,
            ),
            then,
        )
        queue.send(QUEUE, {"taskId": "t1"}, message_id="t1:1")
        [message] = queue.receive(QUEUE)
        handed = store.hand_out_task(
            "t1",
            1,
            "wk",
            lease_expires_at=then + 60_000,
            now=then,
            sequence_number=message.sequence_number,
            queue_name=QUEUE,
        )
        assert handed.task is not None
        queue.defer(QUEUE, message)
        done = TaskUpdate(status=TaskStatus.COMPLETED, end_time=then + 1000)
        assert store.finish_task("t1", 1, done, then + 1000, holder="wk")
        assert queue.depth(QUEUE).deferred == 1
    finally:
        queue.close()
        store.close()


def deferred(data_dir: Path) -> Callable[[], int]:
    queue = SqliteTaskQueue(data_dir / "queues.db")

    def count() -> int:
        return queue.depth(QUEUE).deferred

    return count


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_stepway_dev_settles_a_message_a_queue_outage_left_deferred(tmp_path: Path) -> None:
    data = tmp_path / "data"
    leave_deferred(data)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    platform = DevPlatform(data_dir=data, port=port, repo_root=REPO, deferred_sweep_seconds=0.05)
    platform.start()
    try:
        count = deferred(data)
        wait_until(lambda: count() == 0, "stepway dev to settle the deferred message")
        dead = SqliteTaskQueue(data / "queues.db").depth(QUEUE).dead_lettered
        assert dead == 0  # completed: the attempt COMPLETED
    finally:
        platform.stop()


def test_an_engine_hosting_the_activities_settles_a_message_left_deferred(
    backend: EmbeddedBackend, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    leave_deferred(data)
    config = EngineConfig.from_env(
        {
            "STEPWAY_ENGINE_ROLE": "activities",
            "STEPWAY_DATA_DIR": str(data),
            "STEPWAY_BACKEND_KIND": "embedded",
            "STEPWAY_BACKEND_ADDRESS": backend.address,
            "STEPWAY_GC_TUNING": "false",
            "STEPWAY_EVALUATOR_PROCESSES": "1",
            "STEPWAY_DEFERRED_SWEEP_SECONDS": "0.05",
        }
    )
    stop = threading.Event()
    engine = threading.Thread(target=run_engine, args=(config, stop), daemon=True)
    engine.start()
    try:
        count = deferred(data)
        wait_until(lambda: count() == 0, "the engine to settle the deferred message")
    finally:
        stop.set()
        engine.join(60)
    assert not engine.is_alive()


def test_a_final_failure_met_by_a_locked_queue_ends_its_run_and_is_swept_later(
    platform: Platform, tmp_path: Path
) -> None:
    """The engine dead-letters the message of an attempt that failed for good as it
    records the run's end. With the queue unavailable then, the run still ends FAILED
    (settling is housekeeping), the message stays deferred, and the sweep dead-letters
    it, with the row's reason, once the queue is back."""
    platform.register_task_def({"name": "ship", "retryCount": 0})
    platform.register(
        {"name": "ship_once", "tasks": [{"name": "ship", "taskReferenceName": "ship"}]}
    )
    workflow_id = platform.start("ship_once")
    body = platform.take("ship", signal=False)
    queue_file = tmp_path / "queues.db"
    lock = sqlite3.connect(queue_file, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        # a failure leaves the message to the engine (Platform.complete, as the Task API)
        platform.complete(body, status="FAILED", reason="disk full")
        run = platform.wait(workflow_id, timeout=40)
        assert run.status == RunStatus.FAILED, run.reason_for_incompletion
    finally:
        lock.execute("COMMIT")
        lock.close()
    queue = platform.services.queue
    assert queue.depth("ship").deferred == 1
    lease = platform.services.run_store.get_lease(body["taskId"], 1)
    assert lease is not None and lease.settled_at is None
    sweep = DeferredSweep(platform.services.run_store, queue, grace_ms=0)
    assert sweep.run_once() == 1
    depth = queue.depth("ship")
    assert (depth.deferred, depth.dead_lettered) == (0, 1)
    [dead] = queue.peek(dead_letter_queue_name("ship"))
    assert dead.json()["taskId"] == body["taskId"]
    assert (dead.dead_letter_reason, dead.dead_letter_description) == (
        DEAD_LETTER_REASON,
        "disk full",
    )
    assert sweep.run_once() == 0
