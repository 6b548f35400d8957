"""CALL_TOOL: run a tool of the action service (business rules that exist once;
docs/architecture.md, "The interpreter").

Input (the task's resolved ``inputParameters``)::

    {"tool": "classify_invoice", "input": {...}}

The activity posts ``input`` (default ``{}``) as JSON to
``POST {deps.action_service_url}/tools/{tool}``, with ``Authorization: Bearer <token>``
for ``deps.action_service_scope`` when that is configured. ``tool`` is a name of letters,
digits, ``_``, ``-`` and ``.``.

Output: the tool's JSON result when it is an object; any other JSON value is wrapped as
``{"result": value}``. A result larger than the payload threshold is stored in
the payload store (when one is configured) and the output is
``{"resultRef": "<reference>", "resultSize": n}``; above the maximum payload size the task
fails terminally.

Outcome: the HTTP task's status mapping (2xx completes; 408/429/5xx retryable with
``Retry-After``; other statuses terminal, the output then holding ``{"error": <body>}``);
a 2xx whose body is not JSON is terminal.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.runtime.builtins.http import InputError, bearer_for_scope, decode_body
from engine.runtime.builtins.outbound import (
    OutboundError,
    classify_status,
    result_for_response,
    send,
)
from engine.runtime.builtins.results import (
    ActivityDeps,
    ActivityResult,
    OffloadError,
    never_raises,
    offload,
)
from protocol.limits import JsonTooDeep, loads_limited

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@never_raises
def call_tool_activity(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    """The CALL_TOOL task (see the module docstring)."""
    try:
        tool = task_input.get("tool")
        if not isinstance(tool, str) or not _TOOL_NAME.match(tool) or tool in (".", ".."):
            raise InputError(f"tool must be a tool name ([A-Za-z0-9_.-]), got {tool!r}")
        if not deps.action_service_url:
            raise InputError("the engine has no action service URL configured")
        tool_input = task_input.get("input", {})
        if tool_input is None:
            tool_input = {}
        url = f"{deps.action_service_url.rstrip('/')}/tools/{tool}"
        # the action service's URL and scope are the engine's configuration, not input
        authorization = (
            bearer_for_scope(deps, deps.action_service_scope, url, configured=True)
            if deps.action_service_scope
            else None
        )
        response = send(
            deps.outbound,
            "POST",
            url,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            content=json.dumps(tool_input, separators=(",", ":")).encode("utf-8"),
            authorization=authorization,
            clients=deps.http_clients,
        )
    except InputError as exc:
        return ActivityResult.terminal(f"invalid CALL_TOOL input: {exc}")
    except OutboundError as exc:
        return exc.to_result()

    if classify_status(response.status_code) != "COMPLETED":
        body, _ = decode_body(response)
        return result_for_response(response, "POST", {"tool": tool, "error": body})
    try:
        result = (
            loads_limited(response.content, what="the tool's answer") if response.content else {}
        )
    except JsonTooDeep:
        raise
    except ValueError:
        return ActivityResult.terminal(
            f"tool {tool!r} answered HTTP {response.status_code} with a body that is not JSON "
            f"({response.content_type or 'no content type'})"
        )
    output = result if isinstance(result, dict) else {"result": result}
    try:
        reference = offload(
            deps,
            task_input,
            "tool-result.json",
            f"result of tool {tool!r}",
            response.content,
            "application/json",
        )
    except OffloadError as exc:
        return exc.to_result()
    if reference is not None:
        output = {"resultRef": reference, "resultSize": len(response.content)}
    return ActivityResult.completed(output)
