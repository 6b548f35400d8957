"""DOCUMENT_INTELLIGENCE: analyze a document with Azure AI Document Intelligence.

Split into start and poll, like LOGIC_APP, so that no activity holds a worker thread
while the service works and the orchestration waits on durable timers:

Start, :func:`document_intelligence_activity`, input (the task's ``inputParameters``)::

    {"modelId": "prebuilt-layout",          # or "prebuilt-invoice", a custom model id
     "url": "https://.../doc.pdf",          # the service fetches it, or
     "documentRef": "<payload store reference>",   # the engine reads it and sends the bytes
     "endpoint": "https://<name>.cognitiveservices.azure.com",   # optional, overrides deps
     "pages": "1-3", "locale": "en-US", "features": ["keyValuePairs"],
     "outputContentFormat": "markdown", "queryFields": ["..."]}   # optional, passed through

It calls ``DocumentIntelligenceClient.begin_analyze_document(model_id,
AnalyzeDocumentRequest(url_source=... | bytes_source=...), polling=False)``: the SDK sends
the analyze request and we take the ``Operation-Location`` of its 202 answer (through the
documented ``raw_response_hook`` keyword) and return status ``PENDING`` with
``pending = PendingPoll(operation_location, retry_after_seconds,
{"endpoint": ..., "modelId": ...})``.

Poll, :func:`document_intelligence_poll`, input ``pending.poll_input()`` (``{"location":
..., "endpoint"?: ...}``): one ``GET`` of the operation through the same SDK client
(``client.send_request``, i.e. the SDK pipeline with its authentication policy). While
the operation is ``notStarted``/``running``: PENDING again (``Retry-After``, default
``deps.document_intelligence_default_poll_seconds``). On ``succeeded``: COMPLETED with
output = ``AnalyzeResult(...).as_dict()`` (``{"apiVersion", "modelId", "content",
"pages", ...}``), or, when that JSON is larger than the payload threshold and
a payload store is configured, ``{"resultRef": "<reference>", "resultSize": n}``. On
``failed``: FAILED_WITH_TERMINAL_ERROR with the service's error code and message (FAILED
when the code says the service itself failed, e.g. ``InternalServerError``).

Authentication: ``deps.document_intelligence_credential`` (production: the engine's
managed identity, an azure-identity ``TokenCredential``; ``AzureKeyCredential`` works
too), else a credential over ``deps.token_provider``. Credentials go over https only;
for a loopback endpoint over plain http (tests, local emulators) the activity passes
azure-core's ``enforce_https=False`` request option (read by its
``BearerTokenCredentialPolicy``), and only then. Production uses an https endpoint and
the managed identity, so that option is never set there.

Bounds: the link-local/metadata address check of :mod:`engine.runtime.builtins.outbound` is
applied to the endpoint (and the poll location) before the SDK connects; connect and
read timeouts are passed to the SDK transport; the SDK's own retries and redirects are
off (retries are the Decider's, ``Retry-After`` honoured).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.ai.documentintelligence.models import AnalyzeDocumentRequest, AnalyzeResult
from azure.core.credentials import AccessToken, AzureKeyCredential
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline import PipelineResponse
from azure.core.rest import HttpRequest

from engine.ports.payload_store import PayloadStoreUnavailable
from engine.runtime.builtins.destinations import host_may_receive
from engine.runtime.builtins.http import InputError
from engine.runtime.builtins.outbound import (
    OutboundError,
    check_destination,
    classify_status,
    parse_retry_after,
    redact_url,
)
from engine.runtime.builtins.results import (
    ActivityDeps,
    ActivityResult,
    OffloadError,
    PendingPoll,
    TokenProvider,
    carried_state,
    never_raises,
    offload,
)
from protocol.limits import JsonTooDeep, loads_limited

#: The scope of Azure AI services tokens (what the SDK asks for by default).
COGNITIVE_SERVICES_SCOPE = "https://cognitiveservices.azure.com/.default"

#: Error codes of a failed analyze operation that say the service failed, not the input.
_RETRYABLE_CODES = frozenset(
    {"InternalServerError", "ServiceUnavailable", "Timeout", "TooManyRequests"}
)
_RUNNING = frozenset({"notstarted", "running"})


class _ProviderCredential:
    """An azure-core ``TokenCredential`` over a :data:`TokenProvider` (which caches)."""

    def __init__(self, provider: TokenProvider) -> None:
        self._provider = provider

    def get_token(self, *scopes: str, **_kwargs: Any) -> AccessToken:
        scope = scopes[0] if scopes else COGNITIVE_SERVICES_SCOPE
        # the provider keeps its own cache; a short nominal lifetime makes the SDK ask
        # it again rather than hold a token the provider has already refreshed
        return AccessToken(self._provider(scope), int(time.time()) + 300)


def _credential(deps: ActivityDeps) -> Any:
    if deps.document_intelligence_credential is not None:
        return deps.document_intelligence_credential
    if deps.token_provider is not None:
        return _ProviderCredential(deps.token_provider)
    raise InputError("the engine has no Document Intelligence credential or token provider")


def _check_endpoint(deps: ActivityDeps, url: str, credential: Any) -> dict[str, Any]:
    """Address check; returns the extra request options for the SDK call. An endpoint
    other than the configured one (a task's ``endpoint`` input) receives the engine's
    credential only when its host is allowed for Cognitive Services tokens
    (``token_hosts``)."""
    parsed = httpx.URL(url)
    addresses = check_destination(parsed, deps.outbound)
    configured = deps.document_intelligence_endpoint
    allowed = deps.token_hosts.get(COGNITIVE_SERVICES_SCOPE, ())
    if configured is not None:
        allowed = (*allowed, httpx.URL(configured).host)
    if not host_may_receive(allowed, url):
        raise InputError(
            f"Document Intelligence endpoint {redact_url(url)} is not the configured one and "
            f"its host is not allowed to receive the engine's credential (STEPWAY_TOKEN_HOSTS "
            f"for {COGNITIVE_SERVICES_SCOPE!r}, docs/configuration.md)"
        )
    options: dict[str, Any] = {
        "connection_timeout": deps.outbound.connect_timeout_seconds,
        "read_timeout": deps.outbound.read_timeout_seconds,
    }
    if parsed.scheme != "https":
        if not all(ip.is_loopback for ip in addresses):
            raise InputError(
                f"Document Intelligence endpoint {redact_url(url)} must use https "
                "(credentials are never sent over plain http except to loopback)"
            )
        if not isinstance(credential, AzureKeyCredential):
            # azure-core's per-request switch of the bearer policy's https check; only
            # the bearer policy consumes it (the key policy would pass it on to the
            # transport, which rejects unknown options)
            options["enforce_https"] = False
    return options


def _client(deps: ActivityDeps, endpoint: str, credential: Any) -> DocumentIntelligenceClient:
    kwargs: dict[str, Any] = {
        "retry_total": 0,  # the Decider retries, honouring Retry-After
        "permit_redirects": False,
        "connection_timeout": deps.outbound.connect_timeout_seconds,
        "read_timeout": deps.outbound.read_timeout_seconds,
    }
    if deps.document_intelligence_api_version:
        kwargs["api_version"] = deps.document_intelligence_api_version
    return DocumentIntelligenceClient(endpoint, credential, **kwargs)


def _map_azure_error(exc: AzureError, what: str) -> ActivityResult:
    if isinstance(exc, HttpResponseError) and exc.status_code is not None:
        code = getattr(getattr(exc, "error", None), "code", None)
        detail = f" ({code})" if code else ""
        message = (exc.message or "").splitlines()[0] if exc.message else ""
        reason = f"{what}: HTTP {exc.status_code}{detail} {message}".rstrip()
        status = classify_status(exc.status_code)
        if status == "FAILED":
            retry_after = None
            response_headers = getattr(exc.response, "headers", None)
            if response_headers is not None:
                retry_after = parse_retry_after(response_headers.get("Retry-After"))
            return ActivityResult.failed(reason, retry_after_seconds=retry_after)
        return ActivityResult.terminal(reason)
    if isinstance(exc, ClientAuthenticationError):
        return ActivityResult.failed(f"{what}: could not authenticate: {exc.message}")
    if isinstance(exc, ServiceRequestError):
        return ActivityResult.failed(f"{what}: connection failed: {exc.message}")
    if isinstance(exc, ServiceResponseError):
        return ActivityResult.failed(f"{what}: no complete response (timeout?): {exc.message}")
    return ActivityResult.failed(f"{what}: {type(exc).__name__}: {exc.message}")


def _str_list(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InputError(f"{name} must be a list of strings")


@never_raises
def document_intelligence_activity(
    deps: ActivityDeps, task_input: dict[str, Any]
) -> ActivityResult:
    """Start an analysis (see the module docstring)."""
    try:
        model_id = task_input.get("modelId")
        if not isinstance(model_id, str) or not model_id:
            raise InputError("modelId is required (e.g. 'prebuilt-layout')")
        endpoint = task_input.get("endpoint") or deps.document_intelligence_endpoint
        if not isinstance(endpoint, str) or not endpoint:
            raise InputError("no Document Intelligence endpoint (set endpoint or configure one)")
        endpoint = endpoint.rstrip("/")
        url, ref = task_input.get("url"), task_input.get("documentRef")
        if bool(url) == bool(ref):
            raise InputError("exactly one of url and documentRef is required")
        if url:
            request = AnalyzeDocumentRequest(url_source=str(url))
        else:
            if deps.payload_store is None:
                raise InputError("documentRef given but the engine has no payload store")
            try:
                data = deps.payload_store.get(str(ref))
            except PayloadStoreUnavailable:
                raise  # an outage: the interpreter runs the activity again
            except Exception as exc:
                return ActivityResult.failed(
                    f"could not read documentRef from the payload store: "
                    f"{type(exc).__name__}: {exc}"
                )
            request = AnalyzeDocumentRequest(bytes_source=data)
        credential = _credential(deps)
        options = _check_endpoint(deps, endpoint, credential)
        extra: dict[str, Any] = {}
        for key, arg in (("pages", "pages"), ("locale", "locale")):
            if task_input.get(key) is not None:
                extra[arg] = str(task_input[key])
        if task_input.get("outputContentFormat") is not None:
            extra["output_content_format"] = str(task_input["outputContentFormat"])
        features = _str_list(task_input.get("features"), "features")
        if features:
            extra["features"] = features
        query_fields = _str_list(task_input.get("queryFields"), "queryFields")
        if query_fields:
            extra["query_fields"] = query_fields

        seen: dict[str, str | None] = {}

        def hook(response: PipelineResponse[Any, Any]) -> None:
            headers = response.http_response.headers
            seen["location"] = headers.get("Operation-Location")
            seen["retry_after"] = headers.get("Retry-After")

        with _client(deps, endpoint, credential) as client:
            client.begin_analyze_document(
                model_id, request, polling=False, raw_response_hook=hook, **extra, **options
            )
    except InputError as exc:
        return ActivityResult.terminal(f"invalid DOCUMENT_INTELLIGENCE input: {exc}")
    except OutboundError as exc:
        return exc.to_result()
    except AzureError as exc:
        return _map_azure_error(exc, f"analyze with model {model_id!r}")

    location = seen.get("location")
    if not location:
        return ActivityResult.failed("the analyze request was accepted without Operation-Location")
    retry_after = parse_retry_after(seen.get("retry_after"))
    if retry_after is None:
        retry_after = deps.document_intelligence_default_poll_seconds
    return ActivityResult.pending_poll(
        PendingPoll(
            location,
            retry_after,
            {"endpoint": endpoint, "modelId": model_id, **carried_state(task_input)},
        )
    )


@never_raises
def document_intelligence_poll(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
    """One poll of an analyze operation: ``{"location": ..., "endpoint"?: ...}``."""
    try:
        location = task_input.get("location")
        if not isinstance(location, str) or not location:
            raise InputError("location is required")
        loc = httpx.URL(location)
        origin = f"{loc.scheme}://{loc.netloc.decode('ascii')}"
        endpoint = task_input.get("endpoint") or deps.document_intelligence_endpoint or origin
        endpoint = str(endpoint).rstrip("/")
        ep = httpx.URL(endpoint)
        if (ep.scheme, ep.raw_host.lower(), ep.port) != (
            loc.scheme,
            loc.raw_host.lower(),
            loc.port,
        ):
            raise InputError(
                f"operation location {redact_url(location)} is not on the endpoint "
                f"{redact_url(endpoint)}"
            )
        credential = _credential(deps)
        options = _check_endpoint(deps, location, credential)
        with _client(deps, endpoint, credential) as client:
            response = client.send_request(HttpRequest("GET", location), **options)
            status_code = response.status_code
            headers = dict(response.headers)
            content = response.read()
    except InputError as exc:
        return ActivityResult.terminal(f"invalid DOCUMENT_INTELLIGENCE poll input: {exc}")
    except OutboundError as exc:
        return exc.to_result()
    except AzureError as exc:
        return _map_azure_error(exc, "poll of the analyze operation")

    lowered = {k.lower(): v for k, v in headers.items()}
    retry_after = parse_retry_after(lowered.get("retry-after"))
    what = f"analyze operation {redact_url(location)}"
    status = classify_status(status_code)
    if status != "COMPLETED":
        reason = f"{what}: HTTP {status_code} {_error_text(content)}".rstrip()
        if status == "FAILED":
            return ActivityResult.failed(reason, retry_after_seconds=retry_after)
        return ActivityResult.terminal(reason)
    try:
        body = loads_limited(content, what=f"{what}: the answer")
    except JsonTooDeep:
        raise
    except ValueError:
        return ActivityResult.failed(f"{what}: answer is not JSON")
    if not isinstance(body, dict):
        return ActivityResult.failed(f"{what}: answer is not a JSON object")
    op_status = str(body.get("status", "")).lower()
    if op_status in _RUNNING:
        if retry_after is None:
            retry_after = deps.document_intelligence_default_poll_seconds
        return ActivityResult.pending_poll(
            PendingPoll(
                location,
                retry_after,
                {"endpoint": endpoint, **carried_state(task_input)},
            )
        )
    if op_status == "succeeded":
        result = AnalyzeResult(body.get("analyzeResult") or {}).as_dict()
        return _completed(deps, task_input, result)
    raw_error = body.get("error")
    error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
    code = str(error.get("code") or op_status or "unknown")
    message = str(error.get("message") or "")
    inner = error.get("innererror") if isinstance(error.get("innererror"), dict) else None
    if inner and inner.get("message"):
        message = f"{message} ({inner.get('code')}: {inner.get('message')})"
    reason = f"{what} {op_status or 'ended'}: {code}: {message}".rstrip(": ")
    if code in _RETRYABLE_CODES:
        return ActivityResult.failed(reason, retry_after_seconds=retry_after)
    return ActivityResult.terminal(reason, output={"error": error} if error else None)


def _error_text(content: bytes) -> str:
    try:
        body = json.loads(content)
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return f"{error.get('code', '')}: {error.get('message', '')}".strip(": ")
    return ""


def _completed(
    deps: ActivityDeps, task_input: dict[str, Any], result: dict[str, Any]
) -> ActivityResult:
    data = json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    try:
        reference = offload(
            deps, task_input, "analyze-result.json", "analyze result", data, "application/json"
        )
    except OffloadError as exc:
        return exc.to_result()
    if reference is None:
        return ActivityResult.completed(result)
    return ActivityResult.completed({"resultRef": reference, "resultSize": len(data)})
