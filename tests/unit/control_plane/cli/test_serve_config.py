"""control_plane/cli/serve.py (``stepway serve``) and the command line's configuration
errors: parsing from environment variables, the errors (each names its variable), and the
control plane built from a configuration: the local one for real, the Azure one by
construction only (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from control_plane.cli.main import app as cli_app
from control_plane.cli.serve import ServeConfig, build_control_plane, server_config
from engine.adapters.payload_blob import BlobPayloadStore
from engine.adapters.queue_provisioning_azure import AzureQueueProvisioner
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_servicebus import ServiceBusTaskQueue
from engine.app.config import ConfigError

SB_ID = (
    "/subscriptions/00000000-0000-0000-0000-00000000aaaa/resourceGroups/rg-x/providers/"
    "Microsoft.ServiceBus/namespaces/sb-x"
)


def azure_env(**extra: str) -> dict[str, str]:
    return {
        "STEPWAY_ENGINE_ROLE": "activities",
        "AZURE_CLIENT_ID": "client-id-act",
        "STEPWAY_BACKEND_KIND": "azure",
        "STEPWAY_BACKEND_ENDPOINT": "https://dts-x.westeurope.durabletask.io",
        "STEPWAY_BACKEND_TASK_HUB": "stepway",
        "STEPWAY_RUN_STORE_URL": (
            "postgresql+psycopg://id-act@psql-x.postgres.database.azure.com:5432/stepway"
        ),
        "STEPWAY_RUN_STORE_MIGRATE": "false",
        "STEPWAY_QUEUE": "servicebus://sb-x.servicebus.windows.net",
        "STEPWAY_PAYLOAD_STORE": "https://stx.blob.core.windows.net/payloads",
        **extra,
    }


def problems(excinfo: pytest.ExceptionInfo[ConfigError]) -> dict[str, str]:
    return dict(excinfo.value.problems)


# -- the control plane (stepway serve) ------------------------------------------------------


def serve_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in azure_env().items() if k != "STEPWAY_ENGINE_ROLE"}
    return {
        **env,
        "STEPWAY_TENANT_ID": "00000000-0000-0000-0000-00000000bbbb",
        "STEPWAY_TOKEN_AUDIENCE": "api://stepway-dev",
        "STEPWAY_SERVICEBUS_RESOURCE_ID": SB_ID,
        "STEPWAY_WORKER_IDENTITIES": json.dumps({"client-w": ["parse_pdf"]}),
        **extra,
    }


def test_serve_defaults_to_entra_and_needs_tenant_and_audience() -> None:
    with pytest.raises(ConfigError) as excinfo:
        ServeConfig.from_env(serve_env(STEPWAY_TENANT_ID="", STEPWAY_TOKEN_AUDIENCE=""))
    assert {"STEPWAY_TENANT_ID", "STEPWAY_TOKEN_AUDIENCE"} <= set(problems(excinfo))


def test_serve_entra_values() -> None:
    config = ServeConfig.from_env(serve_env(STEPWAY_PORT="8000"))
    assert config.port == 8000 and config.host == "0.0.0.0"
    settings = config.settings
    assert settings.auth_mode == "entra"
    assert settings.entra_tenant_id == "00000000-0000-0000-0000-00000000bbbb"
    assert settings.entra_audience == ["api://stepway-dev"]
    assert settings.entra_worker_task_types == {"client-w": ["parse_pdf"]}
    assert config.service_bus is not None
    assert config.service_bus.resource_group == "rg-x"
    assert config.service_bus.namespace == "sb-x"


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("STEPWAY_WORKER_IDENTITIES", "{not json", "not valid JSON"),
        ("STEPWAY_WORKER_IDENTITIES", '{"id": "parse_pdf"}', "string lists"),
        ("STEPWAY_SERVICEBUS_RESOURCE_ID", "/subscriptions/x", "resourceGroups"),
        ("STEPWAY_AUTH_MODE", "open", "entra, tokens, none"),
        ("STEPWAY_PORT", "http", "integer"),
        ("STEPWAY_TOKENS_FILE", "/nonexistent/tokens.yaml", "no such file"),
        ("STEPWAY_GC_TUNING", "sometimes", "true or false"),
        ("STEPWAY_HTTP_KEEP_ALIVE_SECONDS", "0", "at least 1"),
        ("STEPWAY_HTTP_KEEP_ALIVE_SECONDS", "forever", "integer"),
        ("STEPWAY_RECONCILE_INTERVAL_MS", "-1", "at least 0"),
        ("STEPWAY_RECONCILE_INTERVAL_MS", "soon", "integer"),
    ],
)
def test_serve_bad_value_names_its_variable(variable: str, value: str, fragment: str) -> None:
    extra = {variable: value}
    if variable == "STEPWAY_TOKENS_FILE":
        extra["STEPWAY_AUTH_MODE"] = "tokens"
    with pytest.raises(ConfigError) as excinfo:
        ServeConfig.from_env(serve_env(**extra))
    assert fragment in problems(excinfo)[variable]


def test_serve_asks_the_backend_about_a_run_every_two_seconds_unless_told() -> None:
    assert ServeConfig.from_env(serve_env()).settings.reconcile_interval_ms == 2_000
    config = ServeConfig.from_env(serve_env(STEPWAY_RECONCILE_INTERVAL_MS="0"))
    assert config.settings.reconcile_interval_ms == 0  # every read asks


def test_serve_keeps_idle_connections_for_ten_minutes_unless_told() -> None:
    # longer than the clients and proxies that reuse them (control_plane/cli/http_server.py);
    # what uvicorn is given, from the variable through ServeConfig
    app = FastAPI()
    assert server_config(ServeConfig.from_env(serve_env()), app).timeout_keep_alive == 600
    config = ServeConfig.from_env(serve_env(STEPWAY_HTTP_KEEP_ALIVE_SECONDS="75"))
    assert server_config(config, app).timeout_keep_alive == 75


def test_serve_refuses_anonymous_off_loopback(tmp_path: Path) -> None:
    env = {"STEPWAY_DATA_DIR": str(tmp_path), "STEPWAY_AUTH_MODE": "none"}
    with pytest.raises(ConfigError) as excinfo:
        ServeConfig.from_env(env)
    assert "STEPWAY_AUTH_MODE" in problems(excinfo)
    assert ServeConfig.from_env({**env, "STEPWAY_HOST": "127.0.0.1"}).settings.auth_mode == "none"
    assert ServeConfig.from_env(env, host="::1").settings.auth_mode == "none"
    allowed = ServeConfig.from_env({**env, "STEPWAY_ALLOW_ANONYMOUS": "true"})
    assert allowed.host == "0.0.0.0" and allowed.settings.auth_mode == "none"


def test_serve_builds_the_azure_control_plane_without_network() -> None:
    config = ServeConfig.from_env(serve_env())
    plane = build_control_plane(config, client=object())
    deps = plane.deps
    assert isinstance(deps.queue, ServiceBusTaskQueue)
    assert isinstance(deps.payloads, BlobPayloadStore)
    # network storage: the Task API's storage calls run in threads, off its event loop
    assert deps.local_adapters is False
    assert isinstance(deps.provisioner, AzureQueueProvisioner)
    assert deps.provisioner._resource_group == "rg-x"
    assert deps.provisioner._namespace == "sb-x"
    assert deps.provisioner._client._config.subscription_id == (
        "00000000-0000-0000-0000-00000000aaaa"
    )
    assert plane.app.state.settings.auth_mode == "entra"


def test_serve_builds_the_local_control_plane(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    config = ServeConfig.from_env(
        {"STEPWAY_DATA_DIR": str(tmp_path), "STEPWAY_AUTH_MODE": "none"}, host="127.0.0.1"
    )
    plane = build_control_plane(config, client=object())
    try:
        assert isinstance(plane.deps.provisioner, SqliteQueueProvisioner)
        assert plane.deps.local_adapters is True  # SQLite, a directory, the embedded backend
        with TestClient(plane.app) as http:
            assert http.get("/health").json() == {"status": "ok"}
            r = http.post("/api/metadata/taskdefs", json=[{"name": "t1", "ownerEmail": "a@b.c"}])
            assert r.status_code == 200, r.text
    finally:
        plane.close()


# -- the command line ----------------------------------------------------------------------


def test_cli_reports_config_errors_with_exit_code_2() -> None:
    runner = CliRunner()
    result = runner.invoke(cli_app, ["engine", "--role", "activities"], env={"STEPWAY_QUEUE": "x"})
    assert result.exit_code == 2
    assert "STEPWAY_QUEUE" in result.output and "STEPWAY_RUN_STORE_URL" in result.output
    result = runner.invoke(
        cli_app, ["serve"], env={"STEPWAY_AUTH_MODE": "none", "STEPWAY_DATA_DIR": "/tmp/x"}
    )
    assert result.exit_code == 2
    assert "STEPWAY_AUTH_MODE" in result.output


def test_serve_console_sign_in_values() -> None:
    console = ServeConfig.from_env(serve_env()).settings.console
    assert console.enabled and console.client_id is None
    console = ServeConfig.from_env(
        serve_env(
            STEPWAY_CONSOLE_CLIENT_ID="console-app",
            STEPWAY_CONSOLE_SCOPE="api://stepway-dev/access",
            STEPWAY_CONSOLE_REDIRECT_URL="https://stepway.example.com/signin/callback",
            STEPWAY_CONSOLE_SESSION_SECONDS="600",
        )
    ).settings.console
    assert console.client_id == "console-app"
    assert console.scope == "api://stepway-dev/access"
    assert console.redirect_url == "https://stepway.example.com/signin/callback"
    assert console.session_seconds == 600
    assert not ServeConfig.from_env(serve_env(STEPWAY_CONSOLE="false")).settings.console.enabled
    with pytest.raises(ConfigError) as excinfo:
        ServeConfig.from_env(serve_env(STEPWAY_CONSOLE_REDIRECT_URL="http://example.com/cb"))
    assert "STEPWAY_CONSOLE_REDIRECT_URL" in problems(excinfo)
