"""Stack configuration: the ``stepway:*`` keys of ``Pulumi.<stack>.yaml``.

Validated with pydantic at the start of the program so that a typo or an unsafe
value fails before any resource is planned, with a message naming the key.
Every key, its meaning and its default are listed in docs/deploy.md.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from workers.catalog import check_cpu, check_memory

NAMESPACE = "stepway"

_BASE_NAME = re.compile(r"^[a-z][a-z0-9-]*[a-z0-9]$")


class StackConfigError(ValueError):
    """The stack configuration is invalid. The message names each bad key."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class AppSettings(_Model):
    """A platform container app (engine orchestrator, engine activities, control plane)."""

    image: str = Field(min_length=1)
    cpu: float = 0.5
    memory: str = "1Gi"
    min_replicas: int = Field(default=1, alias="minReplicas", ge=0, le=300)
    max_replicas: int = Field(default=10, alias="maxReplicas", ge=1, le=300)

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, value: float) -> float:
        return check_cpu(value)

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        return check_memory(value)

    @model_validator(mode="after")
    def _replicas(self) -> AppSettings:
        if self.min_replicas > self.max_replicas:
            raise ValueError("minReplicas must not exceed maxReplicas")
        return self


class OrchestratorSettings(AppSettings):
    """Always on: orchestrations start without waiting for a cold start."""

    min_replicas: int = Field(default=1, alias="minReplicas", ge=1, le=300)
    #: Orchestration work items per replica the DTS scaler aims for.
    max_concurrent_work_items: int = Field(default=10, alias="maxConcurrentWorkItems", ge=1)


class EngineSecret(_Model):
    """A secret HTTP tasks may send (``${workflow.secrets.NAME}``): the Key Vault secret
    holding it (default: the name, ``_`` as ``-``) and the hosts it may go to."""

    key_vault_secret: str | None = Field(default=None, alias="keyVaultSecret")
    hosts: list[str] = Field(min_length=1)

    def vault_name(self, name: str) -> str:
        return self.key_vault_secret or name.replace("_", "-")


class ActivitySettings(AppSettings):
    """Scales on DTS activity work items, down to zero."""

    min_replicas: int = Field(default=0, alias="minReplicas", ge=0, le=300)
    max_concurrent_work_items: int = Field(default=10, alias="maxConcurrentWorkItems", ge=1)
    #: token scope -> the hosts an HTTP or LOGIC_APP task may send that scope's tokens to
    #: (the engine's STEPWAY_TOKEN_HOSTS; none: tasks get no identity tokens)
    token_hosts: dict[str, list[str]] = Field(default_factory=dict, alias="tokenHosts")
    #: secret name -> where it is kept and the hosts it may go to (the engine's
    #: STEPWAY_SECRET_HOSTS and STEPWAY_SECRET_<NAME>, a Key Vault reference)
    secrets: dict[str, EngineSecret] = Field(default_factory=dict)

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: dict[str, EngineSecret]) -> dict[str, EngineSecret]:
        # the engine reads a value from STEPWAY_SECRET_<NAME upper-cased, '-' as '_'>,
        # and the bindings from STEPWAY_SECRET_HOSTS (engine/app/config.py read_secrets)
        seen: dict[str, str] = {"HOSTS": "the bindings variable"}
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", name):
                raise ValueError(f"secret name {name!r}: letters, digits, '_' and '-'")
            key = name.upper().replace("-", "_")
            if key in seen:
                raise ValueError(f"secret name {name!r} reads the variable of {seen[key]}")
            seen[key] = repr(name)
        return value


class EngineSettings(_Model):
    orchestrator: OrchestratorSettings
    activity: ActivitySettings


