"""The cyclic garbage collector of a long-running platform process, set up once start-up
is done (``stepway dev``, ``stepway serve``, ``stepway engine``).

CPython's collector runs a full (generation 2) collection now and then, and a full
collection visits every container object the process holds. After start-up a platform
process holds about 195,000 (modules, FastAPI's routes and pydantic's validators, gRPC,
SQLAlchemy), nearly all of them there for good. Measured with ``bench/profile_starts.py``
(500 starts fired at once at ``stepway dev``): one full collection ran during every burst
and took 160-195 ms, a quarter of the burst, a pause every request in flight waited out.

:func:`settle_heap`:

* collects once, then freezes what is left (``gc.freeze()``): the objects start-up made
  go to the permanent generation, which no later collection visits (they are still freed
  by reference counting if they go away);
* raises the thresholds from CPython's ``(700, 10, 10)`` to ``(10_000, 10, 10)``: a
  young collection every 10,000 net allocations of container objects instead of every
  700, so that a request's short-lived objects are mostly gone by reference counting
  before any collection sees them, and the older generations fill 14 times more slowly.

The same burst with both: no full collection during it, 10 ms of collections in all
instead of 185 ms (docs/benchmarks.md).

It changes the whole process, so only a process's entry point calls it, never library
code; ``STEPWAY_GC_TUNING=false`` leaves CPython's defaults.
"""

from __future__ import annotations

import gc

__all__ = ["SERVER_THRESHOLDS", "settle_heap"]

#: (generation 0, 1, 2) thresholds of a platform process (CPython's: 700, 10, 10)
SERVER_THRESHOLDS = (10_000, 10, 10)


def settle_heap(enabled: bool = True) -> None:
    """Freeze what start-up made and set :data:`SERVER_THRESHOLDS`; nothing when not
    ``enabled``. Call once start-up is done, from the process's entry point."""
    if not enabled:
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVER_THRESHOLDS)
