"""The Temporal workflow of the bench, in a module of its own so that Temporal's
workflow sandbox can import it (it imports nothing but temporalio)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow


@workflow.defn(name="BenchSequence")
class BenchSequence:
    """``n`` activities in a row (``bench_get`` of ``url``, or ``bench_noop``), as
    activities or as local activities."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> int:
        timeout = timedelta(seconds=60)
        for i in range(int(args["n"])):
            name, arg = ("bench_get", args["url"]) if args.get("url") else ("bench_noop", i)
            if args.get("local"):
                await workflow.execute_local_activity(name, arg, start_to_close_timeout=timeout)
            else:
                await workflow.execute_activity(name, arg, start_to_close_timeout=timeout)
        return int(args["n"])
