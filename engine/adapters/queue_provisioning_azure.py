"""Queue provisioning on Azure Service Bus through Azure Resource Manager
(``azure-mgmt-servicebus``: ``queues.get`` / ``queues.create_or_update``).

``ensure_queue`` reads the queue first. Missing: one PUT with every managed
setting. Present: the managed settings are compared; when nothing changeable
differs no request is sent (``unchanged``); otherwise the queue's current
resource is PUT back with the changeable settings replaced. Immutable settings
(``requiresDuplicateDetection``, ``requiresSession``) are sent with their current
values, so ARM never sees an attempt to change them, and properties Stepway does
not manage (``maxSizeInMegabytes``, ``enablePartitioning``, ...) are preserved.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from azure.core.credentials import TokenCredential
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.servicebus import ServiceBusManagementClient
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties

from engine.ports.queue import QueueSettings
from engine.ports.queue_provisioning import (
    MIN_LOCK_SECONDS,
    ProvisionOutcome,
    ProvisionResult,
    plan_update,
    validate_queue_name,
)

#: Service Bus reports "never expires" as TimeSpan.MaxValue (~10675199 days).
_NEVER_EXPIRES_DAYS = 10_000_000
TIMESPAN_MAX = timedelta(days=10675199, hours=2, minutes=48, seconds=5, microseconds=477580)


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def settings_from_properties(props: SBQueueProperties | None) -> QueueSettings:
    """QueueSettings of an ARM queue resource (missing values: Service Bus defaults)."""
    if props is None:
        return QueueSettings()
    defaults = QueueSettings()
    lock = _seconds(props.lock_duration)
    window = _seconds(props.duplicate_detection_history_time_window)
    ttl = props.default_message_time_to_live
    ttl_seconds: int | None = None
    if isinstance(ttl, timedelta) and ttl.days < _NEVER_EXPIRES_DAYS:
        ttl_seconds = int(ttl.total_seconds())
    return QueueSettings(
        lock_duration_seconds=defaults.lock_duration_seconds if lock is None else lock,
        max_delivery_count=props.max_delivery_count or defaults.max_delivery_count,
        duplicate_detection_window_seconds=(
            defaults.duplicate_detection_window_seconds if window is None else int(window)
        ),
        requires_duplicate_detection=bool(props.requires_duplicate_detection),
        dead_lettering_on_message_expiration=bool(props.dead_lettering_on_message_expiration),
        default_message_ttl_seconds=ttl_seconds,
        requires_session=bool(props.requires_session),
    )


def apply_settings(props: SBQueueProperties, settings: QueueSettings) -> SBQueueProperties:
    """Write every managed setting onto ``props`` (in place) and return it."""
    props.lock_duration = timedelta(seconds=settings.lock_duration_seconds)
    props.max_delivery_count = settings.max_delivery_count
    props.requires_duplicate_detection = settings.requires_duplicate_detection
    props.duplicate_detection_history_time_window = timedelta(
        seconds=settings.duplicate_detection_window_seconds
    )
    props.dead_lettering_on_message_expiration = settings.dead_lettering_on_message_expiration
    if settings.default_message_ttl_seconds is not None:
        props.default_message_time_to_live = timedelta(seconds=settings.default_message_ttl_seconds)
    elif _seconds(props.default_message_time_to_live) is not None:
        # back to "never expires" on an existing queue; on a new queue the property
        # is omitted (the service default; Basic tier caps TTL at 14 days)
        current = props.default_message_time_to_live
        if isinstance(current, timedelta) and current.days < _NEVER_EXPIRES_DAYS:
            props.default_message_time_to_live = TIMESPAN_MAX
    props.requires_session = settings.requires_session
    return props


class AzureQueueProvisioner:
    """:class:`engine.ports.queue_provisioning.QueueProvisioner` for one Service Bus
    namespace.

    ``base_url``: the ARM endpoint (default: the public cloud's). ``allow_http``
    lets the bearer token go over plain http (tests against a local ARM stub only;
    azure-core refuses that by default)."""

    def __init__(
        self,
        credential: TokenCredential,
        subscription_id: str,
        resource_group: str,
        namespace: str,
        *,
        base_url: str | None = None,
        allow_http: bool = False,
        client: ServiceBusManagementClient | None = None,
        **client_kwargs: Any,
    ) -> None:
        self._client = client or ServiceBusManagementClient(
            credential, subscription_id, base_url=base_url, **client_kwargs
        )
        self._resource_group = resource_group
        self._namespace = namespace
        self._call_kwargs: dict[str, Any] = {"enforce_https": False} if allow_http else {}

    def _get(self, name: str) -> SBQueue | None:
        try:
            return self._client.queues.get(
                self._resource_group, self._namespace, name, **self._call_kwargs
            )
        except ResourceNotFoundError:
            return None

    def _put(self, name: str, queue: SBQueue) -> SBQueue:
        return self._client.queues.create_or_update(
            self._resource_group, self._namespace, name, queue, **self._call_kwargs
        )

    def ensure_queue(self, name: str, settings: QueueSettings) -> ProvisionResult:
        validate_queue_name(name)
        if settings.lock_duration_seconds < MIN_LOCK_SECONDS:
            raise ValueError(
                f"Service Bus locks last at least {MIN_LOCK_SECONDS:g} s, "
                f"got {settings.lock_duration_seconds}"
            )
        existing = self._get(name)
        if existing is None:
            created = self._put(
                name, SBQueue(properties=apply_settings(SBQueueProperties(), settings))
            )
            return ProvisionResult(
                name, ProvisionOutcome.CREATED, settings_from_properties(created.properties)
            )
        current = settings_from_properties(existing.properties)
        target, changed, frozen = plan_update(current, settings)
        if not changed:
            return ProvisionResult(name, ProvisionOutcome.UNCHANGED, current, not_changeable=frozen)
        props = existing.properties or SBQueueProperties()
        apply_settings(props, target)
        updated = self._put(name, SBQueue(properties=props))
        return ProvisionResult(
            name,
            ProvisionOutcome.UPDATED,
            settings_from_properties(updated.properties),
            changed,
            frozen,
        )

    def get_queue(self, name: str) -> QueueSettings | None:
        existing = self._get(name)
        return None if existing is None else settings_from_properties(existing.properties)

    def list_queues(self) -> list[str]:
        pages = self._client.queues.list_by_namespace(
            self._resource_group, self._namespace, **self._call_kwargs
        )
        return sorted(str(q.name) for q in pages)

    def close(self) -> None:
        self._client.close()
