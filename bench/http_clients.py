"""Client CPU per request of the HTTP clients a worker could post its results with:
``uv run python -m bench.http_clients [--requests 5000] [--clients httpx,pool]``.

One thread makes the request a busy SDK worker makes per task (``POST
/api/tasks/update-v2`` with a result; a Task JSON back) on a kept-alive connection to
a server in another process that answers at once, and the client process's CPU per
request is measured (3 rounds after a warm-up). The SDK's Task API calls use ``pool``
(stepway_worker/keepalive.py); the others are the alternatives it was chosen against.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.common import REPO, python_env

_TASK = json.dumps(
    {
        "taskId": "0f8fad5b-d9cb-469f-a165-70867728950e",
        "taskType": "bench_handoff",
        "status": "IN_PROGRESS",
        "inputData": {"n": 1, "name": "x" * 40},
        "referenceTaskName": "step_1",
        "workflowInstanceId": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "pollCount": 1,
        "attempt": 1,
        "retryCount": 0,
        "workerId": "bench-sdk-1",
        "scheduledTime": 1700000000000,
        "startTime": 1700000000001,
        "responseTimeoutSeconds": 3600,
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    }
).encode()
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\nserver: uvicorn\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(_TASK) + _TASK
)
_RESULT = {
    "workflowInstanceId": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "taskId": "0f8fad5b-d9cb-469f-a165-70867728950e",
    "status": "COMPLETED",
    "outputData": {"ok": True},
    "workerId": "bench-sdk-1",
}
_PATH = "/api/tasks/update-v2"
_HEADERS = {
    "User-Agent": "stepway-worker/0.1",
    "Content-Type": "application/json",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
}


class _Answer(asyncio.Protocol):
    """Answers each request (head plus Content-Length body) with the Task JSON."""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            length = 0
            for line in self.buf[:end].lower().split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            self.transport.write(_RESPONSE)


async def _serve() -> None:
    server = await asyncio.get_running_loop().create_server(_Answer, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


def _body() -> bytes:
    return json.dumps(_RESULT, separators=(",", ":")).encode()


def _clients(port: int) -> dict[str, Callable[[], Callable[[], Any]]]:
    base = f"http://127.0.0.1:{port}"

    def httpx_client() -> Callable[[], Any]:
        import httpx

        client = httpx.Client(base_url=base, timeout=30)
        return lambda: client.request("POST", _PATH, json=_RESULT, headers=_HEADERS).json()

    def httpx_transport() -> Callable[[], Any]:
        import httpx

        transport = httpx.HTTPTransport()
        url = httpx.URL(base + _PATH)
        extensions = {"timeout": httpx.Timeout(30).as_dict()}

        def call() -> Any:
            request = httpx.Request(
                "POST", url, content=_body(), headers=_HEADERS, extensions=extensions
            )
            response = transport.handle_request(request)
            try:
                return json.loads(response.read())
            finally:
                response.close()

        return call

    def httpcore_pool() -> Callable[[], Any]:
        import httpcore

        pool = httpcore.ConnectionPool()
        headers = [(k.encode(), v.encode()) for k, v in _HEADERS.items()]
        return lambda: json.loads(
            pool.request("POST", base + _PATH, content=_body(), headers=headers).content
        )

    def urllib3_pool() -> Callable[[], Any]:
        import urllib3

        pool = urllib3.HTTPConnectionPool("127.0.0.1", port, timeout=30.0, retries=False)
        return lambda: json.loads(
            pool.urlopen("POST", _PATH, body=_body(), headers=_HEADERS, retries=False).data
        )

    def stdlib_http_client() -> Callable[[], Any]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def call() -> Any:
            conn.request("POST", _PATH, body=_body(), headers=_HEADERS)
            return json.loads(conn.getresponse().read())

        return call

    def sdk_pool() -> Callable[[], Any]:
        from stepway_worker.keepalive import KeepAlivePool

        pool = KeepAlivePool(base)
        return lambda: pool.request(
            "POST", _PATH, body=_body(), headers=dict(_HEADERS), timeout=30.0
        ).json()

    return {
        "httpx": httpx_client,
        "httpx-transport": httpx_transport,
        "httpcore": httpcore_pool,
        "urllib3": urllib3_pool,
        "http.client": stdlib_http_client,
        "pool": sdk_pool,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--clients", help="comma-separated subset (default: all)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return 0
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.http_clients", "--serve"],
        cwd=REPO,
        env=python_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        makers = _clients(int(server.stdout.readline()))
        chosen = args.clients.split(",") if args.clients else list(makers)
        n = args.requests
        for name in chosen:
            call = makers[name]()
            for _ in range(300):
                call()
            rounds = []
            for _ in range(3):
                cpu = time.process_time()
                for _ in range(n):
                    call()
                rounds.append(1000 * (time.process_time() - cpu) / n)
            shown = " ".join(f"{ms:.3f}" for ms in rounds)
            print(f"{name:16s} client CPU ms a request: {shown}", flush=True)
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
