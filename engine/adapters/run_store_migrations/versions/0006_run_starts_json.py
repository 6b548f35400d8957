"""A pending start's orchestration input is a JSON column.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

``run_starts.run_input`` was text holding JSON that the adapter encoded and decoded
itself; it is now the run store's JSON column type, as the run's own ``runs.input``
(JSONB on PostgreSQL, JSON on SQLite). On PostgreSQL the column is converted in place
(``USING run_input::jsonb``). On SQLite a JSON column is text as well: the table is
rebuilt with the column declared JSON (Alembic's batch mode copies the rows unchanged),
so that the migrated schema names the type the adapter's table does.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "run_starts",
            "run_input",
            type_=postgresql.JSONB(),
            existing_type=sa.Text(),
            existing_nullable=False,
            postgresql_using="run_input::jsonb",
        )
        return
    with op.batch_alter_table("run_starts") as batch:
        batch.alter_column(
            "run_input", type_=sa.JSON(), existing_type=sa.Text(), existing_nullable=False
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "run_starts",
            "run_input",
            type_=sa.Text(),
            existing_type=postgresql.JSONB(),
            existing_nullable=False,
            postgresql_using="run_input::text",
        )
        return
    with op.batch_alter_table("run_starts") as batch:
        batch.alter_column(
            "run_input", type_=sa.Text(), existing_type=sa.JSON(), existing_nullable=False
        )
