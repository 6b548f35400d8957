"""The results of built-in steps done in an orchestration's work item.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

Where the engine process hosts the activities too (role ``all``), an HTTP, INLINE or
JSON_JQ_TRANSFORM step is done in the orchestration's work item instead of by the
built-in activity (``engine.runtime.interpreter.LocalBuiltin``), so its result is in no
history event. ``step_results`` keeps it, per run, task and attempt, written before the
work item completes; a replay of that work item reads it here where it would have read
the activity's completion from the history. ``execution`` is the run's execution (its
continue-as-new count): a write deletes the rows of the run's earlier executions, which
no replay reads again, so a run keeps one execution's (at most about
``STEPS_PER_EXECUTION`` rows). The rest go with their run (``delete_run``); the primary
key's first column serves both deletes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "step_results",
        sa.Column("workflow_id", sa.String(255), primary_key=True),
        sa.Column("task_id", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("execution", sa.Integer, nullable=False),
        sa.Column(
            "result", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("step_results")
