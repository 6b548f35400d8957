"""Fixtures: the example stacks and the repository catalog under Pulumi mocks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from stepway_infra.config import StackConfig, load_stack_file
from stepway_infra.mocks import StackResult, run_stack
from workers.catalog import WorkerCatalogEntry, load_catalog

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def repo_catalog() -> list[WorkerCatalogEntry]:
    return load_catalog(REPO / "workers")


@pytest.fixture(scope="session")
def dev_config() -> StackConfig:
    return load_stack_file(REPO / "Pulumi.dev.yaml")


@pytest.fixture(scope="session")
def prod_config() -> StackConfig:
    return load_stack_file(REPO / "Pulumi.prod.yaml")


@pytest.fixture(scope="session")
def dev_stack(dev_config: StackConfig, repo_catalog: list[WorkerCatalogEntry]) -> StackResult:
    return run_stack(dev_config, repo_catalog, "dev")


@pytest.fixture(scope="session")
def prod_stack(prod_config: StackConfig, repo_catalog: list[WorkerCatalogEntry]) -> StackResult:
    return run_stack(prod_config, repo_catalog, "prod")


@pytest.fixture
def stack_runner() -> Callable[..., StackResult]:
    return run_stack


@pytest.fixture(scope="session")
def dev_preview(dev_config: StackConfig, repo_catalog: list[WorkerCatalogEntry]) -> StackResult:
    """The dev stack's first preview: a mock that fakes no computed value."""
    return run_stack(dev_config, repo_catalog, "dev", plain=True)


@pytest.fixture(scope="session")
def prod_preview(prod_config: StackConfig, repo_catalog: list[WorkerCatalogEntry]) -> StackResult:
    return run_stack(prod_config, repo_catalog, "prod", plain=True)


@pytest.fixture
def stack_pair(dev_stack: StackResult, prod_stack: StackResult) -> tuple[StackResult, StackResult]:
    return dev_stack, prod_stack
