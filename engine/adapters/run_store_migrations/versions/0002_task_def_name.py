"""Task rows store their task definition name.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

``task_def_name`` is Conductor's ``taskDefName``: for a WORKER task, its task type (the
queue it goes to is derived from it, never the other way round); for the other types,
the task's ``name`` in the definition. Rows written before this revision get the type
of WORKER rows back from their queue name (``<type>``, ``<type>-high`` or
``<domain>-<type>``), once, here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_HIGH = "-high"


def _type_of_queue(queue: str, domain: str | None) -> str:
    if domain and queue.startswith(domain + "-"):
        return queue[len(domain) + 1 :]
    if queue.endswith(_HIGH):
        return queue[: -len(_HIGH)]
    return queue


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("task_def_name", sa.String(255)))
    tasks = sa.table(
        "tasks",
        sa.column("task_id", sa.String),
        sa.column("task_type", sa.String),
        sa.column("queue_name", sa.String),
        sa.column("domain", sa.String),
        sa.column("task_def_name", sa.String),
    )
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(tasks.c.task_id, tasks.c.queue_name, tasks.c.domain).where(
            tasks.c.task_type == "WORKER", tasks.c.queue_name.is_not(None)
        )
    ).all()
    for task_id, queue, domain in rows:
        conn.execute(
            tasks.update()
            .where(tasks.c.task_id == task_id)
            .values(task_def_name=_type_of_queue(queue, domain))
        )


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("task_def_name")