class ControlPlaneSettings(AppSettings):
    min_replicas: int = Field(default=2, alias="minReplicas", ge=1, le=300)
    target_port: int = Field(default=8000, alias="targetPort", ge=1, le=65535)
    #: External ingress (reachable from outside the environment) so that workers
    #: anywhere with outbound HTTPS can poll the Task API.
    external_ingress: bool = Field(default=True, alias="externalIngress")
    #: Optional allow-list for the ingress; empty = no IP restriction.
    ingress_allowed_cidrs: list[str] = Field(default_factory=list, alias="ingressAllowedCidrs")
    #: Entra ID application id URI / audience the control plane validates.
    token_audience: str = Field(default="", alias="tokenAudience")

    @field_validator("ingress_allowed_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        return [_check_ip(item, "controlPlane.ingressAllowedCidrs") for item in value]


class RetentionSettings(_Model):
    """Days after which finished orchestrations are purged from the task hub."""

    completed_days: int = Field(default=30, alias="completedDays", ge=1)
    failed_days: int = Field(default=30, alias="failedDays", ge=1)


#: Durable Task Scheduler limits per SKU (docs/deploy.md cites Azure's page):
#: orchestration data retention in days, and capacity units of the Dedicated SKU.
DTS_MAX_RETENTION_DAYS = {"Consumption": 30, "Dedicated": 90}
DTS_MAX_CAPACITY = 3

#: Allow-list entries that admit every address.
_ANY_ADDRESS = {"0.0.0.0/0", "::/0"}


class DtsSettings(_Model):
    sku: Literal["Consumption", "Dedicated"] = "Consumption"
    capacity: int | None = Field(default=None, ge=1, le=DTS_MAX_CAPACITY)
    task_hub_name: str = Field(default="stepway", alias="taskHubName")
    #: Addresses besides the NAT gateway's (which the program adds when
    #: ``network.natGateway`` is on). The resulting list must not be empty:
    #: an empty allow-list denies every client. ``0.0.0.0/0`` allows all (not
    #: in production).
    ip_allowlist: list[str] = Field(alias="ipAllowlist")
    retention: RetentionSettings = Field(default_factory=RetentionSettings)

    @field_validator("ip_allowlist")
    @classmethod
    def _allowlist(cls, value: list[str]) -> list[str]:
        return [_check_ip(item, "dts.ipAllowlist") for item in value]

    @field_validator("task_hub_name")
    @classmethod
    def _hub(cls, value: str) -> str:
        if not re.match(r"^[a-zA-Z0-9-]{3,64}$", value):
            raise ValueError("taskHubName must be 3-64 letters, digits and '-'")
        return value

    @model_validator(mode="after")
    def _capacity(self) -> DtsSettings:
        if self.sku == "Dedicated" and self.capacity is None:
            raise ValueError("dts.capacity is required with the Dedicated SKU")
        if self.sku == "Consumption" and self.capacity is not None:
            raise ValueError("dts.capacity applies to the Dedicated SKU only")
        limit = DTS_MAX_RETENTION_DAYS[self.sku]
        for key, days in (
            ("completedDays", self.retention.completed_days),
            ("failedDays", self.retention.failed_days),
        ):
            if days > limit:
                raise ValueError(
                    f"dts.retention.{key}: {days} days exceeds the {self.sku} SKU's "
                    f"maximum of {limit} days"
                )
        return self

    @property
    def allows_everyone(self) -> bool:
        return any(
            str(ipaddress.ip_network(i, strict=False)) in _ANY_ADDRESS for i in self.ip_allowlist
        )


class ServiceBusSettings(_Model):
    # Basic has no duplicate detection, which dispatch relies on (message id
    # <taskId>:<attempt>), so it is not offered.
    sku: Literal["Standard", "Premium"] = "Standard"
    capacity: int | None = Field(default=None, description="Premium messaging units")
    zone_redundant: bool = Field(default=False, alias="zoneRedundant")

    @model_validator(mode="after")
    def _capacity(self) -> ServiceBusSettings:
        if self.sku == "Premium" and self.capacity not in (1, 2, 4, 8, 16):
            raise ValueError("serviceBus.capacity must be 1, 2, 4, 8 or 16 with Premium")
        if self.sku == "Standard" and self.capacity is not None:
            raise ValueError("serviceBus.capacity applies to the Premium SKU only")
        return self


class StorageSettings(_Model):
    sku: Literal["Standard_LRS", "Standard_ZRS", "Standard_GRS", "Standard_GZRS"] = "Standard_LRS"
    payload_container: str = Field(default="payloads", alias="payloadContainer")
    payload_retention_days: int = Field(default=30, alias="payloadRetentionDays", ge=1, le=3650)
    #: Workers anywhere read and write payloads through signed (user delegation)
    #: URLs on the account's public endpoint, so it stays reachable by default;
    #: ``false`` when every worker runs inside the stack's network.
    public_network_access: bool = Field(default=True, alias="publicNetworkAccess")

    @field_validator("payload_container")
    @classmethod
    def _container(cls, value: str) -> str:
        if not re.match(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$", value):
            raise ValueError("payloadContainer must be a valid blob container name")
        return value


class PostgresSettings(_Model):
    version: Literal["14", "15", "16", "17"] = "16"
    sku_name: str = Field(default="Standard_B1ms", alias="skuName")
    tier: Literal["Burstable", "GeneralPurpose", "MemoryOptimized"] = "Burstable"
    storage_gb: int = Field(default=32, alias="storageGb", ge=32, le=32767)
    backup_retention_days: int = Field(default=7, alias="backupRetentionDays", ge=7, le=35)
    geo_redundant_backup: bool = Field(default=False, alias="geoRedundantBackup")
    high_availability: bool = Field(default=False, alias="highAvailability")
    database: str = "stepway"

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value


class RegistrySettings(_Model):
    sku: Literal["Basic", "Standard", "Premium"] = "Basic"


class LogSettings(_Model):
    retention_days: int = Field(default=30, alias="retentionDays", ge=30, le=730)
    #: Percentage of traces Application Insights keeps (100 = all).
    sampling_percentage: float = Field(default=100, alias="samplingPercentage", gt=0, le=100)


class NetworkSettings(_Model):
    """The stack's virtual network (docs/deploy.md, "What is private, what is public").

    Every stack has one: the Container Apps environment (workload profiles) runs in
    ``appsSubnet`` and PostgreSQL has private access only (``postgresSubnet``,
    delegated). ``natGateway`` gives the apps one static egress address, which the
    program adds to the scheduler's IP allow-list; ``privateEndpoints`` puts Blob,
    Key Vault and Service Bus (Premium) behind private endpoints and turns their
    public network access off.
    """

    address_space: str = Field(default="10.40.0.0/16", alias="addressSpace")
    apps_subnet: str = Field(default="10.40.0.0/23", alias="appsSubnet")
    private_endpoints_subnet: str = Field(default="10.40.2.0/24", alias="privateEndpointsSubnet")
    postgres_subnet: str = Field(default="10.40.3.0/24", alias="postgresSubnet")
    nat_gateway: bool = Field(default=False, alias="natGateway")
    private_endpoints: bool = Field(default=False, alias="privateEndpoints")

    @model_validator(mode="after")
    def _subnets(self) -> NetworkSettings:
        space = _network(self.address_space, "network.addressSpace")
        subnets = {
            "appsSubnet": _network(self.apps_subnet, "network.appsSubnet"),
            "privateEndpointsSubnet": _network(
                self.private_endpoints_subnet, "network.privateEndpointsSubnet"
            ),
            "postgresSubnet": _network(self.postgres_subnet, "network.postgresSubnet"),
        }
        for key, net in subnets.items():
            if net.version != space.version or not net.subnet_of(space):  # type: ignore[arg-type]
                raise ValueError(f"network.{key} {net} is not inside addressSpace {space}")
        names = list(subnets)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                if subnets[first].overlaps(subnets[second]):
                    raise ValueError(f"network.{first} and network.{second} overlap")
        # A workload profiles environment needs at least a /27 (Azure's minimum).
        if subnets["appsSubnet"].prefixlen > 27:
            raise ValueError("network.appsSubnet must be a /27 or larger")
        return self


class WorkerOverride(_Model):
    """Per-stack scaling of one code area; unset fields keep the catalog value."""

    image: str | None = None
    min_replicas: int | None = Field(default=None, alias="minReplicas", ge=0, le=300)
    max_replicas: int | None = Field(default=None, alias="maxReplicas", ge=1, le=300)
    scale_to_zero: bool | None = Field(default=None, alias="scaleToZero")


class StackConfig(_Model):
    """All ``stepway:*`` keys of one stack, plus ``azure-native:location``."""

    environment: str
    location: str
    production: bool = False
    name_prefix: str = Field(default="stepway", alias="namePrefix")
    #: Optional short suffix for globally unique names (storage, registry, ...).
    name_suffix: str = Field(default="", alias="nameSuffix")
    tags: dict[str, str] = Field(default_factory=dict)
    dts: DtsSettings
    service_bus: ServiceBusSettings = Field(default_factory=ServiceBusSettings, alias="serviceBus")
    storage: StorageSettings = Field(default_factory=StorageSettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    registry: RegistrySettings = Field(default_factory=RegistrySettings)
    logs: LogSettings = Field(default_factory=LogSettings)
    engine: EngineSettings
    control_plane: ControlPlaneSettings = Field(alias="controlPlane")
    #: How far ``pulumi up`` goes, for the deployment order in docs/deploy.md:
    #: ``infrastructure`` (no container apps), ``platform`` (+ engine and
    #: control plane apps), ``all`` (+ worker apps, after ``stepway apply``
    #: created their queues).
    deploy_stage: Literal["infrastructure", "platform", "all"] = Field(
        default="all", alias="deployStage"
    )
    #: Refuse (``false``) or allow a ``deployStage`` lower than the stage the stack
    #: last deployed (its ``deployStage`` output); lowering deletes apps.
    allow_stage_downgrade: bool = Field(default=False, alias="allowStageDowngrade")
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    #: Zone redundancy of the Container Apps environment (Service Bus, storage and
    #: PostgreSQL have their own keys).
    zone_redundant: bool = Field(default=False, alias="zoneRedundant")
    #: Key Vault name; default ``kv-<base>``. 3-24 letters, digits and '-', starting
    #: with a letter, ending with a letter or digit, no "--".
    key_vault_name: str = Field(default="", alias="keyVaultName")
    #: Stack-wide default for worker apps: ``false`` keeps every worker at its
    #: ``minReplicas`` even when idle (a worker override wins).
    workers_scale_to_zero: bool = Field(default=True, alias="workersScaleToZero")
    workers: dict[str, WorkerOverride] = Field(default_factory=dict)

    @field_validator("environment", "name_prefix")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _BASE_NAME.match(value) or len(value) > 12:
            raise ValueError(
                f"{value!r} must be 2-12 lowercase letters, digits and '-', starting with a "
                "letter (it becomes part of resource names)"
            )
        return value

    @field_validator("name_suffix")
    @classmethod
    def _suffix(cls, value: str) -> str:
        if value and not re.match(r"^[a-z0-9]{1,6}$", value):
            raise ValueError("nameSuffix must be 1-6 lowercase letters and digits")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key.lower().startswith("stepway-"):
                raise ValueError(
                    f"tag {key!r}: tags starting with 'stepway-' are set by the program"
                )
        return value

    @model_validator(mode="after")
    def _production(self) -> StackConfig:
        if self.production and self.control_plane.min_replicas < 2:
            raise ValueError("controlPlane.minReplicas must be at least 2 when production is true")
        if self.production:
            missing = [
                key
                for key, on in (
                    ("network.natGateway", self.network.nat_gateway),
                    ("network.privateEndpoints", self.network.private_endpoints),
                )
                if not on
            ]
            if missing:
                raise ValueError(f"{' and '.join(missing)} must be true when production is true")
            if self.dts.allows_everyone:
                raise ValueError(
                    "dts.ipAllowlist must not admit every address (0.0.0.0/0) when "
                    "production is true"
                )
        if self.network.private_endpoints and self.service_bus.sku != "Premium":
            raise ValueError(
                "serviceBus.sku must be Premium with network.privateEndpoints "
                "(only Premium namespaces have private endpoints)"
            )
        if not self.dts.ip_allowlist and not self.network.nat_gateway:
            raise ValueError(
                "dts.ipAllowlist is empty and network.natGateway is off: the scheduler "
                "would deny every client, the engine included"
            )
        check_key_vault_name(self.vault_name, "keyVaultName" if self.key_vault_name else None)
        return self

    @property
    def vault_name(self) -> str:
        return self.key_vault_name or f"kv-{self.base_name}"

    @property
    def base_name(self) -> str:
        parts = [self.name_prefix, self.environment]
        if self.name_suffix:
            parts.append(self.name_suffix)
        return "-".join(parts)

    @property
    def compact_name(self) -> str:
        return self.base_name.replace("-", "")


_VAULT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]$")


def check_key_vault_name(name: str, key: str | None) -> str:
    """Azure's Key Vault name rules: 3-24 characters, letters, digits and '-',
    starting with a letter, ending with a letter or digit, no consecutive '-'."""
    if not _VAULT_NAME.match(name) or "--" in name:
        origin = key or "the default kv-<namePrefix>-<environment>[-<nameSuffix>]"
        raise ValueError(
            f"Key Vault name {name!r} ({origin}) must be 3-24 letters, digits and '-', "
            "start with a letter, end with a letter or digit and have no '--'; "
            "set stepway:keyVaultName"
        )
    return name


def _network(value: str, key: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{key}: {value!r} is not a CIDR range ({exc})") from exc


def _check_ip(value: str, key: str) -> str:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise ValueError(f"{key}: {value!r} is not an IPv4/IPv6 address or CIDR range") from exc
    return value


def _format(error: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid stack configuration"]
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"])
        key = f"{NAMESPACE}:{key}" if key else "(config)"
        if item["type"] == "extra_forbidden":
            message = "unknown configuration key"
        else:
            message = item["msg"].removeprefix("Value error, ")
        lines.append(f"  {key}: {message}")
    return "\n".join(lines)


def parse_stack_config(values: dict[str, Any], source: str = "stack config") -> StackConfig:
    """Validate the ``stepway`` namespace (keys without the prefix) plus location."""
    try:
        return StackConfig.model_validate(values)
    except ValidationError as exc:
        raise StackConfigError(_format(exc, source)) from exc


def _from_flat(flat: dict[str, Any], source: str) -> StackConfig:
    values: dict[str, Any] = {}
    for key, value in flat.items():
        namespace, _, name = key.partition(":")
        if namespace == NAMESPACE:
            values[name] = value
        elif key == "azure-native:location":
            values["location"] = value
    return parse_stack_config(values, source)


def load_stack_file(path: Path) -> StackConfig:
    """Read ``Pulumi.<stack>.yaml`` (plain values only) into a validated config."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return _from_flat(dict(data.get("config") or {}), str(path))


def from_pulumi_config() -> StackConfig:
    """Read the running stack's configuration (inside ``pulumi up``/``preview``)."""
    import json

    import pulumi.runtime
    from pulumi.runtime.config import CONFIG

    flat: dict[str, Any] = {}
    # Values arrive as strings; objects and lists as JSON text. Scalars stay
    # strings and pydantic converts them ("true" -> True, "2" -> 2).
    for key, raw in {**pulumi.runtime.get_config_env(), **CONFIG.get()}.items():
        if isinstance(raw, str) and raw.lstrip()[:1] in ("{", "["):
            try:
                flat[key] = json.loads(raw)
                continue
            except json.JSONDecodeError:
                pass
        flat[key] = raw
    return _from_flat(flat, f"stack {pulumi.get_stack()}")
