"""A fresh schema of the test PostgreSQL server (``STEPWAY_TEST_POSTGRES_URL``) for one
test: the run store's tables are made in it, and it is dropped afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url


@contextmanager
def fresh_schema(server_url: str) -> Iterator[URL]:
    """``server_url`` with ``options`` that put a new schema first on the search path."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(server_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
