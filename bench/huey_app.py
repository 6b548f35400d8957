"""The Huey app of the bench: a SQLite-backed Huey whose file comes from
``BENCH_HUEY_DB`` (Huey's consumer imports tasks from a module, so they live here)."""

from __future__ import annotations

import os

from huey import SqliteHuey

huey = SqliteHuey("bench", filename=os.environ.get("BENCH_HUEY_DB", "bench-huey.db"))


@huey.task()
def noop(value: int) -> int:
    return value
