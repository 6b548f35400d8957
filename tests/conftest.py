"""Fixtures shared by several test folders."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def backend_address() -> Iterator[str]:
    """The embedded durable backend in a process of its own (``python -m
    engine.adapters.backend.embedded``), for tests that kill and restart engine processes."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.adapters.backend.embedded",
            "--port",
            "0",
            "--log-level",
            "WARNING",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on "), line
        yield line.removeprefix("listening on ")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
