"""Contract suite of the queue-provisioning port (SQLite, and Azure against a local
ARM stub so the real azure-mgmt-servicebus serialization runs), plus the pure
settings derivation and queue naming."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from azure.core.credentials import AccessToken

from engine.adapters.queue_provisioning_azure import AzureQueueProvisioner
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.ports.queue import QueueNotFound, QueueSettings
from engine.ports.queue_provisioning import (
    InvalidQueueName,
    ProvisionOutcome,
    QueueProvisioner,
    plan_update,
    queue_names,
    queue_settings_for_taskdef,
)

SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"
RG = "rg-stepway"
NS = "sb-stepway"
TOKEN = "fake-arm-token"

# -- a local ARM stub -----------------------------------------------------------

_QUEUE_PATH = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
    r"Microsoft\.ServiceBus/namespaces/(?P<ns>[^/]+)/queues(?:/(?P<queue>[^/]+))?$"
)

ARM_DEFAULTS: dict[str, Any] = {
    "lockDuration": "PT1M",
    "maxSizeInMegabytes": 1024,
    "requiresDuplicateDetection": False,
    "requiresSession": False,
    "defaultMessageTimeToLive": "P10675199DT2H48M5.4775807S",
    "deadLetteringOnMessageExpiration": False,
    "duplicateDetectionHistoryTimeWindow": "PT10M",
    "maxDeliveryCount": 10,
    "status": "Active",
    "enableBatchedOperations": True,
    "enablePartitioning": False,
    "enableExpress": False,
}
IMMUTABLE_ARM = ("requiresDuplicateDetection", "requiresSession")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    body: Any


@dataclass
class ArmStub:
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    base_url: str = ""

    def puts(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "PUT"]

    def resource(self, name: str) -> dict[str, Any]:
        return {
            "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/"
            f"Microsoft.ServiceBus/namespaces/{NS}/queues/{name}",
            "name": name,
            "type": "Microsoft.ServiceBus/namespaces/queues",
            "location": "westeurope",
            "properties": self.queues[name],
        }


def _handler(stub: ArmStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, code: str, message: str) -> None:
            self._reply(status, {"error": {"code": code, "message": message}})

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            stub.requests.append(
                Recorded(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    self.headers.get("Authorization"),
                    body,
                )
            )
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._error(401, "AuthenticationFailed", "missing bearer token")
            if "api-version" not in parse_qs(parts.query):
                return self._error(400, "MissingApiVersionParameter", "api-version")
            m = _QUEUE_PATH.match(parts.path)
            if not m or m["sub"] != SUBSCRIPTION or m["rg"] != RG or m["ns"] != NS:
                return self._error(404, "ResourceNotFound", parts.path)
            name = m["queue"]
            if self.command == "GET" and name is None:
                return self._reply(200, {"value": [stub.resource(q) for q in sorted(stub.queues)]})
            if self.command == "GET":
                if name not in stub.queues:
                    return self._error(404, "NotFound", f"queue {name} not found")
                return self._reply(200, stub.resource(name))
            if self.command == "PUT" and name is not None:
                sent = dict((body or {}).get("properties") or {})
                existing = stub.queues.get(name)
                if existing is not None:
                    for key in IMMUTABLE_ARM:
                        if key in sent and sent[key] != existing[key]:
                            return self._error(
                                400,
                                "BadRequest",
                                f"The value for the {key} property of an existing Queue "
                                "cannot be changed.",
                            )
                # PUT replaces: anything not sent goes back to the default
                props = {**ARM_DEFAULTS, **sent}
                props.update(
                    {"createdAt": "2024-01-01T00:00:00Z", "messageCount": 0, "sizeInBytes": 0}
                )
                stub.queues[name] = props
                return self._reply(200, stub.resource(name))
            return self._error(405, "MethodNotAllowed", self.command)

        do_GET = _handle
        do_PUT = _handle

    return Handler


@pytest.fixture
def arm_stub() -> Iterator[ArmStub]:
    stub = ArmStub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    stub.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


class FakeCredential:
    """A TokenCredential that hands out a fixed token."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(TOKEN, 4_102_444_800)


def _azure(stub: ArmStub) -> AzureQueueProvisioner:
    return AzureQueueProvisioner(
        FakeCredential(),  # type: ignore[arg-type]
        SUBSCRIPTION,
        RG,
        NS,
        base_url=stub.base_url,
        allow_http=True,
        retry_total=0,
    )


# -- the shared provisioning contract ---------------------------------------------


@pytest.fixture(params=["sqlite", "azure"])
def provisioner(
    request: pytest.FixtureRequest, tmp_path: Path, arm_stub: ArmStub
) -> Iterator[QueueProvisioner]:
    if request.param == "sqlite":
        p = SqliteQueueProvisioner(tmp_path / "q.db")
        yield p
        p.close()
    else:
        a = _azure(arm_stub)
        yield a
        a.close()


