"""BackendConfig and the worker/client factories, including the Azure ones (constructed
without any network access or Azure account)."""

from __future__ import annotations

from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential
from durabletask.azuremanaged.client import DurableTaskSchedulerClient
from durabletask.azuremanaged.worker import DurableTaskSchedulerWorker
from durabletask.client import TaskHubGrpcClient
from durabletask.worker import TaskHubGrpcWorker
from pydantic import ValidationError

from engine.adapters.backend import connect
from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.sessions import (
    DEFAULT_SESSION_CAPACITY,
    SchedulerSessionWorker,
    SessionWorker,
)

ENDPOINT = "https://stepway-dev.westeurope.durabletask.io"


class FakeCredential:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        raise AssertionError("no token must be requested while constructing")


def test_defaults_and_validation() -> None:
    assert BackendConfig().kind == "embedded"
    assert BackendConfig.embedded("127.0.0.1:5000").address == "127.0.0.1:5000"
    with pytest.raises(ValidationError):
        BackendConfig(kind="embedded", address="no-port")
    with pytest.raises(ValidationError):
        BackendConfig(kind="azure", endpoint=ENDPOINT)  # no task hub
    with pytest.raises(ValidationError):
        BackendConfig(kind="azure", task_hub="hub")  # no endpoint
    cfg = BackendConfig.azure(ENDPOINT, "hub", managed_identity_client_id="abc")
    assert cfg.credential == "managed_identity"


def test_from_env() -> None:
    cfg = BackendConfig.from_env(
        {
            "STEPWAY_BACKEND_KIND": "azure",
            "STEPWAY_BACKEND_ENDPOINT": ENDPOINT,
            "STEPWAY_BACKEND_TASK_HUB": "hub",
            "STEPWAY_BACKEND_CREDENTIAL": "managed_identity",
            "STEPWAY_BACKEND_MANAGED_IDENTITY_CLIENT_ID": "cid",
        }
    )
    assert (cfg.kind, cfg.endpoint, cfg.task_hub, cfg.managed_identity_client_id) == (
        "azure",
        ENDPOINT,
        "hub",
        "cid",
    )
    assert BackendConfig.from_env({}) == BackendConfig()


def test_credential_selection() -> None:
    assert isinstance(
        connect.make_credential(BackendConfig.azure(ENDPOINT, "hub")), DefaultAzureCredential
    )
    mi = connect.make_credential(
        BackendConfig.azure(ENDPOINT, "hub", managed_identity_client_id="cid")
    )
    assert isinstance(mi, ManagedIdentityCredential)
    with pytest.raises(ValueError):
        connect.make_credential(BackendConfig())


def test_embedded_factories_use_plain_grpc() -> None:
    cfg = BackendConfig.embedded("127.0.0.1:5999")
    worker = connect.make_worker(cfg)
    # durabletask's worker, with orchestration sessions (sessions.py)
    assert isinstance(worker, TaskHubGrpcWorker) and isinstance(worker, SessionWorker)
    assert worker.sessions.capacity == DEFAULT_SESSION_CAPACITY
    assert connect.make_worker(cfg, session_capacity=0).sessions.capacity == 0  # type: ignore[attr-defined]
    assert worker._host_address == "127.0.0.1:5999"
    client = connect.make_client(cfg)
    assert type(client) is TaskHubGrpcClient
    client.close()


def test_azure_factories_pass_endpoint_task_hub_and_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def recorder(kind: str) -> Any:
        def make(**kwargs: Any) -> object:
            calls.append((kind, kwargs))
            return object()

        return make

    cfg = BackendConfig.azure(ENDPOINT, "stepway-hub", managed_identity_client_id="cid")
    cred = FakeCredential()
    monkeypatch.setattr(connect, "SchedulerSessionWorker", recorder("worker"))
    monkeypatch.setattr(connect, "DurableTaskSchedulerClient", recorder("client"))
    connect.make_worker(cfg, credential=cred)
    connect.make_client(cfg, credential=cred)
    connect.make_client(cfg)
    for kind, kwargs in calls:
        assert kwargs["host_address"] == ENDPOINT, kind
        assert kwargs["taskhub"] == "stepway-hub", kind
    assert calls[0][1]["token_credential"] is cred
    assert calls[1][1]["token_credential"] is cred
    # Without an override the config's credential is used.
    assert isinstance(calls[2][1]["token_credential"], ManagedIdentityCredential)


def test_azure_factories_build_real_dts_objects_without_network() -> None:
    cfg = BackendConfig.azure(ENDPOINT, "stepway-hub")
    cred = FakeCredential()
    worker = connect.make_worker(cfg, credential=cred)
    client = connect.make_client(cfg, credential=cred)
    assert isinstance(worker, DurableTaskSchedulerWorker)
    assert isinstance(worker, SchedulerSessionWorker)
    assert worker.emit_trace_spans is False  # Stepway's spans are its own
    assert isinstance(client, DurableTaskSchedulerClient)
    assert worker._host_address == ENDPOINT
    interceptor = worker._interceptors[-1]  # type: ignore[index]
    assert ("taskhub", "stepway-hub") in interceptor._metadata
    assert interceptor._token_credential is cred
