"""The order in which a write group takes and ends its two transactions
(control_plane/services/write_groups.py): the run store's taken first and committed
first; a run store that cannot commit rolls the queue back; a run-store outage raised
by one request's work rolls both back and fails every request of the group.

The two stores here only record what is done to their batches (what the real adapters
do inside a batch is counted in tests/unit/control_plane/api/test_write_groups.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from control_plane.services.write_groups import WriteGroups
from engine.ports.run_store import RunStoreUnavailable


class _Batches:
    """What was done to the batches of two stores, in order."""

    def __init__(self, fail_commit: str | None = None) -> None:
        self.log: list[str] = []
        self.fail_commit = fail_commit

    def store(self, name: str) -> Any:
        log, fail = self.log, self.fail_commit

        class Store:
            @contextmanager
            def batch(self) -> Iterator[None]:
                log.append(f"{name} begin")
                try:
                    yield
                except BaseException:
                    log.append(f"{name} rollback")
                    raise
                if fail == name:
                    log.append(f"{name} rollback")
                    raise RunStoreUnavailable("disk I/O error")
                log.append(f"{name} commit")

        return Store()


def run_together(groups: WriteGroups, works: list[Callable[[], Any]]) -> list[Any]:
    async def main() -> list[Any]:
        return list(await asyncio.gather(*(groups.run(w) for w in works), return_exceptions=True))

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_the_run_store_is_taken_first_and_committed_first() -> None:
    b = _Batches()
    groups = WriteGroups(b.store("store"), b.store("queue"))
    out = run_together(groups, [lambda: b.log.append("work 1") or 1, lambda: 2])
    assert out == [1, 2]
    assert b.log == ["store begin", "queue begin", "work 1", "store commit", "queue commit"]
    assert (groups.groups, groups.members) == (1, 2)


def test_a_request_error_is_its_own_and_the_group_commits() -> None:
    b = _Batches()
    groups = WriteGroups(b.store("store"), b.store("queue"))

    def refused() -> None:
        raise ValueError("409")

    out = run_together(groups, [lambda: 1, refused, lambda: 3])
    assert out[0] == 1 and isinstance(out[1], ValueError) and out[2] == 3
    assert b.log[-2:] == ["store commit", "queue commit"]


def test_a_run_store_that_cannot_commit_rolls_the_queue_back_and_fails_all() -> None:
    b = _Batches(fail_commit="store")
    groups = WriteGroups(b.store("store"), b.store("queue"))
    out = run_together(groups, [lambda: 1, lambda: 2])
    assert all(isinstance(o, RunStoreUnavailable) for o in out), out
    assert b.log == ["store begin", "queue begin", "store rollback", "queue rollback"]


def test_a_run_store_outage_in_one_request_fails_the_group() -> None:
    b = _Batches()
    groups = WriteGroups(b.store("store"), b.store("queue"))

    def outage() -> None:
        raise RunStoreUnavailable("database is locked")

    out = run_together(groups, [lambda: 1, outage, lambda: 3])
    assert all(isinstance(o, RunStoreUnavailable) for o in out), out
    assert b.log == ["store begin", "queue begin", "queue rollback", "store rollback"]


def test_groups_hold_at_most_max_group_requests() -> None:
    b = _Batches()
    groups = WriteGroups(b.store("store"), b.store("queue"), max_group=2)
    assert run_together(groups, [lambda i=i: i for i in range(5)]) == [0, 1, 2, 3, 4]
    assert (groups.groups, groups.members) == (3, 5)
    assert b.log.count("store commit") == 3


def test_max_group_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_group"):
        WriteGroups(_Batches().store("s"), _Batches().store("q"), max_group=0)
