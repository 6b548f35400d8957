"""The rules of the Stepway policy pack (``policies/stepway-azure/``).

Plain functions over a resource's properties, so that they can be tested without
the Pulumi CLI; :func:`build_policies` wraps them as pulumi-policy policies.

* Resource rules see one resource's inputs (as the provider receives them, camelCase)
  and report each violation.
* Stack rules see every resource of the stack. The engine hands a stack policy the
  resources' outputs, where an azure-native path parameter such as ``vaultName`` is
  ``name``; they read both.

A value not known during a preview raises ``UnknownValueError`` when read through
the pack's proxy; the analyzer then skips the rule for that resource (it is checked
again at ``pulumi up``).

Mandatory rules block a deployment, advisory ones warn. The list, with why each
rule exists, is in docs/security.md ("Policy pack").
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stepway_infra import roles

Report = Callable[[str], None]
Level = Literal["mandatory", "advisory"]

T = "azure-native:"
SERVICE_BUS_NAMESPACE = f"{T}servicebus:Namespace"
STORAGE_ACCOUNT = f"{T}storage:StorageAccount"
BLOB_CONTAINER = f"{T}storage:BlobContainer"
POSTGRES_SERVER = f"{T}dbforpostgresql:Server"
POSTGRES_FIREWALL_RULE = f"{T}dbforpostgresql:FirewallRule"
KEY_VAULT = f"{T}keyvault:Vault"
REGISTRY = f"{T}containerregistry:Registry"
CONTAINER_APP = f"{T}app:ContainerApp"
JOB = f"{T}app:Job"
MANAGED_ENVIRONMENT = f"{T}app:ManagedEnvironment"
ROLE_ASSIGNMENT = f"{T}authorization:RoleAssignment"
ROLE_DEFINITION = f"{T}authorization:RoleDefinition"
SCHEDULER = f"{T}durabletask:Scheduler"
DIAGNOSTIC_SETTING = f"{T}monitor:DiagnosticSetting"

#: Tags every taggable resource carries (set by stepway_infra/program.py).
REQUIRED_TAGS = ("stepway-environment", "stepway-production", "managed-by")
#: The tag naming what a container app or job is (stepway_infra/components/apps.py).
COMPONENT_TAG = "stepway-component"

#: The resource types the program creates that accept tags.
#: tests/unit/stepway_infra/test_policies.py checks this against the azure-native classes.
TAGGED_TYPES = frozenset(
    f"{T}{token}"
    for token in (
        "resources:ResourceGroup",
        "managedidentity:UserAssignedIdentity",
        "durabletask:Scheduler",
        "servicebus:Namespace",
        "storage:StorageAccount",
        "keyvault:Vault",
        "containerregistry:Registry",
        "dbforpostgresql:Server",
        "operationalinsights:Workspace",
        "applicationinsights:Component",
        "app:ManagedEnvironment",
        "app:ContainerApp",
        "app:Job",
        "network:VirtualNetwork",
        "network:PublicIPAddress",
        "network:NatGateway",
        "network:PrivateEndpoint",
        "privatedns:PrivateZone",
        "privatedns:VirtualNetworkLink",
        "monitor:MetricAlert",
    )
)

#: Resources whose logs and metrics must reach Log Analytics, with the ARM path
#: segment of their id and, for storage, the sub-resource that has the logs.
DIAGNOSED = {
    KEY_VAULT: ("vaults", "vaultName", ""),
    SERVICE_BUS_NAMESPACE: ("namespaces", "namespaceName", ""),
    POSTGRES_SERVER: ("flexibleServers", "serverName", ""),
    REGISTRY: ("registries", "registryName", ""),
    STORAGE_ACCOUNT: ("storageAccounts", "accountName", "/blobServices/default"),
    MANAGED_ENVIRONMENT: ("managedEnvironments", "environmentName", ""),
}

_ANY = {"0.0.0.0/0", "::/0"}
_SUBSCRIPTION_SCOPE = re.compile(r"^/subscriptions/[^/]+/?$", re.IGNORECASE)
_RESOURCE_GROUP_SCOPE = re.compile(r"^/subscriptions/[^/]+/resourceGroups/[^/]+/?$", re.IGNORECASE)
_CONNECTION_KEYS = ("connection", "connectionfromenv", "connectionstring", "connectionstringname")


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    level: Level
    types: frozenset[str]
    check: Callable[[Mapping[str, Any], Report], None]


@dataclass(frozen=True)
class StackResource:
    type: str
    name: str
    props: Mapping[str, Any]
    urn: str = ""


StackReport = Callable[[str, str], None]


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    level: Level
    check: Callable[[list[StackResource], StackReport], None]


def _get(props: Mapping[str, Any], *path: str) -> Any:
    value: Any = props
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _items(value: Any) -> Iterable[Any]:
    """The elements of a list property (the pack hands lists over as Sequences)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return value
    return []


