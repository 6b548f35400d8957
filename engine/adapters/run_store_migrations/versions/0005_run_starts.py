"""Pending starts: the orchestration input of runs whose start was answered.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

``run_starts`` holds, per run, the input of its orchestration (compact JSON text) from
the transaction that created the run until the orchestration is scheduled, so that a
start answered once its run row committed is scheduled even if the process ends in
between (pending starts left over are scheduled at startup). ``created_at`` is the
run's create time; the index serves reading them oldest first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_starts",
        sa.Column("workflow_id", sa.String(255), primary_key=True),
        sa.Column("run_input", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_run_starts_created_at", "run_starts", ["created_at", "workflow_id"])


def downgrade() -> None:
    op.drop_index("ix_run_starts_created_at", table_name="run_starts")
    op.drop_table("run_starts")
