"""Configuration of a deployed engine process (and the data settings the control plane
shares with it), read from environment variables.

The Pulumi program (``stepway_infra/program.py``) sets these variables on the container
apps; ``docs/configuration.md`` lists every one with its default and the processes that
read it. Parsing never touches the network: it checks shapes and combinations, and every
error names the variable to fix (all problems are reported at once, see
:class:`ConfigError`).

Data settings (:class:`DataConfig`, read by the engine and the control plane):

* ``STEPWAY_RUN_STORE_URL``: ``sqlite:///path`` or ``postgresql+psycopg://user@host/db``
  (``postgresql://`` is read as ``postgresql+psycopg://``). ``STEPWAY_RUN_STORE_AUTH``:
  ``password`` (whatever the URL carries) or ``entra`` (Azure Database for PostgreSQL
  with Microsoft Entra authentication: the password of every new connection is an
  access token for :data:`POSTGRES_TOKEN_SCOPE` from the managed identity; the URL's user
  is the PostgreSQL role of that identity, usually the identity's name). Default:
  ``entra`` for a host under ``.postgres.database.azure.com`` without a password in the
  URL, else ``password``.
* ``STEPWAY_QUEUE``: ``sqlite:///path`` or ``servicebus://<namespace>.servicebus.windows.net``.
* ``STEPWAY_PAYLOAD_STORE``: a directory, or ``https://<account>.blob.core.windows.net/<container>``.
  ``STEPWAY_BLOB_*``: the retries and timeouts of a Blob store's client.
* ``STEPWAY_DATA_DIR``: when set, the default of the three above (``runs.db``,
  ``queues.db``, ``payloads/`` in it: the layout ``stepway dev`` uses).
* ``AZURE_CLIENT_ID``: the user-assigned managed identity every Azure client uses.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from engine.adapters.backend.config import BackendConfig, CredentialKind
from engine.adapters.backend.connect import ROLES, Role
from engine.adapters.backend.sessions import DEFAULT_SESSION_CAPACITY
from engine.adapters.blob_client_settings import BlobClientSettings
from engine.adapters.sqlite_transactions import busy_timeout_of
from engine.app.telemetry import TelemetryConfig
from engine.language.secret_refs import is_secret_name
from engine.ports.payload_store import PayloadLimits
from engine.runtime.builtins.results import OutboundSettings
from engine.runtime.builtins.secrets import Secrets, env_name
from engine.runtime.deferred_sweep import DEFAULT_INTERVAL_SECONDS
from engine.runtime.evaluators import EvaluatorLimits
from engine.runtime.run_limits import RunLimits

__all__ = [
    "POSTGRES_TOKEN_SCOPE",
    "ConfigError",
    "DataConfig",
    "EngineConfig",
    "EnvReader",
    "PayloadStoreConfig",
    "QueueConfig",
    "RunStoreConfig",
    "backend_from_env",
    "read_blob_client",
    "read_deferred_sweep",
    "read_engine_limits",
    "read_max_concurrent_activities",
    "read_payload_limits",
]

#: The Entra ID scope of Azure Database for PostgreSQL access tokens.
POSTGRES_TOKEN_SCOPE = "https://ossrdbms-aad.database.windows.net/.default"

_AZURE_POSTGRES_SUFFIX = ".postgres.database.azure.com"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class ConfigError(ValueError):
    """One or more environment variables are missing or malformed. ``problems`` holds
    ``(variable, message)`` pairs; the message lists them all, one per line."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = list(problems)
        lines = [f"{name}: {message}" for name, message in self.problems]
        super().__init__("invalid configuration:\n  " + "\n  ".join(lines))

    @property
    def variables(self) -> list[str]:
        return [name for name, _ in self.problems]


