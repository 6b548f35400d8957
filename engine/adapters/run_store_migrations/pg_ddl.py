"""PostgreSQL DDL that keeps a busy table's writers waiting for a moment at most, for
the run store's migrations.

Replicas of the previous version keep handing out tasks and taking results while a new
one migrates at its start, and two kinds of DDL would stop them:

* A plain ``CREATE INDEX`` holds a SHARE lock on its table while it builds: every write
  to the table (on ``leases``, every hand-out and result) waits for the whole build.
  :func:`create_index` builds it ``CONCURRENTLY``, after dropping one that an
  interrupted build left INVALID (its migration was not recorded, so it runs again).
* ``ALTER TABLE ... ADD COLUMN`` needs the ACCESS EXCLUSIVE lock, so it waits for every
  transaction using the table to end, and every statement on the table queues behind
  it meanwhile. :func:`add_column` tries it with a lock timeout of
  :data:`LOCK_TIMEOUT_MS` and again after a pause, until :data:`DEADLINE_SECONDS`: a
  writer waits behind one attempt at most.

Both need to run outside a transaction (alembic's autocommit block), which env.py
allows when it runs each migration in a transaction of its own under a session-level
lock (:data:`OUTSIDE_TRANSACTIONS`). Otherwise (SQLite, or PostgreSQL in a caller's
transaction) they are the plain operations, in the migration's transaction.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

__all__ = [
    "DEADLINE_SECONDS",
    "LOCK_TIMEOUT_MS",
    "OUTSIDE_TRANSACTIONS",
    "add_column",
    "create_index",
]

#: ``config.attributes`` key env.py sets while a migration may leave its transaction
OUTSIDE_TRANSACTIONS = "stepway_ddl_outside_transactions"

#: how long one attempt of a DDL statement may wait for its lock
LOCK_TIMEOUT_MS = 200
#: pause between attempts
RETRY_PAUSE_SECONDS = 0.5
#: how long a DDL statement is tried before the migration fails
DEADLINE_SECONDS = 600.0

_LOCK_NOT_AVAILABLE = "55P03"


def _outside_transactions() -> bool:
    context = op.get_context()
    config = context.config
    return (
        context.dialect.name == "postgresql"
        and config is not None
        and bool(config.attributes.get(OUTSIDE_TRANSACTIONS))
    )


def add_column(table: str, column: sa.Column[object]) -> None:
    """Adds ``column`` to ``table`` (a nullable column without a default: no rewrite)."""
    if not _outside_transactions():
        with op.batch_alter_table(table) as batch:
            batch.add_column(column)
        return
    bind = op.get_bind()
    preparer = bind.dialect.identifier_preparer
    ddl = (
        f"ALTER TABLE {preparer.quote(table)} ADD COLUMN IF NOT EXISTS "
        f"{preparer.quote(column.name)} {column.type.compile(dialect=bind.dialect)}"
    )
    with op.get_context().autocommit_block():
        _with_lock_timeout(ddl)


def _with_lock_timeout(ddl: str) -> None:
    bind = op.get_bind()
    deadline = time.monotonic() + DEADLINE_SECONDS
    # the connection's own lock timeout (the run store's default, the URL's) comes back
    # after the DDL: the connection goes back to the store's pool
    before = bind.execute(sa.text("SELECT current_setting('lock_timeout')")).scalar_one()
    bind.execute(sa.text(f"SET lock_timeout = {LOCK_TIMEOUT_MS}"))
    try:
        while True:
            try:
                bind.execute(sa.text(ddl))
                return
            except sa.exc.OperationalError as exc:
                if getattr(exc.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                    raise
                if time.monotonic() + RETRY_PAUSE_SECONDS > deadline:
                    raise RuntimeError(
                        f"{ddl!r} could not take its lock within {DEADLINE_SECONDS:.0f} s "
                        f"({LOCK_TIMEOUT_MS} ms at a time): a transaction on the table "
                        "stayed open all along"
                    ) from exc
                time.sleep(RETRY_PAUSE_SECONDS)
    finally:
        bind.execute(
            sa.text("SELECT set_config('lock_timeout', :before, false)"), {"before": before}
        )


def create_index(name: str, table: str, columns: list[str], *, where: str) -> None:
    """Creates the partial index ``name`` on ``table`` (``where``: its predicate)."""
    if not _outside_transactions():
        op.create_index(
            name,
            table,
            columns,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )
        return
    with op.get_context().autocommit_block():
        bind = op.get_bind()
        valid = bind.execute(
            sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"),
            {"name": name},
        ).scalar()
        if valid is False:  # left by a build that was interrupted
            bind.execute(
                sa.text(f"DROP INDEX CONCURRENTLY {bind.dialect.identifier_preparer.quote(name)}")
            )
        op.create_index(
            name,
            table,
            columns,
            postgresql_where=sa.text(where),
            postgresql_concurrently=True,
            if_not_exists=True,
        )
