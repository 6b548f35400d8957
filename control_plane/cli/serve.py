"""``stepway serve``: the control plane of a deployed environment, configured from
environment variables (see docs/configuration.md).

It builds :func:`control_plane.api.app.create_app` on the adapters the engine uses
(:mod:`engine.app.azure_services`), the queue provisioner (Service Bus through ARM, or the
SQLite queue file), the durable client as :class:`~control_plane.deps.DurableRunSignals`,
and serves it with uvicorn on ``STEPWAY_HOST``:``STEPWAY_PORT``. uvicorn stops on SIGTERM
and SIGINT after the requests in progress have finished.

Authentication (``STEPWAY_AUTH_MODE``) defaults to ``entra``; ``none`` is refused unless
the server listens on a loopback address or ``STEPWAY_ALLOW_ANONYMOUS=true`` says that
anonymous admin access is intended. Traces go where engine/app/telemetry.py reads
(Application Insights, OTLP, or nowhere); the tracer provider is built in :func:`run`.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal, cast

import uvicorn
from azure.core.credentials import TokenCredential
from fastapi import FastAPI
from opentelemetry.trace import NoOpTracerProvider, TracerProvider
from pydantic import BaseModel, ConfigDict, Field

from control_plane.api.app import StepwayApp, create_app
from control_plane.cli.http_server import KEEP_ALIVE_SECONDS, uvicorn_config
from control_plane.console.config import console_settings_from_env
from control_plane.deps import AuthMode, Deps, Settings
from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.queue_provisioning_azure import AzureQueueProvisioner
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.app.azure_services import (
    build_credential,
    build_payload_store,
    build_queue,
    build_run_store,
    telemetry_credential,
)
from engine.app.config import DataConfig, EnvReader, backend_from_env, read_gc_tuning
from engine.app.garbage_collection import settle_heap
from engine.app.telemetry import TelemetryConfig, build_tracer_provider
from engine.ports.queue_provisioning import QueueProvisioner

__all__ = ["ServeConfig", "ServiceBusTarget", "build_control_plane", "is_loopback", "run"]

log = logging.getLogger(__name__)

_NAMESPACE_ID = re.compile(
    r"^/subscriptions/(?P<subscription>[^/]+)/resourceGroups/(?P<group>[^/]+)/providers/"
    r"Microsoft\.ServiceBus/namespaces/(?P<namespace>[^/]+)$",
    re.IGNORECASE,
)


class ServiceBusTarget(BaseModel):
    """Where the queue provisioner creates queues (ARM coordinates of the namespace)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subscription_id: str
    resource_group: str
    namespace: str


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ServeConfig(BaseModel):
    """Everything ``stepway serve`` is configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "0.0.0.0"
    port: int = 8080
    data: DataConfig
    backend: BackendConfig
    settings: Settings
    #: Service Bus queues: where to create them; None with the SQLite queue
    service_bus: ServiceBusTarget | None = None
    log_level: str = "info"
    #: where traces go (engine/app/telemetry.py); default: nowhere
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    #: freeze what start-up made and raise the collector's thresholds
    #: (engine/app/garbage_collection.py)
    gc_tuning: bool = True
    #: how long an idle kept-alive connection stays open (control_plane/cli/http_server.py)
    keep_alive_seconds: int = KEEP_ALIVE_SECONDS

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
    ) -> ServeConfig:
        """Reads the control plane's variables; ``host``/``port`` (command line options)
        override ``STEPWAY_HOST``/``STEPWAY_PORT``. Raises :class:`ConfigError` naming
        every bad variable."""
        env = EnvReader(environ)
        host_value = host or env.text("STEPWAY_HOST", "0.0.0.0") or "0.0.0.0"
        port_value = port if port is not None else env.integer("STEPWAY_PORT", 8080, minimum=1)
        if port_value > 65535:
            env.error("STEPWAY_PORT", f"not a TCP port: {port_value}")
        data = DataConfig.read(env, default_port=port_value)
        client_id = env.text("AZURE_CLIENT_ID")
        backend = backend_from_env(env, client_id)
        settings = _read_settings(env, host_value)
        service_bus = None
        if data is not None and data.queue is not None and data.queue.kind == "servicebus":
            service_bus = _read_service_bus_target(env, data.queue.namespace_name or "")
        log_level = env.choice("STEPWAY_LOG_LEVEL", ("debug", "info", "warning", "error"), "info")
        telemetry = TelemetryConfig.read(env, "stepway-control-plane")
        gc_tuning = read_gc_tuning(env)
        keep_alive = env.integer("STEPWAY_HTTP_KEEP_ALIVE_SECONDS", KEEP_ALIVE_SECONDS, minimum=1)
        env.raise_if_errors()
        assert data is not None and backend is not None and settings is not None
        return cls(
            host=host_value,
            port=port_value,
            data=data,
            backend=backend,
            settings=settings,
            service_bus=service_bus,
            log_level=log_level or "info",
            telemetry=telemetry,
            gc_tuning=gc_tuning,
            keep_alive_seconds=keep_alive,
        )


def _read_settings(env: EnvReader, host: str) -> Settings | None:
    mode = cast(AuthMode, env.choice("STEPWAY_AUTH_MODE", ("entra", "tokens", "none"), "entra"))
    values: dict[str, Any] = {"auth_mode": mode}
    if mode == "none":
        anonymous_ok = env.flag("STEPWAY_ALLOW_ANONYMOUS", False)
        if not is_loopback(host) and not anonymous_ok:
            env.error(
                "STEPWAY_AUTH_MODE",
                f"'none' gives every caller admin rights; refused on {host} (not a loopback "
                "address). Use entra or tokens, listen on 127.0.0.1 (STEPWAY_HOST), or set "
                "STEPWAY_ALLOW_ANONYMOUS=true if that is really intended",
            )
    elif mode == "tokens":
        raw = env.text("STEPWAY_TOKENS_FILE")
        if raw is None:
            env.error("STEPWAY_TOKENS_FILE", "required with STEPWAY_AUTH_MODE=tokens")
        elif not Path(raw).is_file():
            env.error("STEPWAY_TOKENS_FILE", f"no such file: {raw}")
        else:
            values["tokens_file"] = Path(raw)
    elif mode == "entra":
        tenant = env.text("STEPWAY_TENANT_ID")
        issuer = env.https_url("STEPWAY_TOKEN_ISSUER", allow_loopback_http=False)
        audience = env.items("STEPWAY_TOKEN_AUDIENCE")
        if not tenant and not issuer:
            env.error("STEPWAY_TENANT_ID", "required with STEPWAY_AUTH_MODE=entra")
        if not audience:
            env.error(
                "STEPWAY_TOKEN_AUDIENCE",
                "required with STEPWAY_AUTH_MODE=entra (the API's application id URI or "
                "client id; several separated by commas)",
            )
        values.update(entra_tenant_id=tenant, entra_issuer=issuer, entra_audience=audience)
        jwks_url = env.https_url("STEPWAY_JWKS_URL", allow_loopback_http=False)
        if jwks_url:
            values["entra_jwks_url"] = jwks_url
        role_map = _string_map(env, "STEPWAY_ROLE_MAP")
        if role_map is not None:
            values["entra_role_map"] = role_map
        workers = _list_map(env, "STEPWAY_WORKER_IDENTITIES")
        if workers is not None:
            values["entra_worker_task_types"] = workers
    domains = _list_map(env, "STEPWAY_TASK_DOMAINS")
    if domains is not None:
        values["task_domains"] = domains
    values["console"] = console_settings_from_env(env)
    values["strict_task_definitions"] = env.flag("STEPWAY_STRICT_TASK_DEFINITIONS", False)
    for var, key, minimum in (
        ("STEPWAY_MAX_BODY_BYTES", "max_body_bytes", 1),
        ("STEPWAY_SIGNED_URL_SECONDS", "signed_url_seconds", 1),
        ("STEPWAY_MAX_CONCURRENT_POLLS", "max_concurrent_polls", 1),
        ("STEPWAY_NO_WORKER_WARNING_MS", "no_worker_after_ms", 1),
        ("STEPWAY_POLL_RECORD_INTERVAL_MS", "poll_record_interval_ms", 1),
        ("STEPWAY_RECONCILE_INTERVAL_MS", "reconcile_interval_ms", 0),
    ):
        if env.has(var):
            values[key] = env.integer(var, minimum, minimum=minimum)
    try:
        return Settings(**values)
    except ValueError as exc:  # pragma: no cover - shapes are checked above
        env.error("STEPWAY_AUTH_MODE", str(exc))
        return None


def _string_map(env: EnvReader, name: str) -> dict[str, str] | None:
    value = env.json_value(name)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        env.error(name, 'expected a JSON object of strings, e.g. {"Stepway.Admin": "admin"}')
        return None
    return {str(k): v for k, v in value.items()}


def _list_map(env: EnvReader, name: str) -> dict[str, list[str]] | None:
    value = env.json_value(name)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(isinstance(i, str) for i in v) for v in value.values()
    ):
        env.error(name, 'expected a JSON object of string lists, e.g. {"<id>": ["type_a"]}')
        return None
    return {str(k): list(v) for k, v in value.items()}


def _read_service_bus_target(env: EnvReader, namespace: str) -> ServiceBusTarget | None:
    resource_id = env.text("STEPWAY_SERVICEBUS_RESOURCE_ID")
    if resource_id is not None:
        match = _NAMESPACE_ID.match(resource_id)
        if match is None:
            env.error(
                "STEPWAY_SERVICEBUS_RESOURCE_ID",
                "expected /subscriptions/<id>/resourceGroups/<group>/providers/"
                "Microsoft.ServiceBus/namespaces/<namespace>",
            )
            return None
        if match["namespace"].lower() != namespace.lower():
            env.error(
                "STEPWAY_SERVICEBUS_RESOURCE_ID",
                f"names namespace {match['namespace']!r} but STEPWAY_QUEUE is {namespace!r}",
            )
            return None
        return ServiceBusTarget(
            subscription_id=match["subscription"],
            resource_group=match["group"],
            namespace=match["namespace"],
        )
    subscription = env.text("STEPWAY_SUBSCRIPTION_ID")
    group = env.text("STEPWAY_RESOURCE_GROUP")
    if not subscription or not group:
        env.error(
            "STEPWAY_SERVICEBUS_RESOURCE_ID",
            "required with a Service Bus queue (to create queues when task definitions are "
            "registered); or set STEPWAY_SUBSCRIPTION_ID and STEPWAY_RESOURCE_GROUP",
        )
        return None
    return ServiceBusTarget(subscription_id=subscription, resource_group=group, namespace=namespace)


@dataclass
class ControlPlane:
    """The app and what must be closed when it stops."""

    app: StepwayApp
    deps: Deps
    client: Any

    def close(self) -> None:
        self.app.close()
        close = getattr(self.client, "close", None)
        if callable(close):
            close()
        store_close = getattr(self.deps.run_store, "close", None)
        if callable(store_close):
            store_close()


def build_provisioner(config: ServeConfig, credential: TokenCredential) -> QueueProvisioner:
    queue = config.data.queue
    assert queue is not None
    if queue.kind == "sqlite":
        assert queue.path is not None
        return SqliteQueueProvisioner(queue.path)
    target = config.service_bus
    assert target is not None
    return AzureQueueProvisioner(
        credential, target.subscription_id, target.resource_group, target.namespace
    )


def build_control_plane(
    config: ServeConfig,
    *,
    credential: TokenCredential | None = None,
    client: Any = None,
    tracer_provider: TracerProvider | None = None,
) -> ControlPlane:
    """The control plane app on the configured adapters (``credential``/``client``
    override the configured ones: tests); its spans go to ``tracer_provider``."""
    data = config.data
    if credential is None:
        credential = build_credential(data)
    store = build_run_store(data.run_store, credential)
    queue = build_queue(data, credential)
    assert queue is not None
    if client is None:
        client = make_client(config.backend)
    payloads = build_payload_store(data, credential)
    deps = Deps(
        run_store=store,
        queue=queue,
        provisioner=build_provisioner(config, credential),
        payloads=payloads,
        signals=DurableRunSignals(client),
        tracer_provider=tracer_provider or NoOpTracerProvider(),
        local_adapters=(
            config.backend.kind == "embedded"
            and store.dialect == "sqlite"
            and data.queue is not None
            and data.queue.kind == "sqlite"
            and (data.payload_store is None or data.payload_store.kind == "local")
        ),
    )
    return ControlPlane(app=create_app(config.settings, deps), deps=deps, client=client)


def server_config(config: ServeConfig, app: FastAPI) -> uvicorn.Config:
    """uvicorn's settings for the control plane's ``app`` (control_plane/cli/http_server.py)."""
    return uvicorn_config(
        app,
        host=config.host,
        port=config.port,
        log_level=cast(Literal["debug", "info", "warning", "error"], config.log_level),
        keep_alive_seconds=config.keep_alive_seconds,
    )


def run(config: ServeConfig) -> None:
    """Serve until SIGTERM/SIGINT, then finish the requests in progress and return (the
    process exits 0: uvicorn would re-raise the signal after its graceful shutdown)."""

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    credential = build_credential(config.data)
    tracer_provider = build_tracer_provider(
        config.telemetry, telemetry_credential(config.data, credential)
    )
    plane = build_control_plane(config, credential=credential, tracer_provider=tracer_provider)
    log.warning(
        "stepway control plane on %s:%d (auth %s, backend %s, run store %s)",
        config.host,
        config.port,
        config.settings.auth_mode,
        config.backend.kind,
        config.data.run_store.redacted(),
    )
    settle_heap(config.gc_tuning)
    try:
        _Server(server_config(config, plane.app)).run()
    finally:
        plane.close()
        if tracer_provider is not None:
            tracer_provider.shutdown()  # exports the spans still batched
