"""Queue provisioning for the SQLite task queue: rows in the queue database.

The SQLite :class:`~engine.adapters.queue_sqlite.SqliteTaskQueue` refuses sends
to a queue that has no row here (``QueueNotFound``), as Service Bus does."""

from __future__ import annotations

import os
import time

from engine.adapters.queue_sqlite import (
    SqliteDatabase,
    settings_from_json,
    settings_to_json,
)
from engine.ports.queue import QueueSettings
from engine.ports.queue_provisioning import (
    ProvisionOutcome,
    ProvisionResult,
    plan_update,
    validate_queue_name,
)


class SqliteQueueProvisioner:
    """:class:`engine.ports.queue_provisioning.QueueProvisioner` on a queue DB file."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_seconds: float = 5.0) -> None:
        self._db = SqliteDatabase(path, busy_timeout_seconds)

    def ensure_queue(self, name: str, settings: QueueSettings) -> ProvisionResult:
        validate_queue_name(name)
        with self._db.write() as con:
            now = time.time()
            row = con.execute("SELECT settings FROM sbq_queues WHERE name = ?", (name,)).fetchone()
            if row is None:
                con.execute(
                    "INSERT INTO sbq_queues (name, settings, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?)",
                    (name, settings_to_json(settings), now, now),
                )
                return ProvisionResult(name, ProvisionOutcome.CREATED, settings)
            current = settings_from_json(row[0])
            target, changed, frozen = plan_update(current, settings)
            if not changed:
                return ProvisionResult(
                    name, ProvisionOutcome.UNCHANGED, current, not_changeable=frozen
                )
            con.execute(
                "UPDATE sbq_queues SET settings = ?, updated_at = ? WHERE name = ?",
                (settings_to_json(target), now, name),
            )
            return ProvisionResult(name, ProvisionOutcome.UPDATED, target, changed, frozen)

    def get_queue(self, name: str) -> QueueSettings | None:
        with self._db.read() as con:
            row = con.execute("SELECT settings FROM sbq_queues WHERE name = ?", (name,)).fetchone()
        return None if row is None else settings_from_json(row[0])

    def list_queues(self) -> list[str]:
        with self._db.read() as con:
            rows = con.execute("SELECT name FROM sbq_queues ORDER BY name").fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        self._db.close()
