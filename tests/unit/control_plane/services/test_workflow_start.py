"""Starting a run reads its definition once and never reads back the row it wrote:
counted as SQL statements on the run store (a SQLAlchemy event listener), not timed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from tests.unit.control_plane.conftest import Server, taskdef


@contextmanager
def statements(srv: Server) -> Iterator[list[str]]:
    """Every SQL statement the run store executes inside the block."""
    seen: list[str] = []
    engine: Any = srv.deps.run_store.engine  # type: ignore[attr-defined]

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def reads_of(table: str, seen: list[str]) -> list[str]:
    return [s for s in seen if s.startswith("SELECT") and re.search(rf"\bFROM {table}\b", s)]


def test_a_start_reads_the_definition_once_and_not_the_run_it_wrote(srv: Server) -> None:
    """The first start of a registration reads which one is current and then the
    definition; the next start only which one is current (its definition is not read
    nor decoded again), and no start reads back the run it wrote."""
    srv.register(taskdef("parse"))
    schema = {"type": "object", "properties": {"url": {"type": "string"}}}
    definition = {
        "name": "wf",
        "version": 1,
        "inputSchema": schema,
        "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
    }
    assert srv.client.post("/api/metadata/workflow", json=definition).status_code == 200

    with statements(srv) as seen:
        r = srv.client.post("/api/workflow/wf", json={"url": "u"})
    assert r.status_code == 200, r.text

    first = reads_of("definitions", seen)
    assert len(first) == 2 and "definitions.definition" in first[1]
    assert "definitions.definition" not in first[0]  # which registration is current
    inserted = next(i for i, s in enumerate(seen) if s.startswith("INSERT INTO runs"))
    assert reads_of("runs", seen[inserted:]) == []

    with statements(srv) as seen:
        again = srv.client.post("/api/workflow/wf", json={"url": "u"})
    assert again.status_code == 200, again.text
    assert reads_of("definitions", seen) == first[:1]
    # the run was started with the snapshot of what was read
    start = srv.signals.start_of(r.text)
    assert start.data["definitionRef"].startswith("definitions/")


def test_a_start_runs_what_is_registered_now(srv: Server) -> None:
    """The parsed definition and its snapshot are reused between starts, but a task
    definition registered again or a definition overwritten is what the next start
    runs."""
    srv.register(taskdef("parse", retryCount=1))
    definition = {
        "name": "wf",
        "version": 1,
        "tasks": [{"name": "parse", "taskReferenceName": "p1", "type": "SIMPLE"}],
    }
    assert srv.client.post("/api/metadata/workflow", json=definition).status_code == 200

    def started_with() -> dict[str, Any]:
        r = srv.client.post("/api/workflow/wf", json={})
        assert r.status_code == 200, r.text
        start = srv.signals.start_of(r.text)
        assert srv.deps.payloads is not None
        snapshot: dict[str, Any] = json.loads(srv.deps.payloads.get(start.data["definitionRef"]))
        return snapshot

    first = started_with()
    assert first["taskDefs"]["parse"]["retryCount"] == 1
    assert started_with() == first
    srv.register(taskdef("parse", retryCount=3))
    assert started_with()["taskDefs"]["parse"]["retryCount"] == 3
    definition["description"] = "overwritten"
    assert srv.client.put("/api/metadata/workflow", json=[definition]).status_code == 200
    assert started_with()["definition"]["description"] == "overwritten"
