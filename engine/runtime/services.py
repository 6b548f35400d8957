"""The services an engine process hands to the interpreter and its activities.

An engine process (``stepway dev``, the orchestrator app, the activity app) builds one
:class:`EngineServices` at start (``engine.app.host.build_local_services`` or
``engine.app.azure_services.build_services``) and passes it to
:func:`engine.runtime.registry.orchestrators` and :func:`~engine.runtime.registry.activities`,
which bind the orchestration and the activities to it. Nothing reads a process-global.
Orchestration code uses only the definition cache (a read-through cache of immutable
snapshots, so replays are deterministic); activities use the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import NoOpTracerProvider, TracerProvider

from engine.language.scripting import ScriptMemo
from engine.ports.payload_store import PayloadLimits, PayloadStore
from engine.ports.queue import TaskQueue
from engine.ports.queue_provisioning import QueueProvisioner
from engine.ports.run_store import RunStore
from engine.runtime.builtins import ActivityDeps
from engine.runtime.deferred_sweep import DEFAULT_GRACE_MS, DeferredSweep, SweepThread
from engine.runtime.definition_cache import DefinitionCache
from engine.runtime.evaluators import ScriptsInProcesses
from engine.runtime.payload_cache import PayloadCache
from engine.runtime.run_limits import RunLimits

__all__ = ["EngineServices"]


@dataclass
class EngineServices:
    run_store: RunStore
    queue: TaskQueue
    payloads: PayloadStore | None
    payload_limits: PayloadLimits
    #: builds a durable client (used by activities that start or signal other runs)
    client_factory: Callable[[], Any]
    #: settings of the built-in activities (HTTP, CALL_TOOL, ...)
    activity_deps: ActivityDeps = field(default_factory=ActivityDeps)
    #: a type with no poll in this many ms gets a warning when work is queued for it
    no_worker_warning_ms: int = 10_000
    #: where the activities' spans go (engine.app.telemetry); the default records none
    tracer_provider: TracerProvider = field(default_factory=NoOpTracerProvider)
    #: limits of one run (the Deciders' and the interpreter's)
    run_limits: RunLimits = field(default_factory=RunLimits)
    #: creates a task type's queues on first use (a type without a registered task
    #: definition, or a domain only a start request names); None: queues must exist
    provisioner: QueueProvisioner | None = None
    #: offloaded payloads and definition snapshots, read once per process
    payload_cache: PayloadCache = field(init=False)
    definitions: DefinitionCache = field(init=False)
    _client: Any = field(default=None, init=False, repr=False)
    #: the sweep of deferred messages this process runs (``start_sweep``)
    _sweep: SweepThread | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.payload_cache = PayloadCache(self.payloads)
        self.definitions = DefinitionCache(
            self.run_store,
            self.payload_cache,
            limits=self.run_limits,
            # values computed in a run are bounded by the inline threshold
            max_value_bytes=self.payload_limits.task_input_threshold
            if self.payloads is not None
            else None,
            # SWITCH and DO_WHILE scripts run in the evaluator processes when there are
            # any: only a process can be ended from outside (engine/runtime/evaluators)
            scripts=ScriptMemo(runner=ScriptsInProcesses(pool))
            if (pool := self.activity_deps.evaluators) is not None
            else ScriptMemo(),
        )

    def client(self) -> Any:
        """The durable client of this process (built on first use)."""
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    def start_sweep(self, interval_seconds: float, *, grace_ms: int = DEFAULT_GRACE_MS) -> None:
        """Settle the deferred messages of attempts that are over and that no one settled
        (engine/runtime/deferred_sweep.py), at once and then every ``interval_seconds``,
        until :meth:`close`; ``0`` runs none. For a process that holds the queue (the
        engine's activities, ``stepway dev``); once per services."""
        if interval_seconds <= 0 or self._sweep is not None:
            return
        sweep = DeferredSweep(self.run_store, self.queue, grace_ms=grace_ms)
        self._sweep = SweepThread(sweep, interval_seconds)
        self._sweep.start()

    @property
    def sweeping(self) -> bool:
        """Whether the sweep of deferred messages runs (``start_sweep``)."""
        return self._sweep is not None and self._sweep.running

    def close(self) -> None:
        """End what these services started: the sweep of deferred messages, the
        evaluator processes."""
        if self._sweep is not None:
            self._sweep.stop()
        if self.activity_deps.evaluators is not None:
            self.activity_deps.evaluators.close()