class EnvReader:
    """Reads typed values from an environment mapping and collects the problems, so
    one run reports every bad variable. Empty or blank values count as unset."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.env: Mapping[str, str] = os.environ if environ is None else environ
        self.problems: list[tuple[str, str]] = []

    def error(self, name: str, message: str) -> None:
        self.problems.append((name, message))

    def raise_if_errors(self) -> None:
        if self.problems:
            raise ConfigError(self.problems)

    def has(self, name: str) -> bool:
        return self.text(name) is not None

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.env.get(name)
        if value is None or not value.strip():
            return default
        return value.strip()

    def integer(self, name: str, default: int, *, minimum: int | None = 0) -> int:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            self.error(name, f"expected an integer, got {raw!r}")
            return default
        if minimum is not None and value < minimum:
            self.error(name, f"must be at least {minimum}, got {value}")
            return default
        return value

    def optional_int(self, name: str, *, minimum: int = 1) -> int | None:
        if self.text(name) is None:
            return None
        return self.integer(name, minimum, minimum=minimum)

    def number(self, name: str, default: float, *, minimum: float = 0.0) -> float:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            self.error(name, f"expected a number, got {raw!r}")
            return default
        if value < minimum:
            self.error(name, f"must be at least {minimum:g}, got {value:g}")
            return default
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        self.error(name, f"expected true or false, got {raw!r}")
        return default

    def choice(self, name: str, choices: tuple[str, ...], default: str | None) -> str | None:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() not in choices:
            self.error(name, f"expected one of {', '.join(choices)}, got {raw!r}")
            return default
        return raw.lower()

    def items(self, name: str) -> list[str]:
        raw = self.text(name)
        if raw is None:
            return []
        return [item.strip() for item in raw.split(",") if item.strip()]

    def json_value(self, name: str) -> Any:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            self.error(name, f"not valid JSON: {exc.msg} at position {exc.pos}")
            return None

    def https_url(self, name: str, *, allow_loopback_http: bool = True) -> str | None:
        raw = self.text(name)
        if raw is None:
            return None
        parts = urlsplit(raw)
        loopback = parts.scheme == "http" and (parts.hostname or "") in _LOOPBACK_HOSTS
        if not parts.hostname or not (
            parts.scheme == "https" or (allow_loopback_http and loopback)
        ):
            self.error(name, f"expected an https:// URL, got {raw!r}")
            return None
        return raw.rstrip("/")


# -- data settings -------------------------------------------------------------------------

RunStoreAuth = Literal["password", "entra"]


class RunStoreConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: SQLAlchemy URL (driver made explicit: ``postgresql+psycopg``)
    url: str
    auth: RunStoreAuth = "password"
    #: apply the Alembic migrations at start
    migrate: bool = True

    @property
    def dialect(self) -> str:
        return make_url(self.url).get_backend_name()

    def redacted(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)


class QueueConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["sqlite", "servicebus"]
    #: sqlite: the database file
    path: Path | None = None
    #: servicebus: ``<namespace>.servicebus.windows.net``
    namespace: str | None = None

    @property
    def namespace_name(self) -> str | None:
        """The namespace's resource name (the first label of the host)."""
        return self.namespace.split(".", 1)[0] if self.namespace else None


class PayloadStoreConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["local", "blob"]
    #: local: the directory
    directory: Path | None = None
    #: local: HMAC secret of the signed URLs (shared with the control plane, which serves
    #: them); None = read or create ``payload-secret`` beside the directory
    secret: str | None = Field(default=None, repr=False)
    #: local: the control plane's address, the base of signed URLs
    public_url: str = "http://127.0.0.1:8080"
    #: blob: ``https://<account>.blob.core.windows.net``
    account_url: str | None = None
    #: blob: the container
    container: str | None = None

    def local_secret(self) -> str:
        """The signing secret of a local store: the configured one, else the one kept in
        ``<directory>/../payload-secret`` (created, mode 0600, on first use; the file
        ``stepway dev`` uses for the same data directory)."""
        if self.secret:
            return self.secret
        if self.directory is None:
            raise ValueError("not a local payload store")
        import secrets as secrets_module

        path = self.directory.parent / "payload-secret"
        if path.exists():
            return path.read_text().strip()
        path.parent.mkdir(parents=True, exist_ok=True)
        value = secrets_module.token_hex(32)
        path.touch(mode=0o600)
        path.write_text(value)
        return value