# -- mandatory resource rules ----------------------------------------------------------


def check_service_bus(props: Mapping[str, Any], report: Report) -> None:
    if props.get("disableLocalAuth") is not True:
        report("Service Bus local (SAS) authentication must be off (disableLocalAuth: true)")
    if props.get("minimumTlsVersion") not in ("1.2", "1.3"):
        report("Service Bus minimumTlsVersion must be 1.2 or higher")


def check_storage_account(props: Mapping[str, Any], report: Report) -> None:
    if props.get("allowSharedKeyAccess") is not False:
        report("storage shared key access must be off (allowSharedKeyAccess: false)")
    if props.get("allowBlobPublicAccess") is not False:
        report("storage public blob access must be off (allowBlobPublicAccess: false)")
    if props.get("minimumTlsVersion") not in ("TLS1_2", "TLS1_3"):
        report("storage minimumTlsVersion must be TLS1_2 or higher")
    if props.get("enableHttpsTrafficOnly") is False:
        report("storage must accept HTTPS only")


def check_blob_container(props: Mapping[str, Any], report: Report) -> None:
    if props.get("publicAccess") not in (None, "None"):
        report(f"blob container publicAccess must be None, not {props.get('publicAccess')!r}")


def check_postgres_server(props: Mapping[str, Any], report: Report) -> None:
    if _get(props, "authConfig", "passwordAuth") != "Disabled":
        report("PostgreSQL password authentication must be off (authConfig.passwordAuth)")
    if _get(props, "authConfig", "activeDirectoryAuth") != "Enabled":
        report("PostgreSQL must use Microsoft Entra authentication")
    if props.get("administratorLoginPassword") is not None:
        report("PostgreSQL must have no administrator password")


def check_postgres_firewall_rule(props: Mapping[str, Any], report: Report) -> None:
    start, end = props.get("startIpAddress"), props.get("endIpAddress")
    try:
        first, last = ipaddress.ip_address(start), ipaddress.ip_address(end)
    except (TypeError, ValueError):
        report(f"PostgreSQL firewall rule with an unreadable range {start!r}-{end!r}")
        return
    if str(first) == "0.0.0.0":
        report("PostgreSQL firewall rule starting at 0.0.0.0 admits every Azure tenant or all")
    elif int(last) - int(first) >= 256:
        report(f"PostgreSQL firewall rule {start}-{end} is wider than 256 addresses")


def check_key_vault(props: Mapping[str, Any], report: Report) -> None:
    if _get(props, "properties", "enableRbacAuthorization") is not True:
        report("Key Vault must use Azure RBAC (enableRbacAuthorization: true)")
    if _get(props, "properties", "enablePurgeProtection") is not True:
        report("Key Vault must have purge protection (enablePurgeProtection: true)")


def check_registry(props: Mapping[str, Any], report: Report) -> None:
    if props.get("adminUserEnabled") is True:
        report("container registry admin user must be off")
    if props.get("anonymousPullEnabled") is True:
        report("container registry anonymous pull must be off")


def check_app_identity(props: Mapping[str, Any], report: Report) -> None:
    identity = props.get("identity") or {}
    if identity.get("type") != "UserAssigned":
        report(f"apps and jobs use user-assigned identities only, not {identity.get('type')!r}")
    if not identity.get("userAssignedIdentities"):
        report("apps and jobs need a user-assigned identity")


def check_app_registries(props: Mapping[str, Any], report: Report) -> None:
    for registry in _items(_get(props, "configuration", "registries")):
        if not registry.get("identity"):
            report(f"registry {registry.get('server')!r} must be pulled with an identity")
        if registry.get("passwordSecretRef") or registry.get("username"):
            report(f"registry {registry.get('server')!r} must not use a username and password")


