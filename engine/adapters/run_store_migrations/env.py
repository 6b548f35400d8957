"""Alembic environment for the run store.

Run programmatically: the caller puts an open SQLAlchemy ``Connection`` into
``config.attributes["connection"]``. Run from the command line (``alembic -c``
with ``sqlalchemy.url`` set), it opens its own engine.

On PostgreSQL, given a connection not in a transaction (``upgrade_to_head`` in
engine/adapters/run_store_sql.py passes one), the migrations take a session-level
advisory lock and run one transaction each, so that a migration may leave its
transaction for DDL that must not hold a lock on a busy table for long (an index built
``CONCURRENTLY``, a column added with a lock timeout: ``pg_ddl.py`` here), while other
replicas starting at the same moment still wait for the lock and then find the schema
at head. Given a connection already in a transaction (tests that stop at a revision),
everything runs in that transaction, under a transaction-level lock, and the migrations
build their DDL plainly. SQLite serialises migrations with BEGIN IMMEDIATE.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, text

from engine.adapters.run_store_migrations.pg_ddl import OUTSIDE_TRANSACTIONS

# Any 64-bit constant: serialises concurrent ``upgrade head`` of several replicas
# on PostgreSQL (SQLite serialises them with BEGIN IMMEDIATE).
_PG_MIGRATION_LOCK = 0x5374657077617901


def _configure(connection: Connection, *, per_migration: bool) -> None:
    context.configure(
        connection=connection,
        target_metadata=None,
        render_as_batch=True,
        transaction_per_migration=per_migration,
    )


def _run(connection: Connection) -> None:
    postgres = connection.dialect.name == "postgresql"
    if postgres and not connection.in_transaction():
        context.config.attributes[OUTSIDE_TRANSACTIONS] = True
        connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        connection.commit()
        try:
            _configure(connection, per_migration=True)
            with context.begin_transaction():
                context.run_migrations()
        finally:
            if connection.in_transaction():
                connection.rollback()  # what a failed migration left open
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_MIGRATION_LOCK})
            connection.commit()
            context.config.attributes.pop(OUTSIDE_TRANSACTIONS, None)
        return
    _configure(connection, per_migration=False)
    with context.begin_transaction():
        if postgres:
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