class DataConfig(BaseModel):
    """Where runs, queued tasks and payloads live, and the identity that reaches them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_store: RunStoreConfig
    queue: QueueConfig | None = None
    payload_store: PayloadStoreConfig | None = None
    payload_limits: PayloadLimits = Field(default_factory=PayloadLimits)
    #: ``STEPWAY_BLOB_*``: retries and timeouts of a Blob payload store's client
    blob_client: BlobClientSettings = Field(default_factory=BlobClientSettings)
    #: ``AZURE_CLIENT_ID``: user-assigned managed identity of every Azure client
    managed_identity_client_id: str | None = None
    #: ``managed_identity`` (with ``AZURE_CLIENT_ID``) or ``default``
    #: (``DefaultAzureCredential``: developer logins, workload identity ...)
    credential: CredentialKind = "default"

    @property
    def uses_azure(self) -> bool:
        return (
            self.run_store.auth == "entra"
            or (self.queue is not None and self.queue.kind == "servicebus")
            or (self.payload_store is not None and self.payload_store.kind == "blob")
        )

    @classmethod
    def read(
        cls,
        env: EnvReader,
        *,
        need_queue: bool = True,
        need_payload_store: bool = True,
        default_port: int = 8080,
    ) -> DataConfig | None:
        """Reads the data settings; problems go to ``env`` (None when there were any)."""
        before = len(env.problems)
        data_dir_raw = env.text("STEPWAY_DATA_DIR")
        data_dir = Path(data_dir_raw).expanduser() if data_dir_raw else None

        run_store = _read_run_store(env, data_dir)
        queue = _read_queue(env, data_dir, required=need_queue)
        payloads = _read_payload_store(
            env, data_dir, required=need_payload_store, port=default_port
        )
        limits = read_payload_limits(env)
        blob_client = read_blob_client(env)

        client_id = env.text("AZURE_CLIENT_ID")
        credential = cast(
            CredentialKind,
            env.choice(
                "STEPWAY_AZURE_CREDENTIAL",
                ("managed_identity", "default"),
                "managed_identity" if client_id else "default",
            ),
        )
        if len(env.problems) > before or run_store is None:
            return None
        return cls(
            run_store=run_store,
            queue=queue,
            payload_store=payloads,
            payload_limits=limits,
            blob_client=blob_client,
            managed_identity_client_id=client_id,
            credential=credential,
        )


def _read_run_store(env: EnvReader, data_dir: Path | None) -> RunStoreConfig | None:
    name = "STEPWAY_RUN_STORE_URL"
    raw = env.text(name)
    if raw is None:
        if data_dir is None:
            env.error(
                name,
                "not set: give sqlite:///<file> or postgresql+psycopg://<user>@<host>/<db> "
                "(or set STEPWAY_DATA_DIR for the local defaults)",
            )
            return None
        raw = f"sqlite:///{data_dir / 'runs.db'}"
    try:
        url = make_url(raw)
    except ArgumentError:
        env.error(name, "not a database URL (expected sqlite:///... or postgresql+psycopg://...)")
        return None
    backend = url.get_backend_name()
    if backend == "postgres":
        url = url.set(drivername="postgresql+psycopg")
        backend = "postgresql"
    migrate = env.flag("STEPWAY_RUN_STORE_MIGRATE", True)
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            env.error(name, "a SQLite run store needs a file: sqlite:///<path>")
            return None
        try:
            busy_timeout_of(url)
        except ValueError as exc:
            env.error(name, str(exc))
            return None
        auth = env.choice("STEPWAY_RUN_STORE_AUTH", ("password",), "password")
        return RunStoreConfig(url=_render(url), auth="password", migrate=migrate) if auth else None
    if backend != "postgresql":
        env.error(name, f"unsupported database {backend!r}: use sqlite or postgresql+psycopg")
        return None
    driver = url.get_driver_name()
    if url.drivername == "postgresql" or driver == "psycopg2":
        url = url.set(drivername="postgresql+psycopg")
    elif driver != "psycopg":
        env.error(name, f"unsupported PostgreSQL driver {driver!r}: use postgresql+psycopg")
        return None
    if not url.host or not url.database:
        env.error(
            name, "a PostgreSQL URL needs a host and a database: postgresql+psycopg://user@host/db"
        )
        return None
    default_auth = (
        "entra"
        if url.host.endswith(_AZURE_POSTGRES_SUFFIX) and url.password is None
        else "password"
    )
    auth = env.choice("STEPWAY_RUN_STORE_AUTH", ("password", "entra"), default_auth)
    if auth == "entra":
        if url.password is not None:
            env.error(name, "with STEPWAY_RUN_STORE_AUTH=entra the URL must not carry a password")
            return None
        if not url.username:
            env.error(
                name,
                "with STEPWAY_RUN_STORE_AUTH=entra the URL needs the PostgreSQL role of the "
                "managed identity as user (postgresql+psycopg://<identity name>@<host>/<db>)",
            )
            return None
        if "sslmode" not in url.query:
            url = url.update_query_dict({"sslmode": "require"})
    return RunStoreConfig(url=_render(url), auth=cast(RunStoreAuth, auth), migrate=migrate)


def _render(url: URL) -> str:
    return url.render_as_string(hide_password=False)


def _read_queue(env: EnvReader, data_dir: Path | None, *, required: bool) -> QueueConfig | None:
    name = "STEPWAY_QUEUE"
    raw = env.text(name)
    if raw is None:
        if data_dir is not None:
            return QueueConfig(kind="sqlite", path=data_dir / "queues.db")
        if required:
            env.error(
                name,
                "not set: give sqlite:///<file> or servicebus://<namespace>.servicebus.windows.net "
                "(or set STEPWAY_DATA_DIR for the local default)",
            )
        return None
    if raw.startswith("sqlite:///"):
        path = raw[len("sqlite:///") :]
        if not path or path == ":memory:":
            env.error(name, "a SQLite queue needs a file: sqlite:///<path>")
            return None
        return QueueConfig(kind="sqlite", path=Path(path))
    if raw.startswith(("servicebus://", "sb://")):
        parts = urlsplit(raw)
        host = parts.hostname or ""
        if "." not in host or parts.path.strip("/"):
            env.error(
                name,
                f"expected servicebus://<namespace>.servicebus.windows.net (the fully qualified "
                f"namespace, no path), got {raw!r}",
            )
            return None
        return QueueConfig(kind="servicebus", namespace=host)
    env.error(
        name,
        "expected sqlite:///<file> or servicebus://<namespace>.servicebus.windows.net, "
        f"got {raw!r}",
    )
    return None


def _read_payload_store(
    env: EnvReader, data_dir: Path | None, *, required: bool, port: int
) -> PayloadStoreConfig | None:
    name = "STEPWAY_PAYLOAD_STORE"
    raw = env.text(name)
    public_url = env.https_url("STEPWAY_PUBLIC_URL") or f"http://127.0.0.1:{port}"
    secret = env.text("STEPWAY_PAYLOAD_SECRET")
    if secret is not None and len(secret) < 32:
        env.error("STEPWAY_PAYLOAD_SECRET", "must be at least 32 characters")
    if raw is None:
        if data_dir is not None:
            return PayloadStoreConfig(
                kind="local", directory=data_dir / "payloads", secret=secret, public_url=public_url
            )
        if required:
            env.error(
                name,
                "not set: give a directory or https://<account>.blob.core.windows.net/<container> "
                "(or set STEPWAY_DATA_DIR for the local default)",
            )
        return None
    if raw.startswith(("http://", "https://")):
        parts = urlsplit(raw)
        segments = [s for s in parts.path.split("/") if s]
        if parts.scheme != "https" or not parts.hostname or not segments or parts.query:
            env.error(
                name,
                "expected https://<account>.blob.core.windows.net/<container> "
                f"(https, with the container as the last path segment), got {raw!r}",
            )
            return None
        container = segments[-1]
        base_path = "/".join(segments[:-1])
        account_url = f"https://{parts.netloc}" + (f"/{base_path}" if base_path else "")
        return PayloadStoreConfig(kind="blob", account_url=account_url, container=container)
    if "://" in raw:
        env.error(name, f"expected a directory or an https:// Blob container URL, got {raw!r}")
        return None
    return PayloadStoreConfig(
        kind="local", directory=Path(raw).expanduser(), secret=secret, public_url=public_url
    )


def read_payload_limits(env: EnvReader) -> PayloadLimits:
    """``STEPWAY_PAYLOAD_*``: offload thresholds and the hard maximum."""
    defaults = PayloadLimits()
    values: dict[str, int] = {}
    for field_name in PayloadLimits.model_fields:
        var = "STEPWAY_PAYLOAD_" + field_name.upper()
        values[field_name] = env.integer(var, getattr(defaults, field_name), minimum=0)
    try:
        return PayloadLimits(**values)
    except ValidationError as exc:  # pragma: no cover - bounds are checked above
        env.error("STEPWAY_PAYLOAD_*", str(exc))
        return defaults


def read_blob_client(env: EnvReader) -> BlobClientSettings:
    """``STEPWAY_BLOB_*``: the retries and timeouts of the Blob payload store's client
    (engine/adapters/blob_client_settings.py)."""
    defaults = BlobClientSettings()
    return BlobClientSettings(
        retry_total=env.integer("STEPWAY_BLOB_RETRY_TOTAL", defaults.retry_total, minimum=0),
        initial_backoff_seconds=env.number(
            "STEPWAY_BLOB_INITIAL_BACKOFF_SECONDS", defaults.initial_backoff_seconds
        ),
        increment_base=env.number("STEPWAY_BLOB_INCREMENT_BASE", defaults.increment_base),
        connect_timeout_seconds=env.number(
            "STEPWAY_BLOB_CONNECT_TIMEOUT_SECONDS", defaults.connect_timeout_seconds, minimum=0.1
        ),
        read_timeout_seconds=env.number(
            "STEPWAY_BLOB_READ_TIMEOUT_SECONDS", defaults.read_timeout_seconds, minimum=0.1
        ),
    )


def backend_from_env(env: EnvReader, client_id: str | None) -> BackendConfig | None:
    """``BackendConfig.from_env`` with the problem named. An Azure backend whose
    ``STEPWAY_BACKEND_CREDENTIAL`` is ``managed_identity`` or unset, without
    ``STEPWAY_BACKEND_MANAGED_IDENTITY_CLIENT_ID``, uses the user-assigned identity of
    ``AZURE_CLIENT_ID`` when that is set (what the container apps have)."""
    try:
        backend = BackendConfig.from_env(env.env)
    except ValidationError as exc:
        for error in exc.errors():
            loc = [str(part) for part in error.get("loc", ()) if part != "__root__"]
            message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
            if loc:
                env.error("STEPWAY_BACKEND_" + loc[0].upper(), message)
            else:
                env.error(_backend_var_for(message), message)
        return None
    if (
        backend.kind == "azure"
        and client_id
        and not backend.managed_identity_client_id
        and (backend.credential == "managed_identity" or not env.has("STEPWAY_BACKEND_CREDENTIAL"))
    ):
        # the other settings (the call timeout) stay as read
        backend = backend.model_copy(
            update={"credential": "managed_identity", "managed_identity_client_id": client_id}
        )
    return backend


def _backend_var_for(message: str) -> str:
    for field_name in ("managed_identity_client_id", "endpoint", "task_hub", "address"):
        if field_name in message:
            return "STEPWAY_BACKEND_" + field_name.upper()
    if "embedded address" in message:
        return "STEPWAY_BACKEND_ADDRESS"
    return "STEPWAY_BACKEND_KIND"


# -- the engine process ---------------------------------------------------------------------

#: accepted spellings of ``STEPWAY_ENGINE_ROLE`` (``activity`` is what the app name says)
_ROLE_ALIASES: dict[str, Role] = {
    "orchestrator": "orchestrator",
    "orchestrators": "orchestrator",
    "activities": "activities",
    "activity": "activities",
    "all": "all",
}


#: the default OpenTelemetry service name of each role (Pulumi sets OTEL_SERVICE_NAME)
_SERVICE_NAMES = {
    "orchestrator": "stepway-engine-orchestrator",
    "activities": "stepway-engine-activity",
    "all": "stepway-engine",
}


class EngineConfig(BaseModel):
    """Everything an engine process (``stepway engine``) is configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    role: Role
    backend: BackendConfig
    data: DataConfig
    #: CALL_TOOL: ``{action_service_url}/tools/{tool}`` with a token for the scope
    action_service_url: str | None = None
    action_service_scope: str | None = None
    #: token scopes an HTTP/CALL_TOOL/LOGIC_APP task may ask for (None = any)
    allowed_token_scopes: frozenset[str] | None = None
    #: scope -> the hosts a task's call may send that scope's tokens to (none: no host)
    token_hosts: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: the secrets an HTTP task's request may carry, bound to hosts
    secrets: Secrets = Field(default_factory=Secrets)
    document_intelligence_endpoint: str | None = None
    outbound: OutboundSettings = Field(default_factory=OutboundSettings)
    no_worker_warning_ms: int = 10_000
    #: per process: concurrent work items of each kind (None: engine/app/host.py's
    #: engine_concurrency defaults)
    max_concurrent_work_items: int | None = None
    #: per process: concurrent activity work items, each on a thread of its own (None:
    #: ``max_concurrent_work_items``, else engine/app/host.py's default)
    max_concurrent_activities: int | None = None
    #: live orchestrations kept between their work items (0: every work item replays)
    orchestration_sessions: int = DEFAULT_SESSION_CAPACITY
    #: freeze what start-up made and raise the collector's thresholds
    #: (engine/app/garbage_collection.py)
    gc_tuning: bool = True
    #: seconds between sweeps of deferred messages (engine/runtime/deferred_sweep.py) in
    #: a process hosting the activities; 0: none
    deferred_sweep_seconds: float = DEFAULT_INTERVAL_SECONDS
    #: where traces go (engine/app/telemetry.py); default: nowhere
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    #: limits of script and jq evaluations (engine.runtime.evaluators)
    evaluators: EvaluatorLimits = Field(default_factory=EvaluatorLimits)
    #: limits of one run (engine.runtime.run_limits)
    run_limits: RunLimits = Field(default_factory=RunLimits)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, role: str | None = None
    ) -> EngineConfig:
        """Reads the engine's variables (see docs/configuration.md). ``role`` (the
        ``--role`` option) overrides ``STEPWAY_ENGINE_ROLE``. Raises
        :class:`ConfigError` naming every bad variable."""
        env = EnvReader(environ)
        role_value = _read_role(env, role)
        hosts_activities = role_value in ("activities", "all")
        data = DataConfig.read(
            env, need_queue=hosts_activities, need_payload_store=hosts_activities
        )
        client_id = env.text("AZURE_CLIENT_ID")
        backend = backend_from_env(env, client_id)
        action_url = env.https_url("STEPWAY_ACTION_SERVICE_URL")
        action_scope = env.text("STEPWAY_ACTION_SERVICE_SCOPE")
        if action_scope and not action_url and env.text("STEPWAY_ACTION_SERVICE_URL") is None:
            env.error("STEPWAY_ACTION_SERVICE_SCOPE", "set without STEPWAY_ACTION_SERVICE_URL")
        scopes = env.items("STEPWAY_ALLOWED_TOKEN_SCOPES")
        token_hosts = _read_token_hosts(env)
        secrets = read_secrets(env)
        di_endpoint = env.https_url("STEPWAY_DOCUMENT_INTELLIGENCE_ENDPOINT")
        outbound = _read_outbound(env)
        warning_ms = env.integer("STEPWAY_NO_WORKER_WARNING_MS", 10_000)
        concurrency = env.optional_int("STEPWAY_MAX_CONCURRENT_WORK_ITEMS", minimum=1)
        activities = read_max_concurrent_activities(env)
        sessions = read_orchestration_sessions(env)
        gc_tuning = read_gc_tuning(env)
        deferred_sweep = read_deferred_sweep(env)
        telemetry = TelemetryConfig.read(env, _SERVICE_NAMES.get(role_value or "", "stepway"))
        evaluators, run_limits = read_engine_limits(env)
        env.raise_if_errors()
        assert data is not None and backend is not None and role_value is not None
        return cls(
            role=role_value,
            backend=backend,
            data=data,
            action_service_url=action_url,
            action_service_scope=action_scope,
            allowed_token_scopes=frozenset(scopes) if scopes else None,
            token_hosts=token_hosts,
            secrets=secrets,
            document_intelligence_endpoint=di_endpoint,
            outbound=outbound,
            no_worker_warning_ms=warning_ms,
            max_concurrent_work_items=concurrency,
            max_concurrent_activities=activities,
            orchestration_sessions=sessions,
            gc_tuning=gc_tuning,
            deferred_sweep_seconds=deferred_sweep,
            telemetry=telemetry,
            evaluators=evaluators,
            run_limits=run_limits,
        )


