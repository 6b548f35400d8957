"""A lease records when its deferred message was found settled.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

``leases.settled_at`` (epoch ms; NULL: not known to be settled) is written once the
deferred message named by the lease's ``sequence_number`` was completed, dead-lettered,
or found gone by whoever settled it (``engine/runtime/settlement.py``). A hand-out that
takes the lease again (a new message) clears it. The sweep of deferred messages
settles those of attempts that are over and still NULL: a queue that was unavailable
when the attempt ended left them deferred.

``ix_leases_unsettled`` holds only the leases with a message not marked settled (a
partial index, in both databases), in the order the sweep reads them, so its query
reads those and no others however many leases the store keeps. Leases written before
this revision are NULL: the sweep asks the queue about each of them once, and settles
the messages that an outage left deferred before it.

On PostgreSQL the column is added with a lock timeout and the index built
``CONCURRENTLY`` (``pg_ddl.py``): replicas of the previous version go on handing out
tasks while a new one applies this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engine.adapters.run_store_migrations import pg_ddl

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_UNSETTLED = "settled_at IS NULL AND sequence_number IS NOT NULL"


def upgrade() -> None:
    pg_ddl.add_column("leases", sa.Column("settled_at", sa.BigInteger))
    pg_ddl.create_index(
        "ix_leases_unsettled", "leases", ["acquired_at", "task_id", "attempt"], where=_UNSETTLED
    )


def downgrade() -> None:
    op.drop_index("ix_leases_unsettled", table_name="leases")
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("settled_at")
