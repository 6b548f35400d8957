"""HTTP: Conductor's ``HTTP`` system task as a built-in activity.

Input (the task's resolved ``inputParameters``), either Conductor's nested form::

    {"http_request": {"uri": "https://...", "method": "POST",
                      "headers": {"X-A": "1"}, "body": {...},
                      "contentType": "application/json", "accept": "application/json",
                      "connectionTimeOut": 5000, "readTimeOut": 30000,
                      "auth": {"type": "managed_identity", "scope": "api://x/.default"}}}

or the flat form with the same keys directly in ``inputParameters``. ``method`` defaults
to GET, ``contentType`` and ``accept`` to ``application/json``; the timeouts are in
milliseconds (Conductor's unit), replace the engine's defaults for this call and are
capped at ``OutboundSettings.max_duration_seconds``. ``body``: a string
is sent as is, a dict with ``contentType: application/x-www-form-urlencoded`` is form
encoded, anything else is sent as JSON. ``auth`` may sit inside ``http_request`` or next
to it; its token goes only to a host ``deps.token_hosts`` binds to its scope.

``${workflow.secrets.NAME}`` in ``uri`` (path or query, not the host), ``headers`` or
``body`` is revealed for the call, only to a host the secret is bound to
(:mod:`engine.runtime.builtins.secrets`), and every value revealed is masked (``***``) in
the output and reason. The engine runs this activity with the payload threshold at the
maximum size (activities.py ``_inline_deps``), so a response echoing a secret is masked
before the engine offloads the output.

Output (Conductor's shape)::

    {"response": {"statusCode": 200, "reasonPhrase": "OK",
                  "headers": {"Content-Type": ["application/json"]},
                  "body": <parsed JSON | text | base64 text>}}

``body`` is parsed JSON when the response is JSON (``application/json``, ``*+json``),
text for textual types, else base64 with ``"bodyEncoding": "base64"`` next to it; an
empty body is ``null``. When the body is larger than the payload threshold
(:func:`engine.runtime.builtins.results.payload_threshold`: ``deps.payload_threshold_bytes``, else
the store's ``limits.task_output_threshold``, else 10 KB) and a payload store is
configured, the raw bytes are stored and the output keeps the reference::

    {"response": {"statusCode": 200, "reasonPhrase": "OK", "headers": {...},
                  "body": null, "bodyRef": "<payload store reference>",
                  "bodySize": 123456, "bodyContentType": "application/json"}}

Outcome: 2xx -> COMPLETED; 408, 429, 5xx -> FAILED (retryable, ``Retry-After`` ->
``retry_after_seconds``, at most 30 days, ignored when infinite or negative); other
statuses -> FAILED_WITH_TERMINAL_ERROR; the output holds the response in every case.
Connection errors and timeouts -> FAILED; a blocked address or a response over the cap
-> FAILED_WITH_TERMINAL_ERROR (see
:mod:`engine.runtime.builtins.outbound`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import urllib.parse
from typing import Any

from engine.language.secret_refs import reveal, secret_names
from engine.runtime.builtins.destinations import host_may_receive
from engine.runtime.builtins.outbound import (
    OutboundError,
    OutboundResponse,
    redact_url,
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
from engine.runtime.builtins.secrets import SecretRefused, mask
from engine.runtime.local_steps import NotHere
from protocol.limits import JsonTooDeep, loads_limited

#: the methods a step done in a work item may call (RFC 9110 9.2.1: safe, so that an
#: activity of another process, which cannot take the call the work item began, may make
#: it again: engine/runtime/local_steps.py)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_HTTP_KEYS = (
    "uri",
    "method",
    "headers",
    "body",
    "contentType",
    "accept",
    "connectionTimeOut",
    "readTimeOut",
    "auth",
)


class InputError(ValueError):
    """The task input is not valid: a terminal failure."""


# -- pieces shared with CALL_TOOL and LOGIC_APP ------------------------------------------


def bearer_token(deps: ActivityDeps, auth: Any, url: str) -> str | None:
    """The ``Authorization`` value for an ``auth`` setting of a call to ``url``, or None
    when there is none.

    Raises :class:`InputError` for an unknown or disallowed setting (a scope not allowed,
    or ``url``'s host not among those that may receive its tokens) and
    :class:`OutboundError` (retryable) when the token cannot be obtained.
    """
    if auth is None:
        return None
    if not isinstance(auth, dict):
        raise InputError("auth must be an object like {'type': 'managed_identity', 'scope': ...}")
    kind = str(auth.get("type", "")).lower()
    if kind != "managed_identity":
        raise InputError(f"unsupported auth type {auth.get('type')!r} (use 'managed_identity')")
    scope = auth.get("scope")
    if not isinstance(scope, str) or not scope:
        raise InputError("auth.scope is required for managed_identity auth")
    return bearer_for_scope(deps, scope, url)


def check_token_destination(deps: ActivityDeps, scope: str, url: str) -> None:
    """Refuse (:class:`InputError`) to send a token for ``scope`` to ``url`` unless its
    host is one ``deps.token_hosts`` names for that scope. The engine's identity can reach
    the run store, queues and payloads; a token for any scope sent wherever a definition's
    input points would hand that reach to whoever chose the URL (a run's input, a worker's
    output)."""
    if not host_may_receive(deps.token_hosts.get(scope, ()), url):
        raise InputError(
            f"a token for scope {scope!r} may not be sent to {redact_url(url)}: its host is "
            "not among the hosts allowed to receive that scope's tokens "
            "(STEPWAY_TOKEN_HOSTS, docs/configuration.md)"
        )


def bearer_for_scope(deps: ActivityDeps, scope: str, url: str, *, configured: bool = False) -> str:
    """``Bearer <token>`` for ``scope``, to be sent to ``url``: checked first, unless
    ``configured`` (the URL and scope are the engine's settings, not a task's input)."""
    if deps.allowed_token_scopes is not None and scope not in deps.allowed_token_scopes:
        raise InputError(f"token scope {scope!r} is not allowed in this engine")
    if not configured:
        check_token_destination(deps, scope, url)
    if deps.token_provider is None:
        raise InputError("managed identity auth requested but the engine has no token provider")
    try:
        token = deps.token_provider(scope)
    except Exception as exc:
        raise OutboundError(
            f"could not get a token for scope {scope!r}: {type(exc).__name__}: {exc}",
            retryable=True,
        ) from exc
    return f"Bearer {token}"


def encode_body(body: Any, content_type: str) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, dict) and "x-www-form-urlencoded" in content_type.lower():
        return urllib.parse.urlencode(
            {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}
        ).encode("ascii")
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_json_type(content_type: str) -> bool:
    media = _media_type(content_type)
    return media in ("application/json", "text/json") or media.endswith("+json")


def is_text_type(content_type: str) -> bool:
    media = _media_type(content_type)
    return (
        media.startswith("text/")
        or media.endswith("+xml")
        or media
        in (
            "",
            "application/xml",
            "application/javascript",
            "application/x-www-form-urlencoded",
            "application/problem+json",
        )
    )


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip('"')
    return "utf-8"


def decode_body(response: OutboundResponse) -> tuple[Any, str | None]:
    """(body, encoding): parsed JSON, text, or base64 text (encoding ``"base64"``)."""
    data = response.content
    if not data:
        return None, None
    ctype = response.content_type
    if is_json_type(ctype) or is_text_type(ctype):
        try:
            text = data.decode(_charset(ctype), errors="replace")
        except LookupError:
            text = data.decode("utf-8", errors="replace")
        if is_json_type(ctype) or not ctype:
            try:
                return loads_limited(text, what="the response body"), None
            except JsonTooDeep:
                raise  # refused (engine.runtime.builtins.run_activity), not read as text
            except ValueError:
                return text, None
        return text, None
    return base64.b64encode(data).decode("ascii"), "base64"


def response_output(
    deps: ActivityDeps, task_input: dict[str, Any], response: OutboundResponse
) -> dict[str, Any]:
    """Conductor's ``response`` object, the body offloaded when it is large."""
    out: dict[str, Any] = {
        "statusCode": response.status_code,
        "reasonPhrase": response.reason_phrase,
        "headers": response.headers_multi(),
    }
    content_type = response.content_type or "application/octet-stream"
    reference = offload(
        deps, task_input, "response-body", "response body", response.content, content_type
    )
    if reference is not None:
        out.update(
            body=None,
            bodyRef=reference,
            bodySize=len(response.content),
            bodyContentType=content_type,
        )
        return out
    body, encoding = decode_body(response)
    out["body"] = body
    if encoding:
        out["bodyEncoding"] = encoding
    return out


def _millis(value: Any, name: str) -> float | None:
    if value is None:
        return None
    try:
        ms = float(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a number of milliseconds, got {value!r}") from exc
    if ms <= 0:
        return None
    return ms / 1000.0


def string_headers(headers: Any, name: str = "headers") -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise InputError(f"{name} must be an object of header names to values")
    out: dict[str, str] = {}
    for key, value in headers.items():
        if value is None:
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        out[str(key)] = value if isinstance(value, str) else json.dumps(value)
    return out


# -- the activity ------------------------------------------------------------------------


def _request_spec(task_input: dict[str, Any]) -> dict[str, Any]:
    nested = task_input.get("http_request")
    if nested is None:
        return {k: task_input[k] for k in _HTTP_KEYS if k in task_input}
    if not isinstance(nested, dict):
        raise InputError("http_request must be an object")
    spec = dict(nested)
    if "auth" not in spec and "auth" in task_input:
        spec["auth"] = task_input["auth"]
    return spec


def _with_secrets(deps: ActivityDeps, spec: dict[str, Any], revealed: set[str]) -> dict[str, Any]:
    """``spec`` with the secret references of its URI, headers and body revealed, each
    checked against the hosts its secret is bound to (engine/runtime/builtins/secrets.py);
    the values revealed are added to ``revealed``."""
    fields = {key: spec.get(key) for key in ("uri", "headers", "body")}
    if not secret_names(fields):
        return spec
    uri = str(spec.get("uri") or "")
    # the host is checked as written: a secret may travel in the path or the query, not
    # choose the host it goes to
    literal = urllib.parse.urlsplit(uri).netloc
    if "${" in literal:
        raise InputError("a secret may not be part of the URI's host")

    def value_of(name: str) -> str:
        try:
            value = deps.secrets.value_for(name, uri)
        except SecretRefused as exc:
            raise InputError(str(exc)) from None
        revealed.add(value)
        return value

    return {**spec, **{key: reveal(spec[key], value_of) for key in fields if key in spec}}


@never_raises
def http_activity(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    """The HTTP task (see the module docstring for input and output)."""
    revealed: set[str] = set()
    result = _http_call(deps, task_input, revealed)
    if not revealed:
        return result
    # nothing the task records holds a revealed value (a service may echo it back)
    return dataclasses.replace(
        result, output=mask(result.output, revealed), reason=mask(result.reason, revealed)
    )


def _http_call(
    deps: ActivityDeps, task_input: dict[str, Any], revealed: set[str]
) -> ActivityResult:
    try:
        spec = _request_spec(task_input)
        if not isinstance(spec.get("uri"), str) or not spec.get("uri"):
            raise InputError("http_request.uri is required")
        spec = _with_secrets(deps, spec, revealed)
        uri = spec["uri"]
        method = str(spec.get("method") or "GET").upper()
        if method not in METHODS:
            raise InputError(f"unsupported HTTP method {method!r}")
        if deps.within_seconds is not None and method not in _SAFE_METHODS:
            raise NotHere(f"{method} is not safe to make again")
        content_type = str(spec.get("contentType") or "application/json")
        headers = string_headers(spec.get("headers"))
        lower = {k.lower() for k in headers}
        if "accept" not in lower:
            headers["Accept"] = str(spec.get("accept") or "application/json")
        content = encode_body(spec.get("body"), content_type)
        if content is not None and "content-type" not in lower:
            headers["Content-Type"] = content_type
        connect_timeout = _millis(spec.get("connectionTimeOut"), "connectionTimeOut")
        read_timeout = _millis(spec.get("readTimeOut"), "readTimeOut")
        authorization = bearer_token(deps, spec.get("auth"), uri)
        response = send(
            deps.outbound,
            method,
            uri,
            headers=headers,
            content=content,
            authorization=authorization,
            connect_timeout_seconds=connect_timeout,
            read_timeout_seconds=read_timeout,
            clients=deps.http_clients,
        )
        output = {"response": response_output(deps, task_input, response)}
    except InputError as exc:
        return ActivityResult.terminal(f"invalid HTTP task input: {exc}")
    except (OutboundError, OffloadError) as exc:
        return exc.to_result()
    return result_for_response(response, method, output)
