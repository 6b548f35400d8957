"""The queues of the WORKER types a workflow uses, made when they are first needed.

Conductor needs no registration step before a task type is used: a queue exists once
something is queued to it. Stepway's queues (Service Bus) must be created, so the control
plane creates the missing ones when a workflow that uses a type is registered, and when a
start request maps a type to a domain no queue exists for; the engine creates any still
missing on first use (``engine.runtime.activities``).
"""

from __future__ import annotations

from typing import Any

from control_plane.deps import Deps, Settings
from engine.language.definitions import TaskType, WorkflowDef
from engine.ports.queue_provisioning import ensure_queues_exist


def ensure_worker_queues(
    settings: Settings,
    deps: Deps,
    wf: WorkflowDef,
    task_to_domain: dict[str, str] | None = None,
) -> list[str]:
    """Create the missing queues of every WORKER type ``wf`` uses (with the settings of
    its registered or inline task definition, else Conductor's default one), for the
    domains declared for it and the one ``task_to_domain`` maps it to (by type or
    ``*``). Returns the queues created."""
    created: list[str] = []
    seen: set[str] = set()
    mapping = task_to_domain or {}
    for location in wf.walk():
        task = location.task
        if task.type != TaskType.WORKER or task.name in seen:
            continue
        seen.add(task.name)
        domains = list(settings.task_domains.get(task.name, []))
        mapped = mapping.get(task.name) or mapping.get("*")
        if mapped:
            domains.append(mapped)
        registered = deps.run_store.get_task_def(task.name)
        taskdef: Any = registered.definition if registered else task.task_definition
        created += ensure_queues_exist(deps.provisioner, task.name, domains, taskdef)
    return created
