"""durabletask's clients and workers made by ``engine/adapters/backend/connect.py`` log
through the process's logging configuration: the CLI quiets them (``stepway serve``,
``stepway engine``, ``stepway dev``), so a start or a raised event (every worker's
result) prints nothing unless the process asks for durabletask's INFO lines."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import CLIENT_LOGGER, WORKER_LOGGER, make_client


def _start_and_raise(config: BackendConfig) -> str:
    client = make_client(config)
    try:
        instance = client.schedule_new_orchestration("not_hosted", input={"a": 1})
        client.raise_orchestration_event(instance, "go", data={"b": 2})
        return instance
    finally:
        client.close()


def test_a_client_quieted_as_the_cli_does_prints_nothing(
    config: BackendConfig, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.WARNING, logger=CLIENT_LOGGER)
    _start_and_raise(config)
    out, err = capfd.readouterr()
    # durabletask's own logger (made when given none) printed "Starting new 'not_hosted'
    # instance ..." and "Raising event 'go' ..." to stderr at INFO
    assert "not_hosted" not in err + out
    assert "Raising event" not in err + out
    assert not [r for r in caplog.records if r.name == CLIENT_LOGGER]


def test_a_client_logs_to_the_process_loggers(
    config: BackendConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CLIENT_LOGGER)
    instance = _start_and_raise(config)
    lines = [r.getMessage() for r in caplog.records if r.name == CLIENT_LOGGER]
    assert any("not_hosted" in line and instance in line for line in lines), lines
    assert any("Raising event 'go'" in line for line in lines), lines


def test_a_worker_logs_to_the_process_logger(
    start_worker: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOGGER)
    start_worker({}, {})  # make_worker's worker, started (conftest.py)
    _, err = capfd.readouterr()
    lines = [r.getMessage() for r in caplog.records if r.name == WORKER_LOGGER]
    assert lines, "the worker logged nothing to durabletask-worker"
    # and nothing of its own to stderr (caplog's handler prints nothing)
    assert not any(line in err for line in lines), err
