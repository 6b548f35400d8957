"""Settings and dependencies of the control plane.

``create_app(settings, deps)`` takes everything from here: the control plane never
builds adapters itself, so tests hand it SQLite adapters and a recording
:class:`~engine.ports.run_signals.RunSignals`, ``stepway dev`` the embedded ones, and
the Azure app the Service Bus / PostgreSQL / Blob / DTS ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar

import anyio.to_thread
from opentelemetry.trace import NoOpTracerProvider, TracerProvider
from pydantic import BaseModel, Field

from control_plane.console.config import ConsoleSettings
from engine.ports.payload_store import PayloadStore
from engine.ports.queue import TaskQueue
from engine.ports.queue_provisioning import QueueProvisioner
from engine.ports.run_signals import RunSignals
from engine.ports.run_store import RunStore

AuthMode = Literal["none", "tokens", "entra"]


class Settings(BaseModel):
    """Control plane settings (all have embedded-dev defaults)."""

    auth_mode: AuthMode = "none"
    #: ``tokens`` mode: JSON or YAML file ``{"tokens": [{"token", "name", "roles",
    #: "taskTypes"}]}``
    tokens_file: Path | None = None
    #: ``entra`` mode: tenant, accepted audience(s), issuer (default v2 issuer of the
    #: tenant), JWKS URL (default the tenant's), or a JWKS document (tests, offline).
    entra_tenant_id: str | None = None
    entra_audience: list[str] = Field(default_factory=list)
    entra_issuer: str | None = None
    entra_jwks_url: str | None = None
    entra_jwks: dict[str, Any] | None = None
    #: app role value in the token -> Stepway role (identity when not listed)
    entra_role_map: dict[str, str] = Field(default_factory=dict)
    #: identity client id (``azp``/``appid``) -> task types that worker serves
    entra_worker_task_types: dict[str, list[str]] = Field(default_factory=dict)

    #: the web console (its Entra ID sign-in; see control_plane/console/config.py)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)

    #: task type -> domains declared for it (worker catalog); each gets a queue
    task_domains: dict[str, list[str]] = Field(default_factory=dict)
    #: every WORKER type a workflow uses must have a registered task definition, and a
    #: poll of a type without one is 404 (off: Conductor's rule, a default task definition)
    strict_task_definitions: bool = False
    #: terminate, retry, restart, rerun and skip answer once the run store shows their
    #: effect (Conductor answers after deciding), waiting at most this long; a read of a
    #: run started less than this long ago waits (as long) for its first decision
    settle_seconds: float = 5.0
    #: with local adapters, a start answered once stored whose orchestration the durable
    #: backend refused is tried again after this long, the wait doubling after each
    #: refusal up to ``start_retry_max_seconds``, each run on its own; its run is FAILED
    #: after ``start_max_attempts`` refusals, unless the backend may hold its
    #: orchestration already (control_plane/services/run_starts.py)
    start_retry_first_seconds: float = Field(default=0.5, gt=0)
    start_retry_max_seconds: float = Field(default=30.0, gt=0)
    start_max_attempts: int = Field(default=10, ge=1)

    max_body_bytes: int = 12 * 1024 * 1024
    max_poll_timeout_ms: int = 5000
    max_poll_count: int = 100
    #: how long a message waits after a concurrency or rate limit was hit (for a type
    #: with a rate limit, no longer than its window: TaskHandout._limit_delay)
    limit_requeue_delay_seconds: float = 60.0
    #: lifetime of signed payload URLs handed to workers
    signed_url_seconds: int = 3600
    #: a type with no poll for this long is reported without an active worker
    no_worker_after_ms: int = 10_000
    #: a worker's poll time is written at most this often per (type, domain, worker)
    #: and process (poll data is this much behind at most)
    poll_record_interval_ms: int = 1_000
    #: a read asks the durable backend whether a running run's orchestration ended
    #: outside the interpreter at most this often per run and process (0: every read;
    #: control_plane/services/reconciling.py)
    reconcile_interval_ms: int = Field(default=2_000, ge=0)
    #: task definitions are re-read at most this often per process
    taskdef_cache_seconds: float = 1.0
    #: long polls run in threads; at most this many at once per process
    max_concurrent_polls: int = 128


def epoch_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Deps:
    """The adapters the control plane runs on."""

    run_store: RunStore
    queue: TaskQueue
    provisioner: QueueProvisioner
    payloads: PayloadStore | None
    signals: RunSignals
    #: epoch milliseconds
    clock: Callable[[], int] = epoch_ms
    #: where the API's spans go (engine/app/telemetry.py); the default records none
    tracer_provider: TracerProvider = field(default_factory=NoOpTracerProvider)
    #: the run store, the queue and the payload store are local files (SQLite, a
    #: directory) and the durable backend is the embedded one: their calls take a
    #: fraction of a millisecond and never wait on a network. The API then does a
    #: start, a result and a hand-out of a task that is there on its event loop, and
    #: goes to a thread only to wait, and for a result's event, a round trip to the
    #: backend that a busy backend answers in milliseconds (control_plane/api/tasks.py,
    #: ``call_adapters``).
    #: Off (PostgreSQL, Service Bus, Blob Storage, the Durable Task Scheduler), every
    #: such call runs in a thread.
    local_adapters: bool = False


_P = ParamSpec("_P")
_T = TypeVar("_T")


async def call_adapters(
    deps: Deps, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """``call(*args, **kwargs)``, a call that uses the adapters and never waits for
    long: here on the event loop when they are local (``Deps.local_adapters``: no hop
    to a thread and back), else in a thread of the default pool."""
    if deps.local_adapters:
        return call(*args, **kwargs)
    return await anyio.to_thread.run_sync(lambda: call(*args, **kwargs))
