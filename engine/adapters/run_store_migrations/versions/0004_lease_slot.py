"""A lease names the concurrency slot it holds.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

``leases.slot`` is the task type whose concurrency counter the attempt holds a slot of
(None: it holds none). The hand-out takes a slot only for a task type with a
``concurrentExecLimit``, and releasing the lease frees the slot it names, in the same
transaction, so a slot is given back exactly once by whoever ends the attempt. Before
this revision every polled attempt counted (the lease carried the message's sequence
number): unreleased leases of polled attempts get their task type here, once.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.add_column(sa.Column("slot", sa.String(255)))
    leases = sa.table(
        "leases",
        sa.column("task_id", sa.String),
        sa.column("sequence_number", sa.BigInteger),
        sa.column("released", sa.Boolean),
        sa.column("slot", sa.String),
    )
    tasks = sa.table(
        "tasks", sa.column("task_id", sa.String), sa.column("task_def_name", sa.String)
    )
    op.get_bind().execute(
        leases.update()
        .where(leases.c.sequence_number.is_not(None), leases.c.released == sa.false())
        .values(
            slot=sa.select(tasks.c.task_def_name)
            .where(tasks.c.task_id == leases.c.task_id)
            .scalar_subquery()
        )
    )


def downgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("slot")
