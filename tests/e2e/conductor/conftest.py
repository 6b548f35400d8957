"""One ``stepway dev`` platform (embedded backend, engine and control plane) served by
uvicorn on a free port, shared by the Conductor compatibility tests of this folder. Every
test uses task types and workflow names of its own (``harness.unique``)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from control_plane.cli.dev import DevPlatform
from tests.e2e.conductor.harness import Conductor

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="package")
def dev_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    platform = DevPlatform(
        data_dir=tmp_path_factory.mktemp("conductor") / "data", port=port, repo_root=REPO
    )
    app = platform.start()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        platform.stop()


@pytest.fixture
def conductor(dev_url: str) -> Iterator[Conductor]:
    with httpx.Client(base_url=dev_url, timeout=30) as http:
        yield Conductor(http)
