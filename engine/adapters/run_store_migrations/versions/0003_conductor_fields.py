"""Fields Conductor reports on runs and tasks, and what a retry or restart needs.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

* ``runs.last_retried_time``: Conductor's ``lastRetriedTime`` (epoch ms of the last
  ``retry``; the workflow timeout counts from it).
* ``runs.definition_ref``: the definition snapshot the run executes (a definition given
  inline in the start request has no registration to restart from).
* ``runs.generation``: part of the task ids of the run's current execution; a restart,
  rerun or retry starts a new one so that no task id is used twice.
* ``tasks.retried_task_id`` and ``tasks.retried``: Conductor's ``retriedTaskId`` (the
  attempt a retry replaces) and ``retried`` (a retry replaced this attempt).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("last_retried_time", sa.BigInteger))
        batch.add_column(sa.Column("definition_ref", sa.Text))
        batch.add_column(sa.Column("generation", sa.String(64)))
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("retried_task_id", sa.String(255)))
        batch.add_column(sa.Column("retried", sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("retried")
        batch.drop_column("retried_task_id")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("generation")
        batch.drop_column("definition_ref")
        batch.drop_column("last_retried_time")
