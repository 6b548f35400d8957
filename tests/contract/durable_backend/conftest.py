"""Fixtures for the durable backend tests: an EmbeddedBackend on a free port, and a
factory for in-process workers connected to it over gRPC."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from durabletask import task
from durabletask.client import TaskHubGrpcClient
from durabletask.worker import TaskHubGrpcWorker

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import (
    Role,
    make_client,
    make_worker,
    register,
    stop_worker,
)
from engine.adapters.backend.connect import start_worker as _start
from engine.adapters.backend.embedded import EmbeddedBackend

StartWorker = Callable[..., TaskHubGrpcWorker]


@pytest.fixture
def backend() -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend()
    b.start()
    yield b
    b.stop(grace=0)


@pytest.fixture
def config(backend: EmbeddedBackend) -> BackendConfig:
    return BackendConfig.embedded(backend.address)


@pytest.fixture
def client(config: BackendConfig) -> Iterator[TaskHubGrpcClient]:
    c = make_client(config)
    yield c
    c.close()


@pytest.fixture
def start_worker(config: BackendConfig) -> Iterator[StartWorker]:
    """start_worker(orchestrators, activities, role="all", config=None) -> started worker;
    every worker is stopped at teardown."""
    workers: list[TaskHubGrpcWorker] = []

    def start(
        orchestrators: Mapping[str, task.Orchestrator[Any, Any]] | None = None,
        activities: Mapping[str, task.Activity[Any, Any]] | None = None,
        role: Role = "all",
        cfg: BackendConfig | None = None,
    ) -> TaskHubGrpcWorker:
        worker = make_worker(cfg or config)
        register(worker, role, orchestrators or {}, activities or {})
        _start(worker)
        workers.append(worker)
        return worker

    yield start
    for w in workers:
        stop_worker(w)
