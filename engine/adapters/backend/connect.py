"""Factories for durabletask workers and clients from a :class:`BackendConfig`, and the
helper that registers only what an engine process's role hosts.

Embedded: plain ``TaskHubGrpcWorker`` / ``TaskHubGrpcClient`` on an insecure channel.
Azure: ``DurableTaskSchedulerWorker`` / ``DurableTaskSchedulerClient`` (subclasses of the
same classes) with an Entra ID credential. Code written against the returned objects
runs unchanged on both.

Their log lines go to the process's loggers ``durabletask-worker`` and
``durabletask-client`` unless another logger is given: durabletask, given none, makes a
logger of its own outside the logging configuration, with a handler printing INFO to
stderr (a line for every run started and every event raised: every worker's result).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

from azure.core.credentials import TokenCredential
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential
from durabletask import task
from durabletask.azuremanaged.client import DurableTaskSchedulerClient
from durabletask.client import TaskHubGrpcClient
from durabletask.grpc_options import GrpcChannelOptions
from durabletask.internal.shared import get_grpc_channel
from durabletask.serialization import DataConverter
from durabletask.worker import ConcurrencyOptions, TaskHubGrpcWorker

from engine.adapters.backend.config import GRPC_MAX_MESSAGE_BYTES, BackendConfig
from engine.adapters.backend.deadlines import DefaultDeadline
from engine.adapters.backend.direct_dispatch import DirectDispatchMixin
from engine.adapters.backend.sessions import (
    DEFAULT_SESSION_CAPACITY,
    SchedulerSessionWorker,
    SessionWorker,
)

#: the loggers durabletask's workers and clients log to
WORKER_LOGGER = "durabletask-worker"
CLIENT_LOGGER = "durabletask-client"

__all__ = [
    "CLIENT_LOGGER",
    "ROLES",
    "WORKER_LOGGER",
    "Role",
    "channel_options",
    "make_client",
    "make_credential",
    "make_worker",
    "register",
    "running",
    "start_worker",
    "stop_worker",
]

Role = Literal["orchestrator", "activities", "all"]
ROLES: tuple[Role, ...] = ("orchestrator", "activities", "all")


def make_credential(config: BackendConfig) -> TokenCredential:
    """The Entra ID credential of an Azure config (constructing it does no I/O)."""
    if config.kind != "azure":
        raise ValueError("only the azure backend uses a credential")
    if config.credential == "managed_identity":
        if config.managed_identity_client_id:
            return ManagedIdentityCredential(client_id=config.managed_identity_client_id)
        return ManagedIdentityCredential()
    return DefaultAzureCredential()


class EmbeddedWorker(DirectDispatchMixin, SessionWorker):
    """The embedded backend's worker: sessions, and work items run as the stream
    delivers them (direct_dispatch.py)."""


def channel_options(config: BackendConfig) -> GrpcChannelOptions:
    """gRPC limits of Stepway's clients and workers: with the embedded backend the same
    send and receive limit as its server; with the Durable Task Scheduler the receive
    limit only (the scheduler enforces what it accepts)."""
    if config.kind == "embedded":
        return GrpcChannelOptions(
            max_receive_message_length=GRPC_MAX_MESSAGE_BYTES,
            max_send_message_length=GRPC_MAX_MESSAGE_BYTES,
        )
    return GrpcChannelOptions(max_receive_message_length=GRPC_MAX_MESSAGE_BYTES)


def _azure_target(config: BackendConfig) -> tuple[str, str]:
    assert config.endpoint is not None and config.task_hub is not None  # validated
    return config.endpoint, config.task_hub


def make_worker(
    config: BackendConfig,
    *,
    concurrency_options: ConcurrencyOptions | None = None,
    credential: TokenCredential | None = None,
    logger: logging.Logger | None = None,
    data_converter: DataConverter | None = None,
    session_capacity: int = DEFAULT_SESSION_CAPACITY,
) -> TaskHubGrpcWorker:
    """A worker (not started) for the configured backend. ``credential`` overrides the
    one the config selects (Azure only); ``data_converter`` encodes and decodes the
    payloads (default: durabletask's JSON); ``session_capacity`` is how many live
    orchestrations it keeps between their work items (sessions.py; 0: replay every
    work item in full)."""
    logger = logger or logging.getLogger(WORKER_LOGGER)
    if config.kind == "embedded":
        # the worker's own channel, so that work items can skip durabletask's asyncio
        # hand-offs (direct_dispatch.py); closed by the worker's stop()
        options = channel_options(config)
        return EmbeddedWorker(
            host_address=config.address,
            channel=get_grpc_channel(config.address, False, None, options),
            concurrency_options=concurrency_options,
            logger=logger,
            channel_options=options,
            data_converter=data_converter,
            session_capacity=session_capacity,
        )
    endpoint, task_hub = _azure_target(config)
    return SchedulerSessionWorker(
        host_address=endpoint,
        taskhub=task_hub,
        token_credential=credential if credential is not None else make_credential(config),
        concurrency_options=concurrency_options,
        logger=logger,
        channel_options=channel_options(config),
        data_converter=data_converter,
        session_capacity=session_capacity,
        # the worker's own calls to the Scheduler (a work item's completion, its
        # abandonment) have a deadline too: one the Scheduler holds frees the worker's
        # thread when it passes, the session is dropped and the Scheduler hands the work
        # item out again (sessions.py). Not on the embedded backend, in the engine's
        # process or beside it, where a deadline would cost every step about 0.1 ms of
        # CPU a call (gRPC's deadline timer; docs/benchmarks.md) against a backend that
        # hangs only with the process
        interceptors=[DefaultDeadline(config.call_timeout_seconds)],
    )


def make_client(
    config: BackendConfig,
    *,
    credential: TokenCredential | None = None,
    logger: logging.Logger | None = None,
) -> TaskHubGrpcClient:
    """A client for the configured backend. ``credential`` overrides the one the config
    selects (Azure only)."""
    logger = logger or logging.getLogger(CLIENT_LOGGER)
    deadline = [DefaultDeadline(config.call_timeout_seconds)]
    if config.kind == "embedded":
        return TaskHubGrpcClient(
            host_address=config.address,
            secure_channel=False,
            logger=logger,
            channel_options=channel_options(config),
            interceptors=deadline,
        )
    endpoint, task_hub = _azure_target(config)
    return DurableTaskSchedulerClient(
        host_address=endpoint,
        taskhub=task_hub,
        token_credential=credential if credential is not None else make_credential(config),
        logger=logger,
        channel_options=channel_options(config),
        interceptors=deadline,
    )


def register(
    worker: TaskHubGrpcWorker,
    role: Role,
    orchestrators: Mapping[str, task.Orchestrator[Any, Any]],
    activities: Mapping[str, task.Activity[Any, Any]],
    *,
    filter_work_items: bool = True,
) -> list[str]:
    """Adds to ``worker`` the functions its ``role`` hosts and (by default) opts into work
    item filtering, so the backend hands it only those work items (routing is strict:
    work for a function no connected worker hosts waits). Returns the names added.

    ``orchestrator`` hosts the orchestrations only, ``activities`` the activities only,
    ``all`` both. Keys are the names the work items carry (what the client schedules and
    ``call_activity`` uses); a name may differ from the function's ``__name__``.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {ROLES}")
    added: list[str] = []
    if role in ("orchestrator", "all"):
        for name, orchestrator in orchestrators.items():
            if _function_name(orchestrator) == name:
                worker.add_orchestrator(orchestrator)
            else:
                # No public way to register under another name in durabletask 1.12.
                worker._registry.add_named_orchestrator(name, orchestrator)
            added.append(name)
    if role in ("activities", "all"):
        for name, activity in activities.items():
            if _function_name(activity) == name:
                worker.add_activity(activity)
            else:
                worker._registry.add_named_activity(name, activity)
            added.append(name)
    if filter_work_items:
        # Filters are generated from the registry when the worker starts.
        worker.use_work_item_filters()
    return added


def _function_name(fn: Any) -> str | None:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name != "<lambda>" else None


def start_worker(worker: TaskHubGrpcWorker) -> None:
    """``worker.start()`` (untyped in durabletask 1.12) for mypy-strict callers."""
    worker.start()  # type: ignore[no-untyped-call]


def stop_worker(worker: TaskHubGrpcWorker) -> None:
    """``worker.stop()``: stops taking work and waits for the work items in progress."""
    worker.stop()  # type: ignore[no-untyped-call]


@contextmanager
def running(worker: TaskHubGrpcWorker) -> Iterator[TaskHubGrpcWorker]:
    """Starts ``worker`` for the duration of a ``with`` block."""
    start_worker(worker)
    try:
        yield worker
    finally:
        stop_worker(worker)
