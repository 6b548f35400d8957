"""What an engine process hosts: the orchestration and the activities, by name, bound to
the process's services.

An engine role registers a part of these (``engine.adapters.backend.connect.register``):
``orchestrator`` the orchestration, ``activities`` the activities, ``all`` both.
"""

from __future__ import annotations

from typing import Any

from engine.runtime.activities import RunActivities
from engine.runtime.activity_io import (
    ACTIVITY_BUILTIN,
    ACTIVITY_CHECK,
    ACTIVITY_DISPATCH,
    ACTIVITY_FINISH,
    ACTIVITY_POLL,
    ACTIVITY_RECORD,
    ACTIVITY_RESOLVE_CHILD,
)
from engine.runtime.interpreter import make_workflow_interpreter
from engine.runtime.services import EngineServices
from protocol.runs import ORCHESTRATOR_NAME

__all__ = ["activities", "orchestrators"]


def orchestrators(
    services: EngineServices,
    *,
    hosts_activities: bool = False,
    bound: RunActivities | None = None,
) -> dict[str, Any]:
    """The orchestrations by name: the one ``WorkflowInterpreter``. Where the process
    ``hosts_activities`` too (role ``all``), a WORKER task is queued, a step's rows and a
    run's end recorded and a quick built-in step done in the work items that reach them
    (``engine.runtime.interpreter``'s ``LocalDispatch``, ``LocalRecord``, ``LocalFinish``
    and ``LocalBuiltin``); an orchestrator-only process writes nothing and leaves them to
    the dispatch, record, finish and built-in activities.
    ``bound``: the process's activities (:func:`activities`), so that the work done in a
    work item and by an activity share one instance and its caches."""
    if not hosts_activities:
        return {ORCHESTRATOR_NAME: make_workflow_interpreter(services.definitions)}
    local = bound or RunActivities(services)
    return {
        ORCHESTRATOR_NAME: make_workflow_interpreter(
            services.definitions,
            local.finish_here,
            local.dispatch_here,
            local.record_here,
            local.builtin_here,
            local.builtin_result,
        )
    }


def activities(services: EngineServices, bound: RunActivities | None = None) -> dict[str, Any]:
    """The interpreter's activities by name (the methods of ``bound``, if given)."""
    bound = bound or RunActivities(services)
    return {
        ACTIVITY_RECORD: bound.record,
        ACTIVITY_DISPATCH: bound.dispatch,
        ACTIVITY_FINISH: bound.finish,
        ACTIVITY_RESOLVE_CHILD: bound.resolve_child,
        ACTIVITY_BUILTIN: bound.builtin,
        ACTIVITY_POLL: bound.poll,
        ACTIVITY_CHECK: bound.check_task,
    }
