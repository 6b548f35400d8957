"""The process-wide services an engine process hands to the interpreter and its activities.

An engine process (``stepway dev``, the orchestrator app, the activity app) builds one
:class:`EngineServices` at start and installs it with :func:`install`. Orchestration code
uses only the definition cache (a read-through cache, so replays are deterministic as long
as a published ``name``/``version`` is not rewritten while its runs are in flight);
activities use the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.ports.payload_store import PayloadLimits, PayloadStore
from engine.ports.queue import TaskQueue
from engine.ports.run_store import RunStore
from engine.runtime.definition_cache import DefinitionCache


@dataclass
class EngineServices:
    run_store: RunStore
    queue: TaskQueue
    payloads: PayloadStore | None
    payload_limits: PayloadLimits
    definitions: DefinitionCache
    #: builds a durable client (used by activities that start or signal other runs)
    client_factory: Callable[[], Any]
    #: settings of the built-in activities (HTTP, CALL_TOOL, ...)
    activity_deps: Any = None
    #: a type with no poll in this many ms gets a warning when work is queued for it
    no_worker_warning_ms: int = 10_000
    _client: Any = None

    def client(self) -> Any:
        if self._client is None:
            self._client = self.client_factory()
        return self._client


_installed: EngineServices | None = None


def install(services: EngineServices | None) -> None:
    global _installed
    _installed = services


def current() -> EngineServices:
    if _installed is None:
        raise RuntimeError("engine services are not installed in this process")
    return _installed