BASE = QueueSettings(
    lock_duration_seconds=120,
    max_delivery_count=13,
    duplicate_detection_window_seconds=600,
    requires_duplicate_detection=True,
    dead_lettering_on_message_expiration=True,
)


def test_create_then_get_and_list(provisioner: QueueProvisioner) -> None:
    assert provisioner.get_queue("parse_pdf") is None
    result = provisioner.ensure_queue("parse_pdf", BASE)
    assert result.outcome is ProvisionOutcome.CREATED
    assert result.settings == BASE
    assert provisioner.get_queue("parse_pdf") == BASE
    provisioner.ensure_queue("parse_pdf-high", BASE)
    assert provisioner.list_queues() == ["parse_pdf", "parse_pdf-high"]


def test_re_register_with_same_settings_is_unchanged(provisioner: QueueProvisioner) -> None:
    provisioner.ensure_queue("q1", BASE)
    again = provisioner.ensure_queue("q1", BASE)
    assert again.outcome is ProvisionOutcome.UNCHANGED
    assert again.changed == () and again.not_changeable == ()
    assert again.settings == BASE


def test_changeable_settings_are_updated(provisioner: QueueProvisioner) -> None:
    provisioner.ensure_queue("q2", BASE)
    wanted = QueueSettings(
        lock_duration_seconds=300,
        max_delivery_count=20,
        duplicate_detection_window_seconds=1200,
        requires_duplicate_detection=True,
        dead_lettering_on_message_expiration=False,
        default_message_ttl_seconds=86400,
    )
    result = provisioner.ensure_queue("q2", wanted)
    assert result.outcome is ProvisionOutcome.UPDATED
    assert set(result.changed) == {
        "lock_duration_seconds",
        "max_delivery_count",
        "duplicate_detection_window_seconds",
        "dead_lettering_on_message_expiration",
        "default_message_ttl_seconds",
    }
    assert provisioner.get_queue("q2") == wanted
    assert provisioner.ensure_queue("q2", wanted).outcome is ProvisionOutcome.UNCHANGED


def test_immutable_settings_are_left_alone(provisioner: QueueProvisioner) -> None:
    provisioner.ensure_queue("q3", BASE)
    no_dedup = QueueSettings(
        lock_duration_seconds=120,
        max_delivery_count=13,
        requires_duplicate_detection=False,
        requires_session=True,
    )
    only_immutable = provisioner.ensure_queue("q3", no_dedup)
    assert only_immutable.outcome is ProvisionOutcome.UNCHANGED
    assert set(only_immutable.not_changeable) == {
        "requires_duplicate_detection",
        "requires_session",
    }
    mixed = QueueSettings(
        lock_duration_seconds=60, max_delivery_count=13, requires_duplicate_detection=False
    )
    result = provisioner.ensure_queue("q3", mixed)
    assert result.outcome is ProvisionOutcome.UPDATED
    assert result.changed == ("lock_duration_seconds",)
    assert result.not_changeable == ("requires_duplicate_detection",)
    current = provisioner.get_queue("q3")
    assert current is not None
    assert current.requires_duplicate_detection is True
    assert current.requires_session is False
    assert current.lock_duration_seconds == 60


def test_invalid_queue_name_is_refused(provisioner: QueueProvisioner) -> None:
    with pytest.raises(InvalidQueueName):
        provisioner.ensure_queue("-bad name", BASE)


# -- Azure specifics: what the SDK puts on the wire ------------------------------


def test_azure_create_sends_the_exact_arm_properties(arm_stub: ArmStub) -> None:
    prov = _azure(arm_stub)
    settings = queue_settings_for_taskdef({"name": "parse_pdf", "responseTimeoutSeconds": 120})
    prov.ensure_queue("parse_pdf", settings)
    [put] = arm_stub.puts()
    assert put.path == (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/"
        f"Microsoft.ServiceBus/namespaces/{NS}/queues/parse_pdf"
    )
    assert put.query["api-version"] == [prov._client._config.api_version]
    assert put.authorization == f"Bearer {TOKEN}"
    # azure-mgmt writes ISO 8601 durations zero-padded: "PT02M00S" is 2 minutes ("PT2M").
    assert put.body == {
        "properties": {
            "lockDuration": "PT02M00S",
            "maxDeliveryCount": 13,
            "requiresDuplicateDetection": True,
            "duplicateDetectionHistoryTimeWindow": "PT10M00S",
            "deadLetteringOnMessageExpiration": True,
            "requiresSession": False,
        }
    }
    prov.close()


