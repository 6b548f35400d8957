"""A gated load client: ``python -m bench.load_client URL NAME N``.

Once told ``go``, starts ``N`` runs of workflow ``NAME`` at once (``POST
/api/workflow/NAME``, one connection each) and prints ``result {"ms": [...], "ids":
[...], "errors": n}``: the latency of each start request and the run ids."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx


async def _fire(url: str, name: str, n: int) -> dict[str, object]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as http:

        async def one(i: int) -> tuple[float, str | None]:
            started = time.perf_counter()
            try:
                response = await http.post(f"/api/workflow/{name}", json={"i": i})
                ok = response.status_code < 400
                return (time.perf_counter() - started) * 1000, response.text if ok else None
            except httpx.HTTPError:
                return (time.perf_counter() - started) * 1000, None

        results = await asyncio.gather(*(one(i) for i in range(n)))
    return {
        "ms": [ms for ms, _ in results],
        "ids": [rid for _, rid in results if rid],
        "errors": sum(1 for _, rid in results if rid is None),
    }


def main() -> int:
    url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 0
    print("result " + json.dumps(asyncio.run(_fire(url, name, n))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
