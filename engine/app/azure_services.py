"""Adapters chosen by configuration: the :class:`~engine.runtime.services.EngineServices` of a
deployed engine process, and the data adapters the control plane shares with it.

:func:`build_services` picks, per :class:`~engine.app.config.DataConfig`:

* run store: :class:`SqlRunStore` on SQLite, or on PostgreSQL; with Entra auth a
  SQLAlchemy ``do_connect`` hook sets an access token for
  :data:`~engine.app.config.POSTGRES_TOKEN_SCOPE` as the password of every new connection
  (azure-identity caches the token and renews it before it expires, so a pool that opens
  connections hours apart always logs in with a valid one);
* queue: :class:`SqliteTaskQueue` or :class:`ServiceBusTaskQueue`;
* payload store: :class:`LocalPayloadStore` or :class:`BlobPayloadStore` (its client's
  retries and timeouts are ``DataConfig.blob_client``, not the Azure SDK's defaults);
* :class:`ActivityDeps` with a token provider over the same Azure credential.

One credential (the user-assigned managed identity of ``AZURE_CLIENT_ID`` in Azure,
``DefaultAzureCredential`` elsewhere) serves every Azure client of the process. Nothing
here connects anywhere: the Azure SDK clients and SQLAlchemy connect on first use, except
that the run store applies its migrations at construction unless
``STEPWAY_RUN_STORE_MIGRATE=false``.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn, cast

import sqlalchemy as sa
from azure.core.credentials import AzureNamedKeyCredential, TokenCredential
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential
from opentelemetry.trace import NoOpTracerProvider, TracerProvider

from engine.adapters.backend.connect import make_client
from engine.adapters.payload_blob import BlobPayloadStore
from engine.adapters.payload_local import LocalPayloadStore
from engine.adapters.queue_servicebus import ServiceBusTaskQueue
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_store_sql import SqlRunStore, upgrade_to_head
from engine.app.config import POSTGRES_TOKEN_SCOPE, DataConfig, EngineConfig, RunStoreConfig
from engine.ports.payload_store import PayloadStore
from engine.ports.queue import TaskQueue
from engine.runtime.builtins import ActivityDeps, token_provider_from_credential
from engine.runtime.evaluators import EvaluatorPool
from engine.runtime.services import EngineServices

__all__ = [
    "NoQueue",
    "build_credential",
    "build_payload_store",
    "build_queue",
    "build_run_store",
    "build_services",
    "install_entra_password",
    "telemetry_credential",
]

log = logging.getLogger(__name__)


def build_credential(data: DataConfig) -> TokenCredential:
    """The Azure credential of the process (constructing it does no I/O)."""
    if data.credential == "managed_identity":
        if data.managed_identity_client_id:
            return ManagedIdentityCredential(client_id=data.managed_identity_client_id)
        return ManagedIdentityCredential()
    return DefaultAzureCredential()


def telemetry_credential(data: DataConfig, credential: TokenCredential) -> TokenCredential | None:
    """The credential the Application Insights exporter sends tokens with: the process's
    managed identity (in Azure, where the component accepts Entra tokens only); None
    elsewhere (the connection string's key alone, for a component with local auth on)."""
    return credential if data.credential == "managed_identity" else None


def install_entra_password(engine: sa.Engine, credential: TokenCredential) -> None:
    """Every new DBAPI connection of ``engine`` logs in with a fresh (or still valid,
    cached) Entra ID access token as its password."""

    def provide_token(
        dialect: Any, conn_rec: Any, cargs: tuple[Any, ...], cparams: dict[str, Any]
    ) -> None:
        cparams["password"] = credential.get_token(POSTGRES_TOKEN_SCOPE).token

    sa.event.listen(engine, "do_connect", provide_token)


def build_run_store(config: RunStoreConfig, credential: TokenCredential | None) -> SqlRunStore:
    if config.auth == "entra":
        if credential is None:
            raise ValueError("an Entra-authenticated run store needs a credential")
        # Hook the token in before the first connection (the migrations open one).
        store = SqlRunStore(config.url, migrate=False)
        install_entra_password(store.engine, credential)
        if config.migrate:
            upgrade_to_head(store.engine)
        return store
    return SqlRunStore(config.url, migrate=config.migrate)


def build_queue(data: DataConfig, credential: TokenCredential | None) -> TaskQueue | None:
    queue = data.queue
    if queue is None:
        return None
    if queue.kind == "sqlite":
        assert queue.path is not None
        queue.path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteTaskQueue(queue.path)
    assert queue.namespace is not None and credential is not None
    return ServiceBusTaskQueue(queue.namespace, credential)


def build_payload_store(
    data: DataConfig, credential: TokenCredential | AzureNamedKeyCredential | None
) -> PayloadStore | None:
    """The payload store of ``data``: a directory, or a Blob container reached with
    ``credential`` (the process's; an account key only where shared keys are on, as
    with Azurite) and the client settings of ``data.blob_client``."""
    config = data.payload_store
    if config is None:
        return None
    if config.kind == "local":
        assert config.directory is not None
        config.directory.mkdir(parents=True, exist_ok=True)
        return LocalPayloadStore(
            config.directory,
            secret=config.local_secret(),
            base_url=config.public_url,
            limits=data.payload_limits,
        )
    assert config.account_url is not None and config.container is not None
    assert credential is not None
    return BlobPayloadStore(
        config.account_url,
        config.container,
        credential,
        limits=data.payload_limits,
        client=data.blob_client,
    )


class NoQueue:
    """The task queue of an ``orchestrator``-only process: orchestration code never
    queues work (the dispatch activity does), so any use is a wiring bug, said plainly."""

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError(
            f"this engine process has no task queue (role orchestrator); {name!r} must run "
            "in an activities process"
        )


def build_services(
    config: EngineConfig,
    *,
    credential: TokenCredential | None = None,
    tracer_provider: TracerProvider | None = None,
) -> EngineServices:
    """The engine services of ``config`` (see the module docstring). ``credential``
    overrides the one the config selects (tests); ``tracer_provider`` receives the
    activities' spans (engine/app/telemetry.py; None: tracing off)."""
    data = config.data
    if credential is None:
        credential = build_credential(data)
    store = build_run_store(data.run_store, credential)
    queue = build_queue(data, credential)
    payloads = build_payload_store(data, credential)
    deps = ActivityDeps(
        payload_store=payloads,
        payload_threshold_bytes=data.payload_limits.task_output_threshold,
        max_payload_bytes=data.payload_limits.max_size,
        action_service_url=config.action_service_url,
        action_service_scope=config.action_service_scope,
        token_provider=token_provider_from_credential(credential),
        allowed_token_scopes=config.allowed_token_scopes,
        token_hosts=config.token_hosts,
        secrets=config.secrets,
        outbound=config.outbound,
        document_intelligence_endpoint=config.document_intelligence_endpoint,
        document_intelligence_credential=credential
        if config.document_intelligence_endpoint
        else None,
        # every role: INLINE and jq run in them, and SWITCH and DO_WHILE scripts too
        evaluators=EvaluatorPool(config.evaluators),
    )
    backend = config.backend
    log.info(
        "engine services: role=%s backend=%s run store=%s queue=%s payloads=%s",
        config.role,
        backend.kind,
        data.run_store.redacted(),
        type(queue).__name__ if queue is not None else "none",
        type(payloads).__name__ if payloads is not None else "none",
    )
    return EngineServices(
        run_store=store,
        queue=queue if queue is not None else cast(TaskQueue, NoQueue()),
        payloads=payloads,
        payload_limits=data.payload_limits,
        client_factory=lambda: make_client(backend),
        activity_deps=deps,
        no_worker_warning_ms=config.no_worker_warning_ms,
        tracer_provider=tracer_provider or NoOpTracerProvider(),
        run_limits=config.run_limits,
    )
