"""LOGIC_APP: run an Azure Logic Apps workflow through its HTTP request trigger.

Start, :func:`logic_app_activity`, input (the task's resolved ``inputParameters``)::

    {"url": "https://prod-00.westeurope.logic.azure.com/workflows/.../triggers/manual/
             paths/invoke?api-version=...&sig=...",     # or "triggerUrl"
     "method": "POST",                                  # optional, default POST
     "body": {...}, "headers": {...},
     "auth": {"type": "managed_identity", "scope": "https://logic.azure.com/.default"}}

``auth`` is only for triggers protected by an Entra ID authorization policy; a trigger
URL with a SAS signature needs none. The trigger URL is never echoed into reasons or
outputs (its query holds the signature).

Outcomes of the trigger call:

* 2xx other than 202-with-``Location`` (a synchronous ``Response`` action, or a 202 with no
  ``Location`` from a workflow without one): COMPLETED, output
  ``{"response": {statusCode, reasonPhrase, headers, body}}`` - the HTTP task's shape, the
  body offloaded the same way when large.
* 202 Accepted with ``Location`` (the asynchronous response pattern): status ``PENDING``
  with ``pending = PendingPoll(location, retry_after_seconds)`` (``Retry-After``, default
  ``deps.logic_app_default_poll_seconds``). The orchestration waits on a durable timer and
  calls :func:`logic_app_poll` with ``pending.poll_input()``
  (``{"location": ..., "auth"?: ...}``). Nothing here sleeps.
* Any other status: the HTTP task's mapping.

Poll, :func:`logic_app_poll`: ``GET location``; 202 -> PENDING again (a new ``Location``
replaces the old one; ``Retry-After`` honoured, default 5 s); other 2xx -> COMPLETED with
the response as above; failures as for HTTP. The ``auth`` setting is carried into the
poll only when the location has the trigger URL's origin, so a token never follows a
location to another host. The orchestration owns the overall deadline of the polling
(the task's timeout), not these functions.
"""

from __future__ import annotations

from typing import Any

import httpx

from engine.runtime.builtins.http import (
    METHODS,
    InputError,
    bearer_token,
    encode_body,
    response_output,
    string_headers,
)
from engine.runtime.builtins.outbound import (
    OutboundError,
    OutboundResponse,
    parse_retry_after,
    result_for_response,
    send,
)
from engine.runtime.builtins.results import (
    ActivityDeps,
    ActivityResult,
    PendingPoll,
    carried_state,
    never_raises,
)


def _same_origin(a: str, b: str) -> bool:
    ua, ub = httpx.URL(a), httpx.URL(b)
    return (ua.scheme, ua.raw_host.lower(), ua.port) == (ub.scheme, ub.raw_host.lower(), ub.port)


def _outcome(
    deps: ActivityDeps,
    task_input: dict[str, Any],
    response: OutboundResponse,
    method: str,
    auth: Any,
    *,
    polled_location: str | None = None,
) -> ActivityResult:
    """``polled_location``: set when ``response`` answers a poll; a 202 there always means
    "still running" and keeps polling the same location unless a new one is given."""
    location = response.header("location") or polled_location
    if response.status_code == 202 and location:
        try:
            absolute = str(httpx.URL(response.url).join(location))
        except httpx.InvalidURL:
            return ActivityResult.terminal("Logic App answered 202 with an invalid Location")
        retry_after = parse_retry_after(response.header("retry-after"))
        if retry_after is None:
            retry_after = deps.logic_app_default_poll_seconds
        state: dict[str, Any] = carried_state(task_input)
        if auth is not None and _same_origin(absolute, response.url):
            state["auth"] = auth
        return ActivityResult.pending_poll(PendingPoll(absolute, retry_after, state))
    output = {"response": response_output(deps, task_input, response)}
    return result_for_response(response, method, output)


@never_raises
def logic_app_activity(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    """Call the Logic App's request trigger (see the module docstring)."""
    try:
        url = task_input.get("url") or task_input.get("triggerUrl")
        if not isinstance(url, str) or not url:
            raise InputError("url (or triggerUrl) is required")
        method = str(task_input.get("method") or "POST").upper()
        if method not in METHODS:
            raise InputError(f"unsupported HTTP method {method!r}")
        headers = string_headers(task_input.get("headers"))
        lower = {k.lower() for k in headers}
        content_type = next(
            (v for k, v in headers.items() if k.lower() == "content-type"), "application/json"
        )
        content = encode_body(task_input.get("body"), content_type)
        if content is not None and "content-type" not in lower:
            headers["Content-Type"] = content_type
        if "accept" not in lower:
            headers["Accept"] = "application/json"
        auth = task_input.get("auth")
        response = send(
            deps.outbound,
            method,
            url,
            headers=headers,
            content=content,
            authorization=bearer_token(deps, auth, url),
            clients=deps.http_clients,
        )
        return _outcome(deps, task_input, response, method, auth)
    except InputError as exc:
        return ActivityResult.terminal(f"invalid LOGIC_APP input: {exc}")
    except OutboundError as exc:
        return exc.to_result()


@never_raises
def logic_app_poll(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    """One poll of an asynchronous Logic App run: ``{"location": ..., "auth"?: ...}``."""
    try:
        location = task_input.get("location")
        if not isinstance(location, str) or not location:
            raise InputError("location is required")
        auth = task_input.get("auth")
        response = send(
            deps.outbound,
            "GET",
            location,
            headers={"Accept": "application/json"},
            authorization=bearer_token(deps, auth, location),
            clients=deps.http_clients,
        )
        return _outcome(deps, task_input, response, "GET", auth, polled_location=location)
    except InputError as exc:
        return ActivityResult.terminal(f"invalid LOGIC_APP poll input: {exc}")
    except OutboundError as exc:
        return exc.to_result()
