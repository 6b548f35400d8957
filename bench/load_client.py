"""A gated load client: ``python -m bench.load_client URL NAME N``.

Opens ``N`` connections to the server, then prints ``ready``; once told ``go``, sends
``POST /api/workflow/NAME`` on every connection at once and prints ``result {"ms":
[...], "ids": [...], "errors": n}``: the latency of each start request (request sent
-> response read) and the run ids.

HTTP/1.1 is spoken over plain asyncio streams: an HTTP client library costs more than
the server it measures here (httpx with 500 connections answered by a server that does
nothing took 4.5 s at the median and 9 s at p99 on the benchmark machine; this client
takes 20-30 ms at p99). Connections are opened before ``go``, as a client's pool holds
them, so that 500 simultaneous TCP handshakes (another 80-100 ms at p99 on their own)
are not counted as the time of a start."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _post(conn: Conn, host: str, path: str, body: bytes) -> tuple[float, str | None]:
    reader, writer = conn
    started = time.perf_counter()
    try:
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == b"content-length":
                length = int(value)
        text = (await reader.readexactly(length)).decode()
        return (time.perf_counter() - started) * 1000, text if status < 400 else None
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        return (time.perf_counter() - started) * 1000, None


async def _run(url: str, name: str, n: int) -> dict[str, object]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    conns: list[Conn] = await asyncio.gather(
        *(asyncio.open_connection(host, port) for _ in range(n))
    )
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    if (await loop.run_in_executor(None, sys.stdin.readline)).strip() != "go":
        return {}
    path = f"/api/workflow/{name}"
    results = await asyncio.gather(
        *(
            _post(c, f"{host}:{port}", path, json.dumps({"i": i}).encode())
            for i, c in enumerate(conns)
        )
    )
    for _, writer in conns:
        writer.close()
    return {
        "ms": [ms for ms, _ in results],
        "ids": [rid for _, rid in results if rid],
        "errors": sum(1 for _, rid in results if rid is None),
    }


def main() -> int:
    url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    result = asyncio.run(_run(url, name, n))
    if result:
        print("result " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
