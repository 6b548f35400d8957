"""Alembic migrations of the run store (SQLite and PostgreSQL share one history).

Applied programmatically by ``engine.adapters.run_store_sql.SqlRunStore`` on open
(``upgrade head``); see ``upgrade_to_head`` in that module.
"""
