"""The result envelope of the built-in activities and the dependencies they get.

Every built-in activity is a plain function ``fn(deps, task_input) -> ActivityResult``.
It never raises for an outcome of the call: a failed call is a result with status
``FAILED`` (retryable: the Decider applies the task definition's retry policy and may
honour ``retry_after_seconds``) or ``FAILED_WITH_TERMINAL_ERROR`` (no retry). A
long-running call that the orchestration must poll returns status ``PENDING`` with a
:class:`PendingPoll`; the orchestration waits ``pending.retry_after_seconds`` on a durable
timer and calls the type's poll function (:data:`engine.runtime.builtins.POLL_ACTIVITIES`) with
``pending.poll_input()``. A call its task definition's rate limit did not let through
is ``DEFERRED``: the orchestration runs the activity again after
``retry_after_seconds``. No activity sleeps.

One error is not an outcome of the call and is raised: ``PayloadStoreUnavailable``, the
payload store unreachable or overloaded while the activity stores or reads a payload.
The interpreter runs the activity again after a durable delay (as for a run store
outage) instead of failing its task.

Durabletask activities exchange JSON, so the envelope goes over the wire as
``ActivityResult.to_dict()`` and is read back with ``ActivityResult.from_dict()``.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    from engine.runtime.evaluators import EvaluatorPool

from engine.ports.payload_store import PayloadStoreUnavailable
from engine.runtime.builtins.secrets import Secrets
from engine.runtime.local_steps import NotHere
from protocol.limits import JsonTooDeep
from protocol.payload_keys import ACTIVITY_PREFIX_KEY, unowned_activity_prefix

log = logging.getLogger(__name__)

ResultStatus = Literal["COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "PENDING", "DEFERRED"]
_STATUSES: frozenset[str] = frozenset(
    {"COMPLETED", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "PENDING", "DEFERRED"}
)

#: A token provider: scope (e.g. ``"https://management.azure.com/.default"``) -> access token.
TokenProvider = Callable[[str], str]

#: Reserved task-input key: the payload-store key prefix for anything this activity
#: offloads (the interpreter sets it, e.g. ``"<workflowId>/<taskId>/<attempt>"``). When it
#: is missing a random prefix is used. Keys starting with ``_`` are never sent anywhere.
PAYLOAD_KEY_PREFIX = ACTIVITY_PREFIX_KEY

DEFAULT_PAYLOAD_THRESHOLD_BYTES = 10 * 1024
DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024


@runtime_checkable
class PayloadStoreLike(Protocol):
    """The part of :class:`engine.ports.payload_store.PayloadStore` the activities use
    (structural, so any adapter of the port fits; its optional ``limits`` attribute, a
    ``PayloadLimits``, supplies the threshold and maximum when ``ActivityDeps`` does
    not)."""

    def put(self, key: str, data: bytes, content_type: str = ...) -> str: ...

    def get(self, reference: str) -> bytes: ...


@dataclass(frozen=True)
class PendingPoll:
    """A long-running call that is still going: poll ``location`` after a durable timer.

    ``state`` carries whatever else the type's poll function needs (e.g. the endpoint,
    the auth settings); :meth:`poll_input` is the task input of the next poll call.
    """

    location: str
    retry_after_seconds: float
    state: dict[str, Any] = field(default_factory=dict)

    def poll_input(self) -> dict[str, Any]:
        return {**self.state, "location": self.location}

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "retryAfterSeconds": self.retry_after_seconds,
            "state": dict(self.state),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingPoll:
        return cls(
            location=str(data["location"]),
            retry_after_seconds=float(data.get("retryAfterSeconds", 0.0)),
            state=dict(data.get("state") or {}),
        )


@dataclass(frozen=True)
class ActivityResult:
    """The envelope every built-in activity returns (see the module docstring)."""

    status: ResultStatus
    output: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    retry_after_seconds: float | None = None
    pending: PendingPoll | None = None

    # -- constructors ---------------------------------------------------------------
    @classmethod
    def completed(cls, output: dict[str, Any]) -> ActivityResult:
        return cls(status="COMPLETED", output=output)

    @classmethod
    def failed(
        cls,
        reason: str,
        *,
        output: dict[str, Any] | None = None,
        retry_after_seconds: float | None = None,
    ) -> ActivityResult:
        """A retryable failure."""
        return cls(
            status="FAILED",
            output=output or {},
            reason=reason,
            retry_after_seconds=retry_after_seconds,
        )

    @classmethod
    def terminal(cls, reason: str, *, output: dict[str, Any] | None = None) -> ActivityResult:
        """A failure that retrying cannot fix."""
        return cls(status="FAILED_WITH_TERMINAL_ERROR", output=output or {}, reason=reason)

    @classmethod
    def pending_poll(
        cls, pending: PendingPoll, *, output: dict[str, Any] | None = None
    ) -> ActivityResult:
        return cls(
            status="PENDING",
            output=output or {},
            pending=pending,
            retry_after_seconds=pending.retry_after_seconds,
        )

    @classmethod
    def deferred(cls, retry_after_seconds: float) -> ActivityResult:
        """Not made: the task definition's rate limit is used up; the orchestration runs
        the activity again after ``retry_after_seconds`` (a durable timer), as Conductor
        postpones a system task past its limit. No attempt is spent."""
        return cls(status="DEFERRED", retry_after_seconds=retry_after_seconds)

    # -- properties -----------------------------------------------------------------
    @property
    def is_success(self) -> bool:
        return self.status == "COMPLETED"

    @property
    def is_retryable(self) -> bool:
        return self.status == "FAILED"

    @property
    def is_pending(self) -> bool:
        return self.status == "PENDING"

    @property
    def is_deferred(self) -> bool:
        return self.status == "DEFERRED"

    # -- JSON -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "output": self.output,
            "reason": self.reason,
            "retryAfterSeconds": self.retry_after_seconds,
            "pending": self.pending.to_dict() if self.pending else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActivityResult:
        status = data.get("status")
        if status not in _STATUSES:
            raise ValueError(f"not an activity result status: {status!r}")
        retry_after = data.get("retryAfterSeconds")
        pending = data.get("pending")
        return cls(
            status=cast(ResultStatus, status),
            output=dict(data.get("output") or {}),
            reason=data.get("reason"),
            retry_after_seconds=float(retry_after) if retry_after is not None else None,
            pending=PendingPoll.from_dict(pending) if pending else None,
        )


@dataclass(frozen=True)
class OutboundSettings:
    """Bounds of every outbound call (see :mod:`engine.runtime.builtins.outbound`).

    ``max_duration_seconds`` bounds one whole exchange (a slow-drip response cannot hold
    an activity forever); a task's own ``connectionTimeOut``/``readTimeOut`` replace the
    timeouts for its call, capped at ``max_duration_seconds``.
    """

    connect_timeout_seconds: float = 10.0
    read_timeout_seconds: float = 60.0
    max_duration_seconds: float = 300.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_redirects: int = 5
    allow_link_local: bool = False


@dataclass
class ActivityDeps:
    """What the built-in activities need from the engine process.

    * ``payload_store``/``payload_threshold_bytes``/``max_payload_bytes``: response bodies
      and outputs above the threshold go to the store and the output keeps the reference;
      above the maximum the task fails terminally. ``None`` takes the value from the
      store's ``limits`` (``task_output_threshold``, ``max_size``), else 10 KB / 10 MB.
      Without a store everything stays inline.
    * ``action_service_url``/``action_service_scope``: CALL_TOOL posts to
      ``{action_service_url}/tools/{tool}``, with a bearer token for
      ``action_service_scope`` when it is set.
    * ``token_provider``: scope -> access token (production:
      :func:`azure_token_provider`; tests: a fake).
    * ``allowed_token_scopes``: when set, an ``auth.scope`` outside it is refused.
    * ``secrets``: the secrets an HTTP task's request may carry, each bound to the hosts
      that may receive it (``engine.runtime.builtins.secrets``).
    * ``token_hosts``: scope -> the hosts (``api.example.com``, ``*.example.com``) that may
      receive a token for it; a token is sent to no other host (the action service's and
      the configured Document Intelligence endpoint's hosts need no entry: they are
      configuration, not input).
    * ``document_intelligence_endpoint``/``document_intelligence_credential``: defaults of
      DOCUMENT_INTELLIGENCE (credential: an azure-core ``TokenCredential`` in production,
      ``AzureKeyCredential`` accepted too).
    * ``logic_app_default_poll_seconds``: poll interval of the asynchronous pattern when
      the service sends no ``Retry-After``.
    * ``evaluators``: the processes that evaluate INLINE scripts and jq programs
      (:class:`engine.runtime.evaluators.EvaluatorPool`); without them those tasks fail.
    * ``http_clients``: the outbound HTTP clients, reused across calls (https connections
      kept alive); copies of these deps share them.
    * ``within_seconds``: set for a step done in an orchestration's work item
      (engine/runtime/local_steps.py): a script's evaluation is bounded by it and one
      past it raises ``NotHere``, as does an HTTP call of a method not safe to make
      again.
    """

    payload_store: PayloadStoreLike | None = None
    payload_threshold_bytes: int | None = None
    max_payload_bytes: int | None = None
    action_service_url: str | None = None
    action_service_scope: str | None = None
    token_provider: TokenProvider | None = None
    allowed_token_scopes: frozenset[str] | None = None
    token_hosts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the secrets an HTTP request may carry (``engine.runtime.builtins.secrets.Secrets``)
    secrets: Secrets = field(default_factory=Secrets)
    outbound: OutboundSettings = field(default_factory=OutboundSettings)
    document_intelligence_endpoint: str | None = None
    document_intelligence_credential: Any = None
    document_intelligence_api_version: str | None = None
    logic_app_default_poll_seconds: float = 5.0
    document_intelligence_default_poll_seconds: float = 2.0
    evaluators: EvaluatorPool | None = None
    #: the reusable outbound HTTP clients of the engine process
    #: (``engine.runtime.builtins.outbound.OutboundClients``)
    http_clients: Any = field(default_factory=lambda: _outbound_clients())
    within_seconds: float | None = None


def _outbound_clients() -> Any:
    from engine.runtime.builtins.outbound import OutboundClients  # it imports this module

    return OutboundClients()


#: The signature of every built-in activity and poll function.
Activity = Callable[[ActivityDeps, dict[str, Any]], ActivityResult]


def payload_key(task_input: dict[str, Any], name: str) -> str:
    """The payload-store key for something named ``name`` that this task offloads:
    ``<_payloadKeyPrefix>/<name>``, or ``payloads/activities/<random>/<name>`` when the
    task input carries no prefix."""
    prefix = task_input.get(PAYLOAD_KEY_PREFIX)
    if not isinstance(prefix, str) or not prefix.strip("/"):
        prefix = unowned_activity_prefix(uuid.uuid4().hex)
    return f"{prefix.strip('/')}/{name}"


def payload_threshold(deps: ActivityDeps) -> int:
    if deps.payload_threshold_bytes is not None:
        return deps.payload_threshold_bytes
    limits = getattr(deps.payload_store, "limits", None)
    value = getattr(limits, "task_output_threshold", None)
    return value if isinstance(value, int) else DEFAULT_PAYLOAD_THRESHOLD_BYTES


def max_payload(deps: ActivityDeps) -> int:
    if deps.max_payload_bytes is not None:
        return deps.max_payload_bytes
    limits = getattr(deps.payload_store, "limits", None)
    value = getattr(limits, "max_size", None)
    return value if isinstance(value, int) else DEFAULT_MAX_RESPONSE_BYTES


class ActivityError(Exception):
    """A failure an activity reports as its result: retryable or terminal."""

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable

    def to_result(self) -> ActivityResult:
        if self.retryable:
            return ActivityResult.failed(self.reason)
        return ActivityResult.terminal(self.reason)


class OffloadError(ActivityError):
    """Offloading failed: too large (terminal) or the store failed (retryable)."""


def offload(
    deps: ActivityDeps,
    task_input: dict[str, Any],
    name: str,
    what: str,
    data: bytes,
    content_type: str,
) -> str | None:
    """Store ``data`` when it is above the threshold and a store is configured; returns
    the reference, or None when it stays inline. Raises :class:`OffloadError` above the
    maximum (terminal, even without a store: it would not fit in a record either) or
    when the store fails (retryable); lets ``PayloadStoreUnavailable`` through (an
    outage, not a failure of the task: the activity runs again)."""
    size = len(data)
    maximum = max_payload(deps)
    if size > maximum:
        raise OffloadError(
            f"{what} is {size} bytes, above the maximum payload size of {maximum} bytes",
            retryable=False,
        )
    if deps.payload_store is None or size <= payload_threshold(deps):
        return None
    try:
        return deps.payload_store.put(payload_key(task_input, name), data, content_type)
    except PayloadStoreUnavailable:
        raise
    except Exception as exc:
        raise OffloadError(
            f"could not store the {size}-byte {what} in the payload store: "
            f"{type(exc).__name__}: {exc}",
            retryable=True,
        ) from exc


def carried_state(task_input: dict[str, Any]) -> dict[str, Any]:
    """The reserved keys of a task input that a poll must see again."""
    prefix = task_input.get(PAYLOAD_KEY_PREFIX)
    return {PAYLOAD_KEY_PREFIX: prefix} if isinstance(prefix, str) and prefix else {}


def never_raises(fn: Activity) -> Activity:
    """Turn an unexpected exception of an activity into a retryable FAILED result.

    The activities map every expected failure themselves; this is the safety net that
    keeps the "result envelope, never an exception" promise for bugs and surprises. A
    ``PayloadStoreUnavailable`` goes through: an outage, which the interpreter meets
    by running the activity again.
    """

    @functools.wraps(fn)
    def wrapper(deps: ActivityDeps, task_input: dict[str, Any]) -> ActivityResult:
        try:
            return fn(deps, task_input)
        except JsonTooDeep as exc:  # an answer nested too deep: the same every time
            return ActivityResult.terminal(str(exc))
        except (PayloadStoreUnavailable, NotHere):
            raise
        except Exception as exc:
            log.exception("activity %s raised", getattr(fn, "__name__", fn))
            return ActivityResult.failed(
                f"unexpected error in {getattr(fn, '__name__', 'activity')}: "
                f"{type(exc).__name__}: {exc}"
            )

    return wrapper


def token_provider_from_credential(credential: Any) -> TokenProvider:
    """A :data:`TokenProvider` over an azure-core ``TokenCredential``.

    azure-identity credentials cache tokens themselves, so calling this per request is
    cheap.
    """

    def provide(scope: str) -> str:
        return str(credential.get_token(scope).token)

    return provide


def azure_credential(managed_identity_client_id: str | None = None) -> Any:
    """The production credential: the user-assigned managed identity when its client id
    is given (what the Container Apps of the engine use), else ``DefaultAzureCredential``
    (developer machines: Azure CLI login, environment variables, ...)."""
    from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

    if managed_identity_client_id:
        return ManagedIdentityCredential(client_id=managed_identity_client_id)
    return DefaultAzureCredential()


def azure_token_provider(managed_identity_client_id: str | None = None) -> TokenProvider:
    """The production token provider (see :func:`azure_credential`)."""
    return token_provider_from_credential(azure_credential(managed_identity_client_id))