def _read_role(env: EnvReader, override: str | None) -> Role | None:
    name = "STEPWAY_ENGINE_ROLE"
    raw = override if override is not None else env.text(name)
    if raw is None:
        env.error(name, f"not set: give one of {', '.join(ROLES)} (or --role)")
        return None
    role = _ROLE_ALIASES.get(raw.strip().lower())
    if role is None:
        source = "--role" if override is not None else name
        env.error(source, f"expected one of {', '.join(ROLES)}, got {raw!r}")
    return role


_HOST_PATTERN = re.compile(
    r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
)


def _read_host_map(env: EnvReader, name: str, what: str) -> dict[str, tuple[str, ...]]:
    """A JSON object of ``name``: ``what`` -> list of hosts (``api.example.com``, or
    ``*.example.com`` for any host under the domain)."""
    value = env.json_value(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        env.error(name, f"must be a JSON object: {what} -> list of host names")
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for key, hosts in value.items():
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            env.error(name, f"the hosts of {what} {key!r} must be a list of host names")
            continue
        bad = [h for h in hosts if not _HOST_PATTERN.fullmatch(h)]
        if bad:
            env.error(
                name,
                f"{what} {key!r}: {bad[0]!r} is not a host name or '*.' and a domain "
                "(no scheme, port, path or bare '*')",
            )
            continue
        found[key] = tuple(h.lower() for h in hosts)
    return found


def _read_token_hosts(env: EnvReader) -> dict[str, tuple[str, ...]]:
    """``STEPWAY_TOKEN_HOSTS``: token scope -> the hosts that may receive that scope's
    tokens. A scope not in it is sent to no host a task names."""
    return _read_host_map(env, "STEPWAY_TOKEN_HOSTS", "scope")


def read_secrets(env: EnvReader) -> Secrets:
    """``STEPWAY_SECRET_HOSTS``: secret name -> the hosts an HTTP request carrying it may
    go to; each bound secret's value is ``STEPWAY_SECRET_<NAME>`` (a missing one is an
    error naming the variable, never a value)."""
    hosts = _read_host_map(env, "STEPWAY_SECRET_HOSTS", "secret")
    values: dict[str, str] = {}
    variables: dict[str, str] = {"STEPWAY_SECRET_HOSTS": "the bindings themselves"}
    for secret in hosts:
        if not is_secret_name(secret):
            env.error("STEPWAY_SECRET_HOSTS", f"{secret!r} is not a secret name (A-Z, 0-9, _, -)")
            continue
        # two names may not share the variable of their values (case, '-' as '_')
        variable = env_name(secret)
        if variable in variables:
            env.error(
                "STEPWAY_SECRET_HOSTS",
                f"secret {secret!r} would be read from {variable}, as {variables[variable]}",
            )
            continue
        variables[variable] = f"secret {secret!r}"
        value = env.text(variable)
        if not value:
            env.error(
                variable, f"is not set: the value of secret {secret!r} (STEPWAY_SECRET_HOSTS)"
            )
            continue
        values[secret] = value
    return Secrets(values, hosts)


def _read_outbound(env: EnvReader) -> OutboundSettings:
    defaults = OutboundSettings()
    values: dict[str, Any] = {}
    for item in dataclass_fields(OutboundSettings):
        var = "STEPWAY_OUTBOUND_" + item.name.upper()
        default = getattr(defaults, item.name)
        if isinstance(default, bool):
            values[item.name] = env.flag(var, default)
        elif isinstance(default, int):
            values[item.name] = env.integer(var, default, minimum=0)
        else:
            values[item.name] = env.number(var, float(default), minimum=0.0)
    return OutboundSettings(**values)


def read_orchestration_sessions(env: EnvReader) -> int:
    """``STEPWAY_ORCHESTRATION_SESSIONS``: live orchestrations an engine process keeps
    between their work items; read by ``stepway engine`` and by ``stepway dev``."""
    return env.integer("STEPWAY_ORCHESTRATION_SESSIONS", DEFAULT_SESSION_CAPACITY, minimum=0)


def read_max_concurrent_activities(env: EnvReader) -> int | None:
    """``STEPWAY_MAX_CONCURRENT_ACTIVITIES``: activity work items an engine process runs
    at once, each on a thread of its own (None: unset, engine/app/host.py's
    ``engine_concurrency`` decides); read by ``stepway engine`` and by ``stepway dev``."""
    return env.optional_int("STEPWAY_MAX_CONCURRENT_ACTIVITIES", minimum=1)


def read_gc_tuning(env: EnvReader) -> bool:
    """``STEPWAY_GC_TUNING``: whether the process freezes what start-up made and raises
    the garbage collector's thresholds (engine/app/garbage_collection.py); read by every
    platform process."""
    return env.flag("STEPWAY_GC_TUNING", True)


def read_deferred_sweep(env: EnvReader) -> float:
    """``STEPWAY_DEFERRED_SWEEP_SECONDS``: seconds between the sweeps of deferred messages
    of attempts that are over (engine/runtime/deferred_sweep.py), ``0`` for none; read by
    ``stepway engine`` (the activities and all roles sweep) and by ``stepway dev``."""
    return env.number("STEPWAY_DEFERRED_SWEEP_SECONDS", DEFAULT_INTERVAL_SECONDS, minimum=0.0)


def read_engine_limits(env: EnvReader) -> tuple[EvaluatorLimits, RunLimits]:
    """The evaluator and run limits (``STEPWAY_EVALUATOR_*``, ``STEPWAY_MAX_*``); read by
    ``stepway engine`` and by ``stepway dev``. Bad values are reported on ``env``."""
    defaults = EvaluatorLimits()
    evaluators = EvaluatorLimits(
        processes=env.integer("STEPWAY_EVALUATOR_PROCESSES", defaults.processes, minimum=1),
        cpu_seconds=env.number("STEPWAY_EVALUATOR_CPU_SECONDS", defaults.cpu_seconds, minimum=0.1),
        wall_seconds=env.number(
            "STEPWAY_EVALUATOR_WALL_SECONDS", defaults.wall_seconds, minimum=0.1
        ),
        memory_bytes=env.integer(
            "STEPWAY_EVALUATOR_MEMORY_BYTES", defaults.memory_bytes, minimum=16 * 1024 * 1024
        ),
        max_output_bytes=env.integer(
            "STEPWAY_EVALUATOR_MAX_OUTPUT_BYTES", defaults.max_output_bytes, minimum=1
        ),
    )
    run = RunLimits()
    run_limits = RunLimits(
        max_loop_iterations=env.integer(
            "STEPWAY_MAX_LOOP_ITERATIONS", run.max_loop_iterations, minimum=1
        ),
        max_workflow_depth=env.integer(
            "STEPWAY_MAX_WORKFLOW_DEPTH", run.max_workflow_depth, minimum=0
        ),
        max_message_bytes=env.integer(
            "STEPWAY_MAX_MESSAGE_BYTES", run.max_message_bytes, minimum=64 * 1024
        ),
    )
    return evaluators, run_limits
