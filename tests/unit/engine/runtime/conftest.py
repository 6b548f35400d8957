"""Fixtures of the interpreter's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.adapters.run_store_sql import SqlRunStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    """A real SQLite run store (the definitions the interpreter reads)."""
    s = SqlRunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        yield s
    finally:
        s.close()
