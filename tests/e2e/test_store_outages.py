"""A run store that is unavailable for a while (its SQLite file locked by another
connection past the busy timeout) while the engine works: the activities that meet it
are tried again on durable timers, and the run goes on once the lock is released
instead of ending FAILED."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from engine.adapters.backend.embedded import EmbeddedBackend
from engine.app.host import (
    LocalSettings,
)
from engine.language.definitions import RunStatus, TaskStatus
from tests.e2e.conftest import Platform, running_platform


@pytest.fixture
def short_busy_platform(backend: EmbeddedBackend, tmp_path: Path) -> Iterator[Platform]:
    """The e2e platform with a run store that waits at most 0.2 s for a lock."""
    settings = LocalSettings(
        data_dir=tmp_path, run_store_url=f"sqlite:///{tmp_path / 'runs.db'}?timeout=0.2"
    )
    with running_platform(backend, settings) as started:
        yield started


class WriteAttempts:
    """Counts the run store's write transactions begun (``BEGIN IMMEDIATE``), as its
    engine's listeners see them."""

    def __init__(self, platform: Platform) -> None:
        self.count = 0
        self._changed = threading.Condition()
        engine = platform.services.run_store.engine  # the SQLite store's
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement == "BEGIN IMMEDIATE":
            with self._changed:
                self.count += 1
                self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 60) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.count >= count, timeout), (
                f"{self.count} write(s) begun, expected {count}"
            )


def _locked(path: Path) -> sqlite3.Connection:
    lock = sqlite3.connect(path, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    return lock


def test_a_builtin_task_that_meets_a_locked_run_store_runs_once_it_is_free(
    short_busy_platform: Platform, tmp_path: Path
) -> None:
    platform = short_busy_platform
    platform.register(
        {
            "name": "gated",
            "tasks": [
                {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
                {
                    "name": "sum",
                    "taskReferenceName": "sum",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": "$.a + 1",
                        "a": "${approve.output.a}",
                    },
                },
            ],
            "outputParameters": {"sum": "${sum.output.result}"},
        }
    )
    workflow_id = platform.start("gated")
    deadline = time.monotonic() + 30
    while "approve" not in platform.tasks(workflow_id):
        assert time.monotonic() < deadline, "the HUMAN task never became pending"
        time.sleep(0.05)
    writes = WriteAttempts(platform)
    lock = _locked(tmp_path / "runs.db")
    try:
        # the approval: the INLINE task's activity records it, and meets the lock
        platform.complete_ref(workflow_id, "approve", {"a": 41})
        # that write, then another one: the activity tried again (or, before this was
        # handled, the run's end recorded FAILED)
        writes.wait_for(2)
    finally:
        lock.execute("COMMIT")
        lock.close()
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"sum": 42}
    tasks = platform.tasks(workflow_id)
    assert tasks["approve"].status == TaskStatus.COMPLETED
    assert tasks["sum"].status == TaskStatus.COMPLETED
    assert tasks["sum"].attempt == 1  # the same attempt, not a retry of a failed one


def test_a_worker_task_whose_dispatch_meets_a_locked_run_store_is_queued_once_it_is_free(
    short_busy_platform: Platform, tmp_path: Path
) -> None:
    platform = short_busy_platform
    platform.register_task_def({"name": "ship", "retryCount": 0})
    platform.register(
        {
            "name": "gated_worker",
            "tasks": [
                {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
                {
                    "name": "ship",
                    "taskReferenceName": "ship",
                    "type": "WORKER",
                    "inputParameters": {"a": "${approve.output.a}"},
                },
            ],
            "outputParameters": {"shipped": "${ship.output.shipped}"},
        }
    )
    workflow_id = platform.start("gated_worker")
    deadline = time.monotonic() + 30
    while "approve" not in platform.tasks(workflow_id):
        assert time.monotonic() < deadline, "the HUMAN task never became pending"
        time.sleep(0.05)
    writes = WriteAttempts(platform)
    lock = _locked(tmp_path / "runs.db")
    try:
        platform.complete_ref(workflow_id, "approve", {"a": 7})
        writes.wait_for(2)  # the dispatch met the lock, and was tried again
    finally:
        lock.execute("COMMIT")
        lock.close()
    platform.work("ship", lambda task_input: {"shipped": task_input["a"]})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"shipped": 7}
    assert platform.tasks(workflow_id)["ship"].attempt == 1


def test_a_first_decision_that_cannot_read_the_definition_is_made_once_it_can(
    platform: Platform,
) -> None:
    """A run started without a definition snapshot reads its definition's registration
    from the run store before it first decides. SQLite in WAL mode never blocks a read,
    so the busy error it would raise past its busy timeout is raised at the driver for
    the first two reads of the definition: the first decision is given back to the
    backend and made again, instead of the outage failing the run."""
    platform.register(
        {
            "name": "registered_only",
            "tasks": [
                {
                    "name": "mark",
                    "taskReferenceName": "mark",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"seen": "${workflow.input.n}"},
                }
            ],
            "outputParameters": {"seen": "${workflow.variables.seen}"},
        }
    )
    platform.services.definitions.invalidate()
    busy_reads = [2]

    def busy(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "FROM definitions" in statement and busy_reads[0] > 0:
            busy_reads[0] -= 1
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            error.sqlite_errorname = "SQLITE_BUSY"  # type: ignore[attr-defined]
            raise error

    engine = platform.services.run_store.engine
    event.listen(engine, "before_cursor_execute", busy)
    try:
        workflow_id = platform.start("registered_only", {"n": 7})
        run = platform.wait(workflow_id)
    finally:
        event.remove(engine, "before_cursor_execute", busy)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"seen": 7}
    assert busy_reads == [0]
