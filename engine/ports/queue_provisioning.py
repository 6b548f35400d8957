"""The queue-provisioning port: create and update the queues of a task type.

Registering a task definition creates its queues (``<type>``, ``<type>-high`` and
one ``<domain>-<type>`` per domain) with settings derived from the task
definition (:func:`queue_settings_for_taskdef`). Re-registering is idempotent:
settings that Service Bus lets you change on an existing queue are updated, the
ones it does not (:data:`IMMUTABLE_SETTINGS`) are left as they are and reported
in :attr:`ProvisionResult.not_changeable`. See ``docs/queues.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from engine.ports.queue import MAX_DELIVERY_COUNT_LIMIT, MAX_LOCK_SECONDS, QueueSettings
from protocol import queues

#: Settings that Service Bus fixes when the queue is created.
IMMUTABLE_SETTINGS: frozenset[str] = frozenset({"requires_duplicate_detection", "requires_session"})

#: Conductor's TaskDef defaults for the fields read here.
CONDUCTOR_DEFAULT_RESPONSE_TIMEOUT_SECONDS = 3600
CONDUCTOR_DEFAULT_RETRY_COUNT = 3

#: Service Bus lock bounds (the lock is at most 5 minutes, at least 5 seconds).
MIN_LOCK_SECONDS = 5.0
#: Redeliveries of ONE message allowed on top of the retry budget; see
#: :func:`queue_settings_for_taskdef`.
DELIVERY_HEADROOM = 9
DEFAULT_DUPLICATE_DETECTION_WINDOW_SECONDS = 600

_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._\-/]{0,258}[A-Za-z0-9])?$")


class ProvisionOutcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class ProvisionResult:
    """What :meth:`QueueProvisioner.ensure_queue` did.

    ``changed``: the settings fields written on an update (all fields on create is
    not listed: ``changed`` is empty then). ``not_changeable``: fields whose
    requested value differs from the queue's but cannot be changed after
    creation, so were left alone. ``settings``: the queue's settings afterwards."""

    name: str
    outcome: ProvisionOutcome
    settings: QueueSettings
    changed: tuple[str, ...] = ()
    not_changeable: tuple[str, ...] = ()


class InvalidQueueName(ValueError):
    pass


@runtime_checkable
class QueueProvisioner(Protocol):
    def ensure_queue(self, name: str, settings: QueueSettings) -> ProvisionResult:
        """Create the queue, or bring its changeable settings to ``settings``."""
        ...

    def get_queue(self, name: str) -> QueueSettings | None:
        """The queue's settings, or None when it does not exist."""
        ...

    def list_queues(self) -> list[str]:
        """Names of all queues, sorted."""
        ...


def plan_update(
    current: QueueSettings, desired: QueueSettings
) -> tuple[QueueSettings, tuple[str, ...], tuple[str, ...]]:
    """Pure: the settings to write on an existing queue, the fields that change,
    and the differing fields that cannot change (kept at ``current``)."""
    changed: list[str] = []
    frozen: list[str] = []
    updates: dict[str, Any] = {}
    for f in fields(QueueSettings):
        old, new = getattr(current, f.name), getattr(desired, f.name)
        if old == new:
            continue
        if f.name in IMMUTABLE_SETTINGS:
            frozen.append(f.name)
        else:
            changed.append(f.name)
            updates[f.name] = new
    return replace(current, **updates), tuple(changed), tuple(frozen)


def validate_queue_name(name: str) -> str:
    """Service Bus queue names: 1-260 characters of letters, digits, ``. - _ /``,
    starting and ending with a letter or digit."""
    if not _NAME_RE.match(name) or "//" in name or name.endswith("$deadletterqueue"):
        raise InvalidQueueName(f"invalid queue name: {name!r}")
    return name


def queue_names(task_type: str, domains: Iterable[str] = ()) -> list[str]:
    """The queues to provision for a task type (:func:`protocol.queues.queue_names`,
    duplicates dropped), each checked to be a valid Service Bus queue name."""
    names = list(dict.fromkeys(queues.queue_names(task_type, domains)))
    return [validate_queue_name(n) for n in names]


def _field(taskdef: Mapping[str, Any] | object, camel: str) -> Any:
    if isinstance(taskdef, Mapping):
        return taskdef.get(camel)
    value = getattr(taskdef, camel, None)
    if value is None:
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
        value = getattr(taskdef, snake, None)
    return value


def queue_settings_for_taskdef(taskdef: Mapping[str, Any] | object) -> QueueSettings:
    """Queue settings for a WORKER task definition (Conductor TaskDef fields, as a
    mapping with camelCase keys or an object with camelCase or snake_case
    attributes).

    * ``lock_duration_seconds = min(responseTimeoutSeconds, 300)`` (at least 5):
      Service Bus caps a lock at 5 minutes. The real response timeout is a durable
      timer in the engine and the hand-out lease lives in the run store; the Task
      API defers a message right after receiving it, so the lock only has to cover
      that step. ``responseTimeoutSeconds`` missing or 0: Conductor's default 3600.
    * ``max_delivery_count = retryCount + 1 + 9`` (``retryCount`` default 3, so 13;
      at most 2000). Each retry attempt is a new message (id ``<taskId>:<attempt>``),
      so this bounds redeliveries of ONE message after a receiver died holding its
      lock or abandoned it; ``retryCount + 1`` keeps it at least the number of
      attempts, and the headroom of 9 keeps it near Service Bus's default of 10.
    * duplicate detection on, window 10 minutes (covers re-runs of the dispatch
      activity of the same attempt).
    * dead-lettering on message expiration on; default TTL: none (messages never
      expire; a message whose task no longer waits is dropped as stale by the
      Task API, and every wait of a run is bounded by the engine's timers).
    """
    rto = _field(taskdef, "responseTimeoutSeconds")
    response_timeout = float(rto) if rto else float(CONDUCTOR_DEFAULT_RESPONSE_TIMEOUT_SECONDS)
    lock = min(max(response_timeout, MIN_LOCK_SECONDS), MAX_LOCK_SECONDS)
    rc = _field(taskdef, "retryCount")
    retry_count = CONDUCTOR_DEFAULT_RETRY_COUNT if rc is None else max(0, int(rc))
    max_delivery = min(retry_count + 1 + DELIVERY_HEADROOM, MAX_DELIVERY_COUNT_LIMIT)
    return QueueSettings(
        lock_duration_seconds=lock,
        max_delivery_count=max_delivery,
        duplicate_detection_window_seconds=DEFAULT_DUPLICATE_DETECTION_WINDOW_SECONDS,
        requires_duplicate_detection=True,
        dead_lettering_on_message_expiration=True,
        default_message_ttl_seconds=None,
        requires_session=False,
    )


def ensure_queues_exist(
    provisioner: QueueProvisioner,
    task_type: str,
    domains: Iterable[str] = (),
    taskdef: Mapping[str, Any] | object | None = None,
) -> list[str]:
    """Create the queues of ``task_type`` (and of ``domains``) that do not exist yet,
    with the settings of ``taskdef`` (Conductor's default task definition when None);
    existing queues are left as they are. Returns the names created. This is how a
    task type gets its queues without a registered task definition: on registration
    of a workflow that uses it, on a start request that maps it to a new domain, and on
    first use."""
    created: list[str] = []
    desired = queue_settings_for_taskdef(taskdef if taskdef is not None else {})
    for name in queue_names(task_type, domains):
        if provisioner.get_queue(name) is None:
            provisioner.ensure_queue(name, desired)
            created.append(name)
    return created
