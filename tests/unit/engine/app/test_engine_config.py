"""engine/app/config.py: parsing from environment variables, the errors (each names its
variable), and the adapters built from a configuration: the local combination for real,
the Azure one by construction only (no network). The control plane's configuration is
tests/unit/control_plane/cli/test_serve_config.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

from engine.adapters.blob_client_settings import BlobClientSettings
from engine.adapters.payload_blob import BlobPayloadStore
from engine.adapters.payload_local import LocalPayloadStore
from engine.adapters.queue_servicebus import ServiceBusTaskQueue
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_store_sql import SqlRunStore
from engine.app.azure_services import NoQueue, build_services
from engine.app.config import POSTGRES_TOKEN_SCOPE, ConfigError, EngineConfig
from engine.runtime.builtins import ActivityDeps

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


def local_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "STEPWAY_ENGINE_ROLE": "all",
        "STEPWAY_DATA_DIR": str(tmp_path / "data"),
        **extra,
    }


def problems(excinfo: pytest.ExceptionInfo[ConfigError]) -> dict[str, str]:
    return dict(excinfo.value.problems)


# -- parsing errors -------------------------------------------------------------------------


def test_empty_environment_names_every_missing_variable() -> None:
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env({})
    found = problems(excinfo)
    assert set(found) == {
        "STEPWAY_ENGINE_ROLE",
        "STEPWAY_RUN_STORE_URL",
    }
    # the role is unknown, so queue and payload store are not demanded yet
    assert "STEPWAY_ENGINE_ROLE" in str(excinfo.value)


def test_activities_role_needs_queue_and_payload_store() -> None:
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(
            {"STEPWAY_RUN_STORE_URL": "sqlite:////tmp/x/runs.db"}, role="activities"
        )
    assert set(problems(excinfo)) == {"STEPWAY_QUEUE", "STEPWAY_PAYLOAD_STORE"}


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("STEPWAY_ENGINE_ROLE", "worker", "orchestrator, activities, all"),
        ("STEPWAY_RUN_STORE_URL", "mysql://h/db", "unsupported database"),
        ("STEPWAY_RUN_STORE_URL", "not a url", "not a database URL"),
        ("STEPWAY_RUN_STORE_URL", "sqlite://", "needs a file"),
        ("STEPWAY_RUN_STORE_URL", "postgresql+asyncpg://u@h/db", "driver"),
        ("STEPWAY_RUN_STORE_URL", "sqlite:////tmp/runs.db?timeout=soon", "expected seconds"),
        ("STEPWAY_RUN_STORE_URL", "sqlite:////tmp/runs.db?timeout=-1", "at least 0"),
        ("STEPWAY_RUN_STORE_MIGRATE", "maybe", "true or false"),
        ("STEPWAY_QUEUE", "amqp://x", "servicebus://"),
        ("STEPWAY_QUEUE", "servicebus://sb-x", "fully qualified"),
        ("STEPWAY_PAYLOAD_STORE", "http://stx.blob.core.windows.net/payloads", "https"),
        ("STEPWAY_PAYLOAD_STORE", "https://stx.blob.core.windows.net", "container"),
        ("STEPWAY_PAYLOAD_STORE", "s3://bucket", "directory or an https://"),
        ("STEPWAY_PAYLOAD_MAX_SIZE", "ten", "integer"),
        ("STEPWAY_PAYLOAD_TASK_OUTPUT_THRESHOLD", "-1", "at least 0"),
        ("STEPWAY_PAYLOAD_SECRET", "short", "32 characters"),
        ("STEPWAY_BLOB_RETRY_TOTAL", "-1", "at least 0"),
        ("STEPWAY_BLOB_RETRY_TOTAL", "2.5", "integer"),
        ("STEPWAY_BLOB_INITIAL_BACKOFF_SECONDS", "-0.5", "at least 0"),
        ("STEPWAY_BLOB_INCREMENT_BASE", "two", "number"),
        ("STEPWAY_BLOB_CONNECT_TIMEOUT_SECONDS", "0", "at least 0.1"),
        ("STEPWAY_BLOB_READ_TIMEOUT_SECONDS", "soon", "number"),
        ("STEPWAY_BACKEND_KIND", "cloud", "embedded"),
        ("STEPWAY_BACKEND_ADDRESS", "nohostport", "host:port"),
        ("STEPWAY_ACTION_SERVICE_URL", "http://actions.example.com", "https"),
        ("STEPWAY_DOCUMENT_INTELLIGENCE_ENDPOINT", "ftp://di", "https"),
        ("STEPWAY_OUTBOUND_READ_TIMEOUT_SECONDS", "soon", "number"),
        ("STEPWAY_OUTBOUND_ALLOW_LINK_LOCAL", "sure", "true or false"),
        ("STEPWAY_MAX_CONCURRENT_WORK_ITEMS", "0", "at least 1"),
        ("STEPWAY_MAX_CONCURRENT_ACTIVITIES", "0", "at least 1"),
        ("STEPWAY_MAX_CONCURRENT_ACTIVITIES", "many", "integer"),
        ("STEPWAY_AZURE_CREDENTIAL", "secret", "managed_identity, default"),
        ("STEPWAY_GC_TUNING", "maybe", "true or false"),
        ("STEPWAY_DEFERRED_SWEEP_SECONDS", "hourly", "number"),
        ("STEPWAY_DEFERRED_SWEEP_SECONDS", "-1", "at least 0"),
        ("STEPWAY_TOKEN_HOSTS", "api.example.com", "not valid JSON"),
        ("STEPWAY_TOKEN_HOSTS", '["api.example.com"]', "JSON object"),
        ("STEPWAY_TOKEN_HOSTS", '{"s": "api.example.com"}', "list of host names"),
        ("STEPWAY_TOKEN_HOSTS", '{"s": ["https://api.example.com"]}', "not a host name"),
        ("STEPWAY_TOKEN_HOSTS", '{"s": ["*"]}', "not a host name"),
    ],
)
def test_a_bad_value_names_its_variable(
    tmp_path: Path, variable: str, value: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(local_env(tmp_path, **{variable: value}))
    found = problems(excinfo)
    assert variable in found, excinfo.value
    assert fragment in found[variable]
    assert f"{variable}:" in str(excinfo.value)


def test_azure_backend_without_endpoint_names_the_variable(tmp_path: Path) -> None:
    env = local_env(tmp_path, STEPWAY_BACKEND_KIND="azure", STEPWAY_BACKEND_TASK_HUB="hub")
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(env)
    assert "STEPWAY_BACKEND_ENDPOINT" in problems(excinfo)


def test_entra_run_store_url_must_not_carry_a_password_and_needs_a_user() -> None:
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(
            azure_env(
                STEPWAY_RUN_STORE_URL="postgresql+psycopg://u:pw@h.example.com/db",
                STEPWAY_RUN_STORE_AUTH="entra",
            )
        )
    assert "password" in problems(excinfo)["STEPWAY_RUN_STORE_URL"]
    assert "pw" not in str(excinfo.value).replace("password", "")
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(
            azure_env(STEPWAY_RUN_STORE_URL="postgresql://psql-x.postgres.database.azure.com/db")
        )
    assert "PostgreSQL role" in problems(excinfo)["STEPWAY_RUN_STORE_URL"]


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    env = local_env(tmp_path, STEPWAY_QUEUE="amqp://x", STEPWAY_PAYLOAD_MAX_SIZE="big")
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(env)
    assert set(problems(excinfo)) == {"STEPWAY_QUEUE", "STEPWAY_PAYLOAD_MAX_SIZE"}


# -- values ---------------------------------------------------------------------------------


def test_local_defaults_from_the_data_dir(tmp_path: Path) -> None:
    config = EngineConfig.from_env(local_env(tmp_path))
    data = tmp_path / "data"
    assert config.role == "all"
    assert config.backend.kind == "embedded"
    assert config.data.run_store.url == f"sqlite:///{data / 'runs.db'}"
    assert config.data.run_store.auth == "password"
    assert config.data.queue is not None and config.data.queue.path == data / "queues.db"
    assert config.data.payload_store is not None
    assert config.data.payload_store.directory == data / "payloads"
    assert config.data.credential == "default"
    assert not config.data.uses_azure


def test_gc_tuning_is_on_unless_turned_off(tmp_path: Path) -> None:
    assert EngineConfig.from_env(local_env(tmp_path)).gc_tuning is True
    off = local_env(tmp_path, STEPWAY_GC_TUNING="false")
    assert EngineConfig.from_env(off).gc_tuning is False


def test_deferred_messages_are_swept_every_minute_unless_set(tmp_path: Path) -> None:
    assert EngineConfig.from_env(local_env(tmp_path)).deferred_sweep_seconds == 60
    every = local_env(tmp_path, STEPWAY_DEFERRED_SWEEP_SECONDS="2.5")
    assert EngineConfig.from_env(every).deferred_sweep_seconds == 2.5
    never = local_env(tmp_path, STEPWAY_DEFERRED_SWEEP_SECONDS="0")
    assert EngineConfig.from_env(never).deferred_sweep_seconds == 0


def test_role_aliases_and_override(tmp_path: Path) -> None:
    assert EngineConfig.from_env(local_env(tmp_path, STEPWAY_ENGINE_ROLE="activity")).role == (
        "activities"
    )
    assert EngineConfig.from_env(local_env(tmp_path), role="orchestrator").role == "orchestrator"


def test_orchestrator_role_needs_only_the_run_store(tmp_path: Path) -> None:
    config = EngineConfig.from_env(
        {"STEPWAY_RUN_STORE_URL": f"sqlite:///{tmp_path / 'runs.db'}"}, role="orchestrator"
    )
    assert config.data.queue is None and config.data.payload_store is None


def test_azure_values() -> None:
    config = EngineConfig.from_env(
        azure_env(
            STEPWAY_PAYLOAD_MAX_SIZE="5000000",
            STEPWAY_PAYLOAD_TASK_OUTPUT_THRESHOLD="2048",
            STEPWAY_ACTION_SERVICE_URL="https://actions.example.com/",
            STEPWAY_ACTION_SERVICE_SCOPE="api://actions/.default",
            STEPWAY_ALLOWED_TOKEN_SCOPES="api://actions/.default, https://management.azure.com/.default",
            STEPWAY_TOKEN_HOSTS='{"api://orders/.default": ["Orders.example.com", "*.svc.x.com"]}',
            STEPWAY_DOCUMENT_INTELLIGENCE_ENDPOINT="https://di-x.cognitiveservices.azure.com",
            STEPWAY_OUTBOUND_READ_TIMEOUT_SECONDS="30",
            STEPWAY_OUTBOUND_MAX_REDIRECTS="2",
            STEPWAY_MAX_CONCURRENT_WORK_ITEMS="16",
            STEPWAY_MAX_CONCURRENT_ACTIVITIES="40",
            STEPWAY_BLOB_RETRY_TOTAL="1",
            STEPWAY_BLOB_INITIAL_BACKOFF_SECONDS="0.25",
            STEPWAY_BLOB_INCREMENT_BASE="1.5",
            STEPWAY_BLOB_CONNECT_TIMEOUT_SECONDS="3",
            STEPWAY_BLOB_READ_TIMEOUT_SECONDS="12.5",
        )
    )
    assert config.role == "activities"
    # The backend takes the app's managed identity from AZURE_CLIENT_ID.
    assert config.backend.kind == "azure"
    assert config.backend.credential == "managed_identity"
    assert config.backend.managed_identity_client_id == "client-id-act"
    data = config.data
    assert data.credential == "managed_identity"
    assert data.managed_identity_client_id == "client-id-act"
    assert data.run_store.auth == "entra"  # Azure host, no password: Entra by default
    assert data.run_store.url.endswith("?sslmode=require")
    assert data.run_store.migrate is False
    assert data.queue is not None and data.queue.namespace == "sb-x.servicebus.windows.net"
    assert data.payload_store is not None
    assert data.payload_store.account_url == "https://stx.blob.core.windows.net"
    assert data.payload_store.container == "payloads"
    assert data.payload_limits.max_size == 5_000_000
    assert data.payload_limits.task_output_threshold == 2048
    assert data.blob_client == BlobClientSettings(
        retry_total=1,
        initial_backoff_seconds=0.25,
        increment_base=1.5,
        connect_timeout_seconds=3.0,
        read_timeout_seconds=12.5,
    )
    assert config.action_service_url == "https://actions.example.com"
    assert config.allowed_token_scopes == {
        "api://actions/.default",
        "https://management.azure.com/.default",
    }
    assert config.token_hosts == {"api://orders/.default": ("orders.example.com", "*.svc.x.com")}
    assert config.outbound.read_timeout_seconds == 30.0
    assert config.outbound.max_redirects == 2
    assert config.max_concurrent_work_items == 16
    assert config.max_concurrent_activities == 40


def test_plain_postgresql_url_gets_the_psycopg_driver(tmp_path: Path) -> None:
    config = EngineConfig.from_env(
        local_env(tmp_path, STEPWAY_RUN_STORE_URL="postgresql://u:s3cr3t@db.internal/stepway")
    )
    assert config.data.run_store.url.startswith("postgresql+psycopg://u:s3cr3t@db.internal")
    assert config.data.run_store.auth == "password"
    assert "s3cr3t" not in config.data.run_store.redacted()


# -- building services ----------------------------------------------------------------------


def test_local_services_work(tmp_path: Path) -> None:
    config = EngineConfig.from_env(local_env(tmp_path))
    services = build_services(config)
    try:
        assert isinstance(services.run_store, SqlRunStore)
        assert isinstance(services.queue, SqliteTaskQueue)
        assert isinstance(services.payloads, LocalPayloadStore)
        # the run store is migrated and usable, the payload store stores
        services.run_store.put_definition("wf", 1, {"name": "wf", "tasks": []}, 1)
        assert services.run_store.get_definition("wf", 1) is not None
        ref = services.payloads.put("a/b", b'{"x": 1}')
        assert services.payloads.get(ref) == b'{"x": 1}'
        # the signing secret is kept where stepway dev keeps it, so both agree
        assert (tmp_path / "data" / "payload-secret").exists()
        deps = services.activity_deps
        assert isinstance(deps, ActivityDeps) and deps.payload_store is services.payloads
    finally:
        services.run_store.close()


def test_orchestrator_services_have_no_queue(tmp_path: Path) -> None:
    config = EngineConfig.from_env(local_env(tmp_path), role="orchestrator")
    config = config.model_copy(
        update={"data": config.data.model_copy(update={"queue": None, "payload_store": None})}
    )
    services = build_services(config)
    try:
        assert isinstance(services.queue, NoQueue)
        with pytest.raises(RuntimeError, match="no task queue"):
            services.queue.send("x", b"{}")  # type: ignore[call-arg]
        assert services.payloads is None
    finally:
        services.run_store.close()


class FakeToken:
    def __init__(self, token: str) -> None:
        self.token = token
        self.expires_on = 2**31


class FakeCredential:
    def __init__(self) -> None:
        self.scopes: list[str] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> FakeToken:
        self.scopes.extend(scopes)
        return FakeToken(f"token-{len(self.scopes)}")


def test_azure_services_construct_the_azure_adapters_without_network() -> None:
    config = EngineConfig.from_env(azure_env())
    services = build_services(config)
    assert isinstance(services.run_store, SqlRunStore)
    assert services.run_store.dialect == "postgresql"
    url = services.run_store.engine.url
    assert (url.host, url.username, url.database) == (
        "psql-x.postgres.database.azure.com",
        "id-act",
        "stepway",
    )
    assert isinstance(services.queue, ServiceBusTaskQueue)
    assert services.queue._client.fully_qualified_namespace == "sb-x.servicebus.windows.net"
    credential = services.queue._client._credential
    assert isinstance(credential, ManagedIdentityCredential)
    assert isinstance(services.payloads, BlobPayloadStore)
    assert services.payloads._service.url.startswith("https://stx.blob.core.windows.net")
    assert services.payloads.container_name == "payloads"
    assert services.payloads._credential is credential  # one credential for every client
    deps = services.activity_deps
    assert isinstance(deps, ActivityDeps) and deps.token_provider is not None
    client_cfg = config.backend
    assert client_cfg.endpoint == "https://dts-x.westeurope.durabletask.io"


def test_managed_identity_credential_uses_azure_client_id() -> None:
    from engine.app.azure_services import build_credential

    config = EngineConfig.from_env(azure_env())
    credential = build_credential(config.data)
    assert isinstance(credential, ManagedIdentityCredential)
    # azure-identity keeps the client id on its inner credential; look for it anywhere
    assert "client-id-act" in repr(vars(credential)) or "client-id-act" in repr(
        vars(getattr(credential, "_credential", credential))
    )
    env = azure_env()
    del env["AZURE_CLIENT_ID"]
    assert isinstance(build_credential(EngineConfig.from_env(env).data), DefaultAzureCredential)


def test_entra_run_store_sends_a_fresh_token_per_connection() -> None:
    config = EngineConfig.from_env(azure_env())
    credential = FakeCredential()
    services = build_services(config, credential=credential)  # type: ignore[arg-type]
    engine = services.run_store.engine
    seen: list[dict[str, Any]] = []

    def fake_connect(*cargs: Any, **cparams: Any) -> Any:
        seen.append(cparams)
        raise ConnectionRefusedError("no server in tests")

    engine.dialect.connect = fake_connect  # type: ignore[method-assign]
    for _ in range(2):
        with pytest.raises(Exception, match="no server in tests"):
            engine.connect()
    assert [c["password"] for c in seen] == ["token-1", "token-2"]
    assert [c["user"] for c in seen] == ["id-act", "id-act"]
    assert all(c["sslmode"] == "require" for c in seen)
    assert set(credential.scopes) == {POSTGRES_TOKEN_SCOPE}


def test_the_backend_call_timeout_is_read_and_kept_with_the_apps_identity() -> None:
    config = EngineConfig.from_env(azure_env(STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS="2.5"))
    backend = config.backend
    assert (backend.credential, backend.managed_identity_client_id) == (
        "managed_identity",
        "client-id-act",
    )
    assert backend.call_timeout_seconds == 2.5
    with pytest.raises(ConfigError, match="STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS"):
        EngineConfig.from_env(azure_env(STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS="soon"))


def test_secrets_are_read_bound_to_hosts_and_never_shown(tmp_path: Path) -> None:

    config = EngineConfig.from_env(
        local_env(
            tmp_path,
            STEPWAY_SECRET_HOSTS='{"API_TOKEN": ["api.example.com"], "db-pass": ["*.x.com"]}',
            STEPWAY_SECRET_API_TOKEN="tok-123",
            STEPWAY_SECRET_DB_PASS="pw-456",
        )
    )
    secrets = config.secrets
    assert secrets.value_for("API_TOKEN", "https://api.example.com/v1") == ("tok-123")
    assert secrets.value_for("db-pass", "https://a.x.com/") == "pw-456"
    assert "tok-123" not in repr(config) and "pw-456" not in repr(config)
    # a bound secret without its value names the variable, not a value
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(local_env(tmp_path, STEPWAY_SECRET_HOSTS='{"API_TOKEN": ["a.b"]}'))
    assert "is not set" in problems(excinfo)["STEPWAY_SECRET_API_TOKEN"]
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(local_env(tmp_path, STEPWAY_SECRET_HOSTS='{"bad name": ["a.b"]}'))
    assert "not a secret name" in problems(excinfo)["STEPWAY_SECRET_HOSTS"]


@pytest.mark.parametrize(
    "bindings",
    [
        '{"HOSTS": ["a.b"]}',  # its value would be STEPWAY_SECRET_HOSTS, the bindings
        '{"db-pass": ["a.b"], "DB_PASS": ["c.d"]}',  # one variable for two secrets
    ],
)
def test_secret_names_that_share_a_variable_are_refused(tmp_path: Path, bindings: str) -> None:
    env = local_env(
        tmp_path,
        STEPWAY_SECRET_HOSTS=bindings,
        STEPWAY_SECRET_DB_PASS="pw",
    )
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(env)
    assert "would be read from STEPWAY_SECRET_" in problems(excinfo)["STEPWAY_SECRET_HOSTS"]
