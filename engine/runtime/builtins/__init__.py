"""The built-in steps that run inside the engine as durabletask activities.

Each task type is a plain function ``fn(deps: ActivityDeps, task_input: dict) ->
ActivityResult`` whose ``task_input`` is the task's resolved ``inputParameters`` (plus the
optional reserved key ``_payloadKeyPrefix``). None of them raises for an outcome of the
call (a payload store outage is not one: it is raised); see
:mod:`engine.runtime.builtins.results` for the envelope, and each module for its input
and output shapes.

* ``HTTP`` -> :func:`~engine.runtime.builtins.http.http_activity`
* ``CALL_TOOL`` -> :func:`~engine.runtime.builtins.call_tool.call_tool_activity`
* ``LOGIC_APP`` -> :func:`~engine.runtime.builtins.logic_app.logic_app_activity`, polled with
  :func:`~engine.runtime.builtins.logic_app.logic_app_poll`
* ``DOCUMENT_INTELLIGENCE`` ->
  :func:`~engine.runtime.builtins.document_intelligence.document_intelligence_activity`, polled
  with :func:`~engine.runtime.builtins.document_intelligence.document_intelligence_poll`
* ``INLINE`` -> :func:`~engine.runtime.builtins.evaluate.inline_activity`,
  ``LAMBDA`` -> :func:`~engine.runtime.builtins.evaluate.lambda_activity`,
  ``JSON_JQ_TRANSFORM`` -> :func:`~engine.runtime.builtins.evaluate.jq_activity` (in
  ``ActivityDeps.evaluators``)

A result with status ``PENDING`` carries ``pending``: wait ``pending.retry_after_seconds``
on a durable timer, then call ``POLL_ACTIVITIES[task_type](deps, pending.poll_input())``;
repeat until the status is not PENDING.
"""

from __future__ import annotations

from typing import Any

from engine.runtime.builtins.call_tool import call_tool_activity
from engine.runtime.builtins.document_intelligence import (
    document_intelligence_activity,
    document_intelligence_poll,
)
from engine.runtime.builtins.evaluate import inline_activity, jq_activity, lambda_activity
from engine.runtime.builtins.http import http_activity
from engine.runtime.builtins.logic_app import logic_app_activity, logic_app_poll
from engine.runtime.builtins.results import (
    Activity,
    ActivityDeps,
    ActivityResult,
    OutboundSettings,
    PendingPoll,
    TokenProvider,
    azure_credential,
    azure_token_provider,
    token_provider_from_credential,
)

#: Task type -> the function that runs it.
ACTIVITIES: dict[str, Activity] = {
    "HTTP": http_activity,
    "CALL_TOOL": call_tool_activity,
    "LOGIC_APP": logic_app_activity,
    "DOCUMENT_INTELLIGENCE": document_intelligence_activity,
    "INLINE": inline_activity,
    "JSON_JQ_TRANSFORM": jq_activity,
    "LAMBDA": lambda_activity,
}

#: Task type -> the function that polls a PENDING result of it.
POLL_ACTIVITIES: dict[str, Activity] = {
    "LOGIC_APP": logic_app_poll,
    "DOCUMENT_INTELLIGENCE": document_intelligence_poll,
}


def run_activity(deps: ActivityDeps, task_type: str, task_input: dict[str, Any]) -> ActivityResult:
    """Run the built-in activity of ``task_type``; an unknown type is a terminal failure."""
    fn = ACTIVITIES.get(task_type.upper())
    if fn is None:
        return ActivityResult.terminal(f"{task_type!r} is not a built-in activity type")
    return fn(deps, task_input)


def run_poll(deps: ActivityDeps, task_type: str, poll_input: dict[str, Any]) -> ActivityResult:
    """Poll a PENDING result of ``task_type`` (``poll_input`` = ``pending.poll_input()``)."""
    fn = POLL_ACTIVITIES.get(task_type.upper())
    if fn is None:
        return ActivityResult.terminal(f"{task_type!r} has no poll activity")
    return fn(deps, poll_input)


__all__ = [
    "ACTIVITIES",
    "POLL_ACTIVITIES",
    "Activity",
    "ActivityDeps",
    "ActivityResult",
    "OutboundSettings",
    "PendingPoll",
    "TokenProvider",
    "azure_credential",
    "azure_token_provider",
    "call_tool_activity",
    "document_intelligence_activity",
    "document_intelligence_poll",
    "http_activity",
    "inline_activity",
    "jq_activity",
    "logic_app_activity",
    "logic_app_poll",
    "run_activity",
    "run_poll",
    "token_provider_from_credential",
]
