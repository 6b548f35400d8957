"""Which registration is current, read once for the starts of one turn of the event loop.

A start asks the run store which registration of its workflow is current (its version
and ``update_time``, ``RunStore.definition_stamp``), so that a registration answered a
moment ago, by this process or another, is what it runs
(:mod:`control_plane.services.start_cache`). Under a burst that read is the largest part
of a start's work on the event loop (17 % in cProfile, docs/benchmarks.md). Here the
starts of one turn of the loop share one read: the first schedules it behind the
callbacks already ready (``call_soon``), and every start that asks before it runs joins
it. Each of them entered before the read, so whatever registration was answered before
any of their requests was sent is committed before the read, and the read sees it.

For the event loop's starts only (:meth:`WorkflowService.start_stored
<control_plane.services.workflows.WorkflowService.start_stored>`); nothing here is
shared between loops or processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

Stamp = tuple[int, int] | None
_Key = tuple[str, int | None]


class StampReads:
    def __init__(self, read: Callable[[str, int | None], Stamp]) -> None:
        #: ``RunStore.definition_stamp``
        self._read = read
        #: per workflow and version asked for: the starts waiting for the next read
        self._waiting: dict[_Key, list[asyncio.Future[Stamp]]] = {}

    async def current(self, name: str, version: int | None) -> Stamp:
        """The stamp of the registration of ``name`` (at ``version``, or its latest) that
        is current once this start has entered; None when there is none."""
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[Stamp] = loop.create_future()
        key = (name, version)
        waiting = self._waiting.get(key)
        if waiting is None:
            waiting = self._waiting[key] = []
            loop.call_soon(self._read_for, key)
        waiting.append(mine)  # a future of its own: a start canceled cancels only itself
        return await mine

    def _read_for(self, key: _Key) -> None:
        waiting = self._waiting.pop(key)
        try:
            stamp = self._read(*key)
        except Exception as exc:
            for future in waiting:
                if not future.done():
                    future.set_exception(exc)
            return
        for future in waiting:
            if not future.done():
                future.set_result(stamp)
