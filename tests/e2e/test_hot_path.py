"""The interpreter's hot path, counted (not timed): a task row is written once per
transition of the task (SQL statements on the run store, seen by a SQLAlchemy event
listener)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from engine.language.definitions import RunStatus, TaskStatus

_TASK_WRITE = re.compile(r"^(INSERT INTO|UPDATE) tasks\b")


@contextmanager
def task_row_writes(platform: Any) -> Iterator[list[str]]:
    """The INSERT and UPDATE statements on the task rows inside the block."""
    seen: list[str] = []
    engine = platform.services.run_store.engine

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        text = " ".join(statement.split())
        if _TASK_WRITE.match(text):
            seen.append(text)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_a_worker_task_row_is_written_once_per_transition(platform: Any) -> None:
    platform.register_task_def({"name": "hot", "retryCount": 0, "responseTimeoutSeconds": 60})
    platform.register(
        {
            "name": "hot_path",
            "version": 1,
            "tasks": [
                {
                    "name": "hot",
                    "taskReferenceName": "h",
                    "type": "WORKER",
                    "inputParameters": {"n": "${workflow.input.n}"},
                }
            ],
        }
    )
    with task_row_writes(platform) as writes:
        workflow_id = platform.start("hot_path", {"n": 1})
        platform.work("hot", lambda task_input: {"doubled": task_input["n"] * 2})
        run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED
    row = platform.tasks(workflow_id)["h"]
    assert row.status == TaskStatus.COMPLETED and row.output_data == {"doubled": 2}
    # SCHEDULED (the dispatch), IN_PROGRESS (the hand-out), COMPLETED (the result)
    assert Counter(w.split()[0] for w in writes) == {"INSERT": 1, "UPDATE": 2}, writes


def test_inline_tasks_are_written_once_per_transition(platform: Any) -> None:
    platform.register(
        {
            "name": "inline_path",
            "version": 1,
            "tasks": [
                {
                    "name": "set",
                    "taskReferenceName": "s",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"x": 1},
                },
                {
                    "name": "calc",
                    "taskReferenceName": "c",
                    "type": "INLINE",
                    "inputParameters": {"expression": "1 + 1"},
                },
            ],
        }
    )
    with task_row_writes(platform) as writes:
        workflow_id = platform.start("inline_path")
        run = platform.wait(workflow_id)

    assert run.status == RunStatus.COMPLETED
    assert {ref: row.status for ref, row in platform.tasks(workflow_id).items()} == {
        "s": TaskStatus.COMPLETED,
        "c": TaskStatus.COMPLETED,
    }
    # SET_VARIABLE is decided and completed in one step: one write. INLINE is an activity
    # (evaluated once, in an evaluator process): written SCHEDULED with its activity's
    # input, and COMPLETED with the next I/O
    assert Counter(w.split()[0] for w in writes) == {"INSERT": 2, "UPDATE": 1}, writes
