"""Alembic environment for the run store.

Run programmatically: the caller puts an open SQLAlchemy ``Connection`` into
``config.attributes["connection"]``. Run from the command line (``alembic -c``
with ``sqlalchemy.url`` set), it opens its own engine.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, text

# Any 64-bit constant: serialises concurrent ``upgrade head`` of several replicas
# on PostgreSQL (SQLite serialises them with BEGIN IMMEDIATE).
_PG_MIGRATION_LOCK = 0x5374657077617901


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, render_as_batch=True)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url or pass a connection in config.attributes")
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
run_migrations_online()