def check_app_secrets(props: Mapping[str, Any], report: Report) -> None:
    for secret in _items(_get(props, "configuration", "secrets")):
        if secret.get("value") is not None or not secret.get("keyVaultUrl"):
            report(f"secret {secret.get('name')!r} must be a Key Vault reference (keyVaultUrl)")
        elif not secret.get("identity"):
            report(f"secret {secret.get('name')!r} must be read with an identity")
    # the engine reads an HTTP task's secret from STEPWAY_SECRET_<NAME> (engine/runtime/
    # builtins/secrets.py): its value comes from a secret, never from the app's plain config
    for container in _items(_get(props, "template", "containers")):
        for variable in _items(container.get("env")):
            name = str(variable.get("name") or "")
            if (
                name.startswith("STEPWAY_SECRET_")
                and name != "STEPWAY_SECRET_HOSTS"
                and (variable.get("value") is not None or not variable.get("secretRef"))
            ):
                report(f"variable {name!r} must come from a secret (secretRef), not a value")


def _scale_rules(props: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for rule in _items(_get(props, "template", "scale", "rules")):
        for kind in ("custom", "azureQueue", "tcp"):
            if isinstance(rule.get(kind), Mapping):
                yield str(rule.get("name")), rule[kind]
    for rule in _items(_get(props, "configuration", "eventTriggerConfig", "scale", "rules")):
        yield str(rule.get("name")), rule


def check_app_scale_rules(props: Mapping[str, Any], report: Report) -> None:
    for name, rule in _scale_rules(props):
        if rule.get("auth"):
            report(f"scale rule {name!r} must authenticate with an identity, not secrets (auth)")
        metadata = rule.get("metadata") or {}
        if any(key.lower() in _CONNECTION_KEYS for key in metadata):
            report(f"scale rule {name!r} must not use a connection string")
        if not rule.get("identity"):
            report(f"scale rule {name!r} must authenticate with an identity")


def check_app_ingress(props: Mapping[str, Any], report: Report) -> None:
    ingress = _get(props, "configuration", "ingress")
    if not ingress:
        return
    if ingress.get("allowInsecure") is True:
        report("ingress must not allow insecure (HTTP) connections")
    if (props.get("tags") or {}).get(COMPONENT_TAG) == "worker":
        report("worker apps have no ingress: they poll the Task API")


def check_dts_allowlist(props: Mapping[str, Any], report: Report) -> None:
    allowlist = list(_items(_get(props, "properties", "ipAllowlist")))
    if not allowlist:
        report("the scheduler's IP allow-list is empty: it denies every client")
        return
    production = (props.get("tags") or {}).get("stepway-production") == "true"
    for entry in allowlist:
        try:
            network = str(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            report(f"IP allow-list entry {entry!r} is not an address or CIDR range")
            continue
        if production and network in _ANY:
            report(f"a production scheduler's IP allow-list must not admit everyone ({entry})")


def check_tags(props: Mapping[str, Any], report: Report) -> None:
    tags = props.get("tags") or {}
    missing = [tag for tag in REQUIRED_TAGS if not tags.get(tag)]
    if missing:
        report(f"missing required tags: {', '.join(missing)}")


# -- advisory resource rules -----------------------------------------------------------


def check_health_probes(props: Mapping[str, Any], report: Report) -> None:
    if not _get(props, "configuration", "ingress"):
        return
    for container in _items(_get(props, "template", "containers")):
        kinds = {probe.get("type") for probe in _items(container.get("probes"))}
        missing = [kind for kind in ("Liveness", "Readiness") if kind not in kinds]
        if missing:
            report(
                f"container {container.get('name')!r} serves HTTP without "
                f"{' and '.join(missing)} probes"
            )


# -- stack rules -----------------------------------------------------------------------


def _guid(role_definition_id: Any) -> str:
    return str(role_definition_id or "").rstrip("/").rsplit("/", 1)[-1].lower()


def check_role_assignments(resources: list[StackResource], report: StackReport) -> None:
    custom = {
        _guid(r.props.get("roleDefinitionId") or r.props.get("name"))
        for r in resources
        if r.type == ROLE_DEFINITION
    }
    snapshot = roles.snapshot()
    for r in resources:
        if r.type != ROLE_ASSIGNMENT:
            continue
        guid = _guid(r.props.get("roleDefinitionId"))
        name = snapshot.name_of(guid)
        if name is not None and roles.is_forbidden(name):
            report(f"{r.name}: role {name!r} is never assigned by this stack", r.urn)
        elif name is None and guid not in custom:
            report(
                f"{r.name}: role definition {guid} is neither a built-in role of the snapshot "
                "nor a custom role of this stack",
                r.urn,
            )
        scope = str(r.props.get("scope") or "")
        if _SUBSCRIPTION_SCOPE.match(scope) or _RESOURCE_GROUP_SCOPE.match(scope):
            report(f"{r.name}: role assignment at subscription or resource group scope", r.urn)


def _path(props: Mapping[str, Any]) -> str:
    return str(props.get("resourceUri") or props.get("id") or "").lower()


def check_diagnostics(resources: list[StackResource], report: StackReport) -> None:
    paths = [_path(r.props) for r in resources if r.type == DIAGNOSTIC_SETTING]
    for r in resources:
        if r.type not in DIAGNOSED:
            continue
        segment, name_key, sub = DIAGNOSED[r.type]
        name = r.props.get(name_key) or r.props.get("name")
        target = f"/{segment}/{name}{sub}".lower()
        if not any(
            path == target or path.endswith(target) or f"{target}/providers/" in path
            for path in paths
        ):
            report(f"{r.name}: no diagnostic setting sends its logs to Log Analytics", r.urn)


def _app_types() -> frozenset[str]:
    return frozenset({CONTAINER_APP, JOB})


RESOURCE_RULES: list[ResourceRule] = [
    ResourceRule(
        "servicebus-identity-only",
        "Service Bus: local (SAS) auth off, TLS 1.2 or higher.",
        "mandatory",
        frozenset({SERVICE_BUS_NAMESPACE}),
        check_service_bus,
    ),
    ResourceRule(
        "storage-locked-down",
        "Storage: shared keys off, public blob access off, TLS 1.2, HTTPS only.",
        "mandatory",
        frozenset({STORAGE_ACCOUNT}),
        check_storage_account,
    ),
    ResourceRule(
        "blob-containers-private",
        "Blob containers have no public access.",
        "mandatory",
        frozenset({BLOB_CONTAINER}),
        check_blob_container,
    ),
    ResourceRule(
        "postgres-entra-only",
        "PostgreSQL: password authentication off, Entra authentication on.",
        "mandatory",
        frozenset({POSTGRES_SERVER}),
        check_postgres_server,
    ),
    ResourceRule(
        "postgres-no-open-firewall",
        "PostgreSQL: no firewall rule from 0.0.0.0 (Azure services) or wider than 256 addresses.",
        "mandatory",
        frozenset({POSTGRES_FIREWALL_RULE}),
        check_postgres_firewall_rule,
    ),
    ResourceRule(
        "key-vault-rbac-purge-protection",
        "Key Vault: Azure RBAC authorization and purge protection.",
        "mandatory",
        frozenset({KEY_VAULT}),
        check_key_vault,
    ),
    ResourceRule(
        "registry-no-admin-no-anonymous",
        "Container registry: admin user and anonymous pull off.",
        "mandatory",
        frozenset({REGISTRY}),
        check_registry,
    ),
    ResourceRule(
        "apps-user-assigned-identity",
        "Container apps and jobs run with user-assigned identities only.",
        "mandatory",
        _app_types(),
        check_app_identity,
    ),
    ResourceRule(
        "apps-pull-by-identity",
        "Container apps and jobs pull images with an identity, never a password.",
        "mandatory",
        _app_types(),
        check_app_registries,
    ),
    ResourceRule(
        "apps-secrets-from-key-vault",
        "Container app and job secrets are Key Vault references only; STEPWAY_SECRET_* "
        "variables come from them.",
        "mandatory",
        _app_types(),
        check_app_secrets,
    ),
    ResourceRule(
        "apps-scale-rules-by-identity",
        "Scale rules authenticate with an identity, never a connection string or secret.",
        "mandatory",
        _app_types(),
        check_app_scale_rules,
    ),
    ResourceRule(
        "apps-ingress",
        "No insecure ingress; no ingress at all on worker apps.",
        "mandatory",
        frozenset({CONTAINER_APP}),
        check_app_ingress,
    ),
    ResourceRule(
        "dts-allowlist",
        "The scheduler's IP allow-list is never empty, and never admits everyone in production.",
        "mandatory",
        frozenset({SCHEDULER}),
        check_dts_allowlist,
    ),
    ResourceRule(
        "required-tags",
        f"Taggable resources carry the tags {', '.join(REQUIRED_TAGS)}.",
        "mandatory",
        TAGGED_TYPES,
        check_tags,
    ),
    ResourceRule(
        "health-probes",
        "Apps that serve HTTP have liveness and readiness probes.",
        "advisory",
        frozenset({CONTAINER_APP}),
        check_health_probes,
    ),
]

STACK_RULES: list[StackRule] = [
    StackRule(
        "role-assignments",
        "Role assignments name a built-in role of the snapshot (never Owner, Contributor, "
        "the access administrators or a Data Owner role) or a custom role of the stack, "
        "never at subscription or resource group scope.",
        "mandatory",
        check_role_assignments,
    ),
    StackRule(
        "diagnostics",
        "Key Vault, Service Bus, PostgreSQL, storage, the registry and the apps "
        "environment send their logs to Log Analytics.",
        "advisory",
        check_diagnostics,
    ),
]


def build_policies() -> list[Any]:
    """The rules as pulumi-policy policies (used by ``policies/stepway-azure``)."""
    from pulumi_policy import (
        EnforcementLevel,
        ResourceValidationArgs,
        ResourceValidationPolicy,
        StackValidationArgs,
        StackValidationPolicy,
    )

    def level(value: Level) -> EnforcementLevel:
        return EnforcementLevel.MANDATORY if value == "mandatory" else EnforcementLevel.ADVISORY

    def resource_validation(rule: ResourceRule) -> Callable[..., None]:
        def validate(args: ResourceValidationArgs, report_violation: Any) -> None:
            if args.resource_type in rule.types:
                rule.check(args.props, lambda message: report_violation(message, None))

        return validate

    def stack_validation(rule: StackRule) -> Callable[..., None]:
        def validate(args: StackValidationArgs, report_violation: Any) -> None:
            resources = [
                StackResource(r.resource_type, r.name, r.props, r.urn) for r in args.resources
            ]
            rule.check(resources, report_violation)

        return validate

    policies: list[Any] = [
        ResourceValidationPolicy(
            name=rule.name,
            description=rule.description,
            enforcement_level=level(rule.level),
            validate=resource_validation(rule),
        )
        for rule in RESOURCE_RULES
    ]
    policies += [
        StackValidationPolicy(
            name=rule.name,
            description=rule.description,
            enforcement_level=level(rule.level),
            validate=stack_validation(rule),
        )
        for rule in STACK_RULES
    ]
    return policies


@dataclass(frozen=True)
class Violation:
    rule: str
    level: Level
    resource: str
    message: str


def evaluate(resources: list[StackResource]) -> tuple[list[Violation], list[str]]:
    """Run every rule over ``resources`` as the analyzer does: props read through the
    pack's unknown-checking proxy, a rule that meets an unknown value skipped.
    Returns the violations and the ``rule: resource`` pairs skipped as unknown."""
    from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

    violations: list[Violation] = []
    skipped: list[str] = []
    proxied = [
        StackResource(r.type, r.name, unknown_checking_proxy(dict(r.props)), r.urn)
        for r in resources
    ]
    for rule in RESOURCE_RULES:
        for r in proxied:
            if r.type not in rule.types:
                continue
            try:
                rule.check(
                    r.props,
                    lambda message, rule=rule, r=r: violations.append(
                        Violation(rule.name, rule.level, r.name, message)
                    ),
                )
            except UnknownValueError:
                skipped.append(f"{rule.name}: {r.name}")
    for stack_rule in STACK_RULES:
        try:
            stack_rule.check(
                proxied,
                lambda message, _urn, rule=stack_rule: violations.append(
                    Violation(rule.name, rule.level, "", message)
                ),
            )
        except UnknownValueError:
            skipped.append(f"{stack_rule.name}: (stack)")
    return violations, skipped
