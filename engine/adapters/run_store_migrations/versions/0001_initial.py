"""Initial run store schema.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

One schema for SQLite and PostgreSQL. JSON columns are JSONB on PostgreSQL and
JSON (text) on SQLite. Times are epoch milliseconds (BIGINT).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    pg = postgresql.JSONB(none_as_null=True)
    return sa.JSON(none_as_null=True).with_variant(pg, "postgresql")


_ID = sa.String(255)
_MS = sa.BigInteger()


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("workflow_id", _ID, primary_key=True),
        sa.Column("name", _ID, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("input", _json()),
        sa.Column("input_ref", sa.Text),
        sa.Column("output", _json()),
        sa.Column("output_ref", sa.Text),
        sa.Column("variables", _json()),
        sa.Column("correlation_id", _ID),
        sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
        sa.Column("task_to_domain", _json()),
        sa.Column("idempotency_key", _ID),
        sa.Column("parent_workflow_id", _ID),
        sa.Column("parent_task_id", _ID),
        sa.Column("reason_for_incompletion", sa.Text),
        sa.Column("failed_reference_task_names", _json()),
        sa.Column("create_time", _MS, nullable=False),
        sa.Column("update_time", _MS, nullable=False),
        sa.Column("end_time", _MS),
    )
    # NULL keys never collide (SQLite and PostgreSQL both treat NULLs as distinct).
    op.create_index("uq_runs_name_idempotency", "runs", ["name", "idempotency_key"], unique=True)
    op.create_index("ix_runs_create_time", "runs", ["create_time", "workflow_id"])
    op.create_index("ix_runs_name_create_time", "runs", ["name", "create_time"])
    op.create_index("ix_runs_status_create_time", "runs", ["status", "create_time"])
    op.create_index("ix_runs_correlation_id", "runs", ["correlation_id", "create_time"])
    op.create_index("ix_runs_parent", "runs", ["parent_workflow_id"])

    op.create_table(
        "tasks",
        sa.Column("task_id", _ID, primary_key=True),
        sa.Column("workflow_id", _ID, nullable=False),
        sa.Column("reference_task_name", _ID, nullable=False),
        sa.Column("task_type", _ID, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("retry_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("seq", sa.Integer, nullable=False, server_default="0"),
        sa.Column("input_data", _json()),
        sa.Column("input_ref", sa.Text),
        sa.Column("output_data", _json()),
        sa.Column("output_ref", sa.Text),
        sa.Column("reason_for_incompletion", sa.Text),
        sa.Column("scheduled_time", _MS),
        sa.Column("start_time", _MS),
        sa.Column("end_time", _MS),
        sa.Column("update_time", _MS),
        sa.Column("worker_id", _ID),
        sa.Column("poll_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("callback_after_seconds", sa.Integer, nullable=False, server_default="0"),
        sa.Column("domain", _ID),
        sa.Column("queue_name", _ID),
        sa.Column("iteration", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("ix_tasks_workflow_seq", "tasks", ["workflow_id", "seq"])
    op.create_index("ix_tasks_type_status", "tasks", ["task_type", "status"])

    op.create_table(
        "task_logs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("log", sa.Text, nullable=False),
        sa.Column("created_time", _MS, nullable=False),
    )
    op.create_index("ix_task_logs_task", "task_logs", ["task_id", "id"])

    op.create_table(
        "definitions",
        sa.Column("name", _ID, primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("definition", _json(), nullable=False),
        sa.Column("create_time", _MS, nullable=False),
        sa.Column("update_time", _MS, nullable=False),
    )
    op.create_table(
        "task_defs",
        sa.Column("name", _ID, primary_key=True),
        sa.Column("definition", _json(), nullable=False),
        sa.Column("create_time", _MS, nullable=False),
        sa.Column("update_time", _MS, nullable=False),
    )
    op.create_table(
        "instructions",
        sa.Column("name", _ID, primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("create_time", _MS, nullable=False),
    )
    # domain '' stands for "no domain" so that it can be part of the primary key.
    op.create_table(
        "poll_data",
        sa.Column("task_type", _ID, primary_key=True),
        sa.Column("domain", _ID, primary_key=True),
        sa.Column("worker_id", _ID, primary_key=True),
        sa.Column("last_poll_time", _MS, nullable=False),
    )
    op.create_table(
        "leases",
        sa.Column("task_id", _ID, primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("worker_id", _ID, nullable=False),
        sa.Column("expires_at", _MS, nullable=False),
        sa.Column("acquired_at", _MS, nullable=False),
        sa.Column("sequence_number", sa.BigInteger),
        sa.Column("queue_name", _ID),
        sa.Column("released", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "concurrency_counters",
        sa.Column("task_type", _ID, primary_key=True),
        sa.Column("in_use", sa.Integer, nullable=False),
    )
    op.create_table(
        "rate_windows",
        sa.Column("task_type", _ID, primary_key=True),
        sa.Column("window_start", _MS, nullable=False),
        sa.Column("granted", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "rate_windows",
        "concurrency_counters",
        "leases",
        "poll_data",
        "instructions",
        "task_defs",
        "definitions",
        "task_logs",
        "tasks",
        "runs",
    ):
        op.drop_table(table)