def test_azure_update_keeps_unmanaged_and_immutable_properties(arm_stub: ArmStub) -> None:
    prov = _azure(arm_stub)
    prov.ensure_queue("q", BASE)
    arm_stub.queues["q"]["maxSizeInMegabytes"] = 5120  # set by someone else
    prov.ensure_queue(
        "q", QueueSettings(lock_duration_seconds=45, requires_duplicate_detection=False)
    )
    update = arm_stub.puts()[-1].body["properties"]
    assert update["lockDuration"] == "PT45S"
    assert update["maxDeliveryCount"] == 10
    assert update["requiresDuplicateDetection"] is True  # current value, not the requested one
    assert update["maxSizeInMegabytes"] == 5120
    for read_only in ("createdAt", "messageCount", "sizeInBytes"):
        assert read_only not in update
    assert arm_stub.queues["q"]["maxSizeInMegabytes"] == 5120
    n_puts = len(arm_stub.puts())
    prov.ensure_queue(
        "q", QueueSettings(lock_duration_seconds=45, requires_duplicate_detection=True)
    )
    assert len(arm_stub.puts()) == n_puts, "an unchanged re-register must not PUT"
    prov.close()


def test_azure_refuses_locks_shorter_than_five_seconds(arm_stub: ArmStub) -> None:
    prov = _azure(arm_stub)
    with pytest.raises(ValueError):
        prov.ensure_queue("q", QueueSettings(lock_duration_seconds=1))
    assert arm_stub.requests == []


# -- SQLite: the task queue refuses queues that were not provisioned --------------


def test_sqlite_task_queue_needs_a_provisioned_queue(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = SqliteTaskQueue(path)
    with pytest.raises(QueueNotFound):
        q.send("parse_pdf", {"x": 1}, "t:1")
    prov = SqliteQueueProvisioner(path)
    prov.ensure_queue("parse_pdf", BASE)
    q.send("parse_pdf", {"x": 1}, "t:1")
    assert q.depth("parse_pdf").active == 1
    # a settings update takes effect on the next call
    prov.ensure_queue("parse_pdf", QueueSettings(lock_duration_seconds=5))
    [m] = q.receive("parse_pdf", 1, 0)
    assert m.locked_until is not None
    assert (m.locked_until - m.enqueued_time).total_seconds() < 6
    q.close()
    prov.close()


# -- pure functions -----------------------------------------------------------------


def test_settings_from_the_seed_taskdef() -> None:
    taskdef = {
        "name": "parse_pdf",
        "timeoutSeconds": 300,
        "responseTimeoutSeconds": 120,
        "pollTimeoutSeconds": 3600,
        "retryCount": 2,
    }
    s = queue_settings_for_taskdef(taskdef)
    assert s.lock_duration_seconds == 120
    assert s.max_delivery_count == 2 + 1 + 9
    assert s.requires_duplicate_detection is True
    assert s.duplicate_detection_window_seconds == 600
    assert s.dead_lettering_on_message_expiration is True
    assert s.default_message_ttl_seconds is None
    assert s.requires_session is False


@pytest.mark.parametrize(
    ("rto", "lock"),
    [(7200, 300), (300, 300), (299, 299), (1, 5), (0, 300), (None, 300)],
)
def test_lock_is_the_response_timeout_capped_at_five_minutes(rto: int | None, lock: float) -> None:
    assert queue_settings_for_taskdef({"responseTimeoutSeconds": rto}).lock_duration_seconds == lock


def test_max_delivery_count_defaults_and_bounds() -> None:
    assert queue_settings_for_taskdef({}).max_delivery_count == 3 + 1 + 9  # Conductor default 3
    assert queue_settings_for_taskdef({"retryCount": 0}).max_delivery_count == 10
    assert queue_settings_for_taskdef({"retryCount": 10_000}).max_delivery_count == 2000


def test_settings_from_an_object_with_snake_or_camel_attributes() -> None:
    @dataclass
    class Snake:
        response_timeout_seconds: int = 60
        retry_count: int = 1

    @dataclass
    class Camel:
        responseTimeoutSeconds: int = 90
        retryCount: int = 4

    assert queue_settings_for_taskdef(Snake()).lock_duration_seconds == 60
    assert queue_settings_for_taskdef(Snake()).max_delivery_count == 11
    assert queue_settings_for_taskdef(Camel()).lock_duration_seconds == 90
    assert queue_settings_for_taskdef(Camel()).max_delivery_count == 14


def test_queue_names_for_a_type_and_its_domains() -> None:
    assert queue_names("parse_pdf") == ["parse_pdf", "parse_pdf-high"]
    assert queue_names("parse_pdf", ["acme", "beta", "acme"]) == [
        "parse_pdf",
        "parse_pdf-high",
        "acme-parse_pdf",
        "beta-parse_pdf",
    ]
    with pytest.raises(InvalidQueueName):
        queue_names("bad type")


def test_plan_update_is_pure_and_reports_both_kinds() -> None:
    current = QueueSettings()
    desired = QueueSettings(max_delivery_count=20, requires_session=True)
    target, changed, frozen = plan_update(current, desired)
    assert target == QueueSettings(max_delivery_count=20)
    assert changed == ("max_delivery_count",)
    assert frozen == ("requires_session",)
    assert current == QueueSettings()
