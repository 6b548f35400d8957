"""Settings, dependencies and the run-signal interface of the control plane.

``create_app(settings, deps)`` takes everything from here: the control plane never
builds adapters itself, so tests hand it SQLite adapters and a recording
:class:`RunSignals`, ``stepway dev`` the embedded ones, and the Azure app the
Service Bus / PostgreSQL / Blob / DTS ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from engine.ports.payload_store import PayloadStore
from engine.ports.queue import TaskQueue
from engine.ports.queue_provisioning import QueueProvisioner
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

    #: task type -> domains declared for it (worker catalog); each gets a queue
    task_domains: dict[str, list[str]] = Field(default_factory=dict)

    max_body_bytes: int = 12 * 1024 * 1024
    max_poll_timeout_ms: int = 5000
    max_poll_count: int = 100
    #: how long a message waits after a concurrency or rate limit was hit
    limit_requeue_delay_seconds: float = 60.0
    #: lifetime of signed payload URLs handed to workers
    signed_url_seconds: int = 3600
    #: a type with no poll for this long is reported without an active worker
    no_worker_after_ms: int = 10_000
    #: task definitions are re-read at most this often per process
    taskdef_cache_seconds: float = 1.0
    #: long polls run in threads; at most this many at once per process
    max_concurrent_polls: int = 128


def epoch_ms() -> int:
    return int(time.time() * 1000)


@runtime_checkable
class RunSignals(Protocol):
    """What the control plane asks of the durable backend."""

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None: ...

    def start_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        """Start (or, for a finished instance, start again) the interpreter for
        ``workflow_id`` with ``run_input`` (a ``RunInput`` in camelCase)."""
        ...

    def suspend(self, workflow_id: str, reason: str | None = None) -> None: ...

    def resume(self, workflow_id: str, reason: str | None = None) -> None: ...

    def ended_outside(self, workflow_id: str) -> str | None:
        """If the run's orchestration has ended (failed or terminated by the backend,
        not by the interpreter, which records its own end) the reason, else None."""
        ...


class DurableRunSignals:
    """:class:`RunSignals` over a durabletask client (``TaskHubGrpcClient`` or the
    Azure-managed one)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None:
        self._client.raise_orchestration_event(workflow_id, event_name, data=data)

    def start_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        from engine.interpreter import ORCHESTRATOR_NAME

        kwargs: dict[str, Any] = {}
        try:  # replace a finished instance of the same id (restart/retry)
            from durabletask.internal import orchestrator_service_pb2 as pb

            kwargs["reuse_id_policy"] = pb.OrchestrationIdReusePolicy(
                replaceableStatus=[
                    pb.ORCHESTRATION_STATUS_COMPLETED,
                    pb.ORCHESTRATION_STATUS_FAILED,
                    pb.ORCHESTRATION_STATUS_TERMINATED,
                ]
            )
        except (ImportError, AttributeError, TypeError, ValueError):
            kwargs = {}
        self._client.schedule_new_orchestration(
            ORCHESTRATOR_NAME, input=run_input, instance_id=workflow_id, **kwargs
        )

    def suspend(self, workflow_id: str, reason: str | None = None) -> None:
        self._client.suspend_orchestration(workflow_id, reason=reason)

    def resume(self, workflow_id: str, reason: str | None = None) -> None:
        self._client.resume_orchestration(workflow_id, reason=reason)

    def ended_outside(self, workflow_id: str) -> str | None:
        from durabletask.client import OrchestrationStatus

        state = self._client.get_orchestration_state(workflow_id, fetch_payloads=False)
        if state is None:
            return "its orchestration no longer exists in the durable backend"
        status = state.runtime_status
        if status == OrchestrationStatus.FAILED:
            details = state.failure_details
            message = details.message if details is not None else "no details"
            return f"its orchestration failed in the durable backend: {message}"
        if status == OrchestrationStatus.TERMINATED:
            return "its orchestration was terminated in the durable backend"
        return None


@dataclass
class RecordedSignal:
    kind: Literal["event", "start", "suspend", "resume"]
    workflow_id: str
    name: str | None = None
    data: Any = None


@dataclass
class RecordingRunSignals:
    """A :class:`RunSignals` that only records what it was asked (tests, and a
    control plane running without an engine)."""

    calls: list[RecordedSignal] = field(default_factory=list)
    fail_next: Exception | None = None
    #: runs whose orchestration a test declares ended outside the interpreter
    ended: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, signal: RecordedSignal) -> None:
        with self._lock:
            if self.fail_next is not None:
                exc, self.fail_next = self.fail_next, None
                raise exc
            self.calls.append(signal)

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None:
        self._add(RecordedSignal("event", workflow_id, event_name, data))

    def start_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        self._add(RecordedSignal("start", workflow_id, None, run_input))

    def suspend(self, workflow_id: str, reason: str | None = None) -> None:
        self._add(RecordedSignal("suspend", workflow_id, None, reason))

    def resume(self, workflow_id: str, reason: str | None = None) -> None:
        self._add(RecordedSignal("resume", workflow_id, None, reason))

    def ended_outside(self, workflow_id: str) -> str | None:
        return self.ended.get(workflow_id)

    def events(self, name: str | None = None) -> list[RecordedSignal]:
        with self._lock:
            return [c for c in self.calls if c.kind == "event" and (name is None or c.name == name)]


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
