"""The variables the Pulumi program sets are the ones the processes read: the program
runs under mocks, and each platform app's env goes to the reader of its process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control_plane.cli.serve import ServeConfig
from engine.app.config import EngineConfig
from stepway_infra.config import load_stack_file
from stepway_infra.mocks import StackResult, run_stack
from workers.catalog import load_catalog

REPO = Path(__file__).resolve().parents[3]
APP = "azure-native:app:ContainerApp"


@pytest.fixture(scope="module")
def stack() -> StackResult:
    return run_stack(
        load_stack_file(REPO / "Pulumi.dev.yaml"), load_catalog(REPO / "workers"), "dev"
    )


def env_of(stack: StackResult, name: str) -> dict[str, str]:
    (container,) = stack.one(APP, name).inputs["template"]["containers"]
    assert all("value" in item for item in container["env"]), "no secret refs expected"
    return {item["name"]: str(item["value"]) for item in container["env"]}


def test_orchestrator_app_env_is_a_valid_engine_config(stack: StackResult) -> None:
    config = EngineConfig.from_env(env_of(stack, "app-orch"))
    assert config.role == "orchestrator"
    assert config.backend.kind == "azure"
    assert config.backend.endpoint == "https://dts-stepway-dev.westeurope.durabletask.io"
    assert config.backend.managed_identity_client_id == "client-id-engine-orchestrator"
    assert config.data.run_store.auth == "entra"
    assert (
        config.max_concurrent_work_items
        == stack.config.engine.orchestrator.max_concurrent_work_items
    )
    assert config.telemetry.service_name == "stepway-engine-orchestrator"
    assert (config.telemetry.connection_string or "").startswith("InstrumentationKey=")


def test_activity_app_env_is_a_valid_engine_config(stack: StackResult) -> None:
    config = EngineConfig.from_env(env_of(stack, "app-act"))
    assert config.role == "activities"
    data = config.data
    assert data.managed_identity_client_id == "client-id-engine-activity"
    assert data.credential == "managed_identity"
    assert data.run_store.auth == "entra"
    assert data.queue is not None and data.queue.kind == "servicebus"
    assert data.queue.namespace == "sb-stepway-dev.servicebus.windows.net"
    assert data.payload_store is not None and data.payload_store.kind == "blob"
    assert data.payload_store.container == stack.config.storage.payload_container
    assert config.telemetry.service_name == "stepway-engine-activity"
    assert config.telemetry.enabled


def test_control_plane_app_env_is_a_valid_serve_config(stack: StackResult) -> None:
    env = env_of(stack, "app-cp")
    config = ServeConfig.from_env(env)
    settings = config.settings
    assert settings.auth_mode == "entra"
    assert settings.entra_audience == [stack.config.control_plane.token_audience]
    assert config.port == stack.config.control_plane.target_port
    assert config.service_bus is not None and config.service_bus.namespace == "sb-stepway-dev"
    worker_ids = set(settings.entra_worker_task_types)
    assert worker_ids and all(i.startswith("client-id-worker-") for i in worker_ids)
    assert config.telemetry.service_name == "stepway-control-plane"
    assert config.telemetry.enabled


def test_worker_app_env_is_read_by_the_worker_sdk(stack: StackResult) -> None:
    from stepway_worker.settings import WorkerSettings

    for resource in stack.of_type(APP):
        if not resource.name.startswith("app-worker-"):
            continue
        (container,) = resource.inputs["template"]["containers"]
        env: dict[str, Any] = {
            item["name"]: str(item["value"]) for item in container["env"] if "value" in item
        }
        settings = WorkerSettings.from_env(env)
        assert settings.server_url.startswith("https://stepway-dev-cp.")
        assert env["STEPWAY_API_SCOPE"] == "api://stepway-dev/.default"


def test_the_hosts_allowed_to_receive_tokens_reach_the_activity_app() -> None:
    """``engine.activity.tokenHosts`` in the stack config is the activity app's
    STEPWAY_TOKEN_HOSTS, as the engine reads it; without it the app gets none, and an
    HTTP or LOGIC_APP task's ``auth`` is refused (engine/runtime/builtins/http.py)."""
    config = load_stack_file(REPO / "Pulumi.dev.yaml")
    hosts = {"api://orders/.default": ["orders.example.com", "*.svc.example.com"]}
    activity = config.engine.activity.model_copy(update={"token_hosts": hosts})
    config = config.model_copy(
        update={"engine": config.engine.model_copy(update={"activity": activity})}
    )
    stack = run_stack(config, load_catalog(REPO / "workers"), "dev")
    engine = EngineConfig.from_env(env_of(stack, "app-act"))
    assert engine.token_hosts == {
        "api://orders/.default": ("orders.example.com", "*.svc.example.com")
    }
    assert "STEPWAY_TOKEN_HOSTS" not in env_of(stack, "app-orch")


def test_without_token_hosts_the_activity_app_sends_no_tokens(stack: StackResult) -> None:
    assert EngineConfig.from_env(env_of(stack, "app-act")).token_hosts == {}
