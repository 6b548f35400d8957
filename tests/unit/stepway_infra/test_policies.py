"""The policy pack: every rule against a resource that passes and one that fails, and
every rule over every resource the dev and prod stacks register."""

from __future__ import annotations

import copy
import importlib
import inspect
import runpy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi_policy
import pytest
from pulumi_policy.proxy import unknown_checking_proxy

from stepway_infra import policy_rules as rules
from stepway_infra import roles
from stepway_infra.mocks import StackResult, policy_props
from stepway_infra.policy_rules import StackResource

REPO = Path(__file__).resolve().parents[3]
SUB = "/subscriptions/00000000-0000-0000-0000-00000000aaaa"
RG = f"{SUB}/resourceGroups/rg-x"
ROLE_DEFINITIONS = f"{SUB}/providers/Microsoft.Authorization/roleDefinitions"
TAGS = {"stepway-environment": "dev", "stepway-production": "false", "managed-by": "pulumi"}


def violations_of(rule_name: str, props: Mapping[str, Any]) -> list[str]:
    (rule,) = [r for r in rules.RESOURCE_RULES if r.name == rule_name]
    found: list[str] = []
    rule.check(unknown_checking_proxy(copy.deepcopy(dict(props))), found.append)
    return found


def stack_violations(rule_name: str, resources: list[StackResource]) -> list[str]:
    (rule,) = [r for r in rules.STACK_RULES if r.name == rule_name]
    found: list[str] = []
    proxied = [
        StackResource(r.type, r.name, unknown_checking_proxy(dict(r.props))) for r in resources
    ]
    rule.check(proxied, lambda message, urn: found.append(message))
    return found


APP_OK: dict[str, Any] = {
    "identity": {"type": "UserAssigned", "userAssignedIdentities": [f"{RG}/id-a"]},
    "configuration": {
        "registries": [{"server": "acr.azurecr.io", "identity": f"{RG}/id-a"}],
        "secrets": [
            {
                "name": "key",
                "keyVaultUrl": "https://kv.vault.azure.net/secrets/key",
                "identity": "i",
            }
        ],
        "ingress": {"external": True, "allowInsecure": False, "targetPort": 8000},
    },
    "template": {
        "containers": [
            {
                "name": "cp",
                "probes": [
                    {"type": "Liveness", "httpGet": {"path": "/health", "port": 8000}},
                    {"type": "Readiness", "httpGet": {"path": "/health", "port": 8000}},
                ],
            }
        ],
        "scale": {
            "rules": [
                {
                    "name": "q",
                    "custom": {
                        "type": "azure-servicebus",
                        "identity": f"{RG}/id-a",
                        "metadata": {"namespace": "sb", "queueName": "q"},
                    },
                }
            ]
        },
    },
    "tags": {**TAGS, "stepway-component": "control-plane"},
}


def changed(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    result = copy.deepcopy(base)
    target = result
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    elif value is DELETE:
        del target[last]
    else:
        target[last] = value
    return result


DELETE = object()

# (rule, passing props, [(failing props, expected message part), ...])
CASES: list[tuple[str, dict[str, Any], list[tuple[dict[str, Any], str]]]] = [
    (
        "servicebus-identity-only",
        {"disableLocalAuth": True, "minimumTlsVersion": "1.2"},
        [
            ({"disableLocalAuth": False, "minimumTlsVersion": "1.2"}, "local (SAS)"),
            ({"disableLocalAuth": True, "minimumTlsVersion": "1.1"}, "1.2 or higher"),
        ],
    ),
    (
        "storage-locked-down",
        {
            "allowSharedKeyAccess": False,
            "allowBlobPublicAccess": False,
            "minimumTlsVersion": "TLS1_2",
            "enableHttpsTrafficOnly": True,
        },
        [
            ({"allowBlobPublicAccess": False, "minimumTlsVersion": "TLS1_2"}, "shared key"),
            (
                {
                    "allowSharedKeyAccess": False,
                    "allowBlobPublicAccess": True,
                    "minimumTlsVersion": "TLS1_2",
                },
                "public blob access",
            ),
            (
                {
                    "allowSharedKeyAccess": False,
                    "allowBlobPublicAccess": False,
                    "minimumTlsVersion": "TLS1_0",
                },
                "TLS1_2",
            ),
        ],
    ),
    ("blob-containers-private", {"publicAccess": "None"}, [({"publicAccess": "Blob"}, "'Blob'")]),
    (
        "postgres-entra-only",
        {"authConfig": {"passwordAuth": "Disabled", "activeDirectoryAuth": "Enabled"}},
        [
            (
                {"authConfig": {"passwordAuth": "Enabled", "activeDirectoryAuth": "Enabled"}},
                "password",
            ),
            (
                {
                    "authConfig": {"passwordAuth": "Disabled", "activeDirectoryAuth": "Enabled"},
                    "administratorLoginPassword": "x",
                },
                "no administrator password",
            ),
        ],
    ),
    (
        "postgres-no-open-firewall",
        {"startIpAddress": "203.0.113.10", "endIpAddress": "203.0.113.20"},
        [
            ({"startIpAddress": "0.0.0.0", "endIpAddress": "0.0.0.0"}, "every Azure tenant"),
            ({"startIpAddress": "10.0.0.0", "endIpAddress": "10.0.255.255"}, "wider than 256"),
        ],
    ),
    (
        "key-vault-rbac-purge-protection",
        {"properties": {"enableRbacAuthorization": True, "enablePurgeProtection": True}},
        [
            ({"properties": {"enablePurgeProtection": True}}, "Azure RBAC"),
            ({"properties": {"enableRbacAuthorization": True}}, "purge protection"),
        ],
    ),
    (
        "registry-no-admin-no-anonymous",
        {"adminUserEnabled": False, "anonymousPullEnabled": False},
        [
            ({"adminUserEnabled": True}, "admin user"),
            ({"anonymousPullEnabled": True}, "anonymous pull"),
        ],
    ),
    (
        "apps-user-assigned-identity",
        APP_OK,
        [
            (
                changed(APP_OK, "identity.type", "SystemAssigned, UserAssigned"),
                "user-assigned identities only",
            ),
            (changed(APP_OK, "identity", DELETE), "need a user-assigned identity"),
        ],
    ),
    (
        "apps-pull-by-identity",
        APP_OK,
        [
            (
                changed(
                    APP_OK,
                    "configuration.registries",
                    [{"server": "acr.azurecr.io", "username": "admin", "passwordSecretRef": "pw"}],
                ),
                "with an identity",
            )
        ],
    ),
    (
        "apps-secrets-from-key-vault",
        APP_OK,
        [
            (
                changed(APP_OK, "configuration.secrets", [{"name": "key", "value": "s3cret"}]),
                "Key Vault reference",
            ),
            (
                changed(
                    APP_OK,
                    "configuration.secrets",
                    [{"name": "key", "keyVaultUrl": "https://kv/secrets/k"}],
                ),
                "read with an identity",
            ),
            (
                changed(
                    APP_OK,
                    "template.containers",
                    [{"name": "act", "env": [{"name": "STEPWAY_SECRET_API", "value": "tok"}]}],
                ),
                "must come from a secret (secretRef)",
            ),
        ],
    ),
    (
        "apps-scale-rules-by-identity",
        APP_OK,
        [
            (
                changed(
                    APP_OK,
                    "template.scale.rules",
                    [
                        {
                            "name": "q",
                            "custom": {
                                "type": "azure-servicebus",
                                "metadata": {"queueName": "q", "connectionFromEnv": "SB"},
                            },
                        }
                    ],
                ),
                "connection string",
            ),
            (
                changed(
                    APP_OK,
                    "template.scale.rules",
                    [
                        {
                            "name": "q",
                            "custom": {
                                "type": "azure-servicebus",
                                "metadata": {"queueName": "q"},
                                "auth": [{"secretRef": "sb", "triggerParameter": "connection"}],
                            },
                        }
                    ],
                ),
                "not secrets",
            ),
        ],
    ),
    (
        "apps-ingress",
        APP_OK,
        [
            (changed(APP_OK, "configuration.ingress.allowInsecure", True), "insecure"),
            (changed(APP_OK, "tags", {**TAGS, "stepway-component": "worker"}), "no ingress"),
        ],
    ),
    (
        "dts-allowlist",
        {"properties": {"ipAllowlist": ["0.0.0.0/0"]}, "tags": TAGS},
        [
            ({"properties": {"ipAllowlist": []}, "tags": TAGS}, "empty"),
            (
                {
                    "properties": {"ipAllowlist": ["20.50.60.70", "0.0.0.0/0"]},
                    "tags": {**TAGS, "stepway-production": "true"},
                },
                "must not admit everyone",
            ),
        ],
    ),
    (
        "required-tags",
        {"tags": TAGS},
        [({"tags": {"stepway-environment": "dev"}}, "stepway-production, managed-by")],
    ),
    (
        "health-probes",
        APP_OK,
        [
            (
                changed(
                    APP_OK,
                    "template.containers.0.probes",
                    [{"type": "Liveness", "httpGet": {"path": "/health", "port": 8000}}],
                ),
                "without Readiness probes",
            )
        ],
    ),
]


def test_every_resource_rule_has_cases() -> None:
    assert sorted(name for name, _, _ in CASES) == sorted(r.name for r in rules.RESOURCE_RULES)


@pytest.mark.parametrize(("rule", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_resource_rule(
    rule: str, good: dict[str, Any], bad: list[tuple[dict[str, Any], str]]
) -> None:
    assert violations_of(rule, good) == []
    for props, expected in bad:
        found = violations_of(rule, props)
        assert found, f"{rule} accepted {props}"
        assert any(expected in message for message in found), found


def _assignment(
    name: str, role_id: str, scope: str = f"{RG}/providers/Microsoft.ServiceBus/namespaces/sb"
) -> StackResource:
    return StackResource(
        rules.ROLE_ASSIGNMENT,
        name,
        {
            "roleDefinitionId": f"{ROLE_DEFINITIONS}/{role_id}",
            "scope": scope,
        },
    )


def test_role_assignment_rule() -> None:
    custom = "6f1c2b8e-0000-5000-8000-000000000001"
    definition = StackResource(rules.ROLE_DEFINITION, "role", {"roleDefinitionId": custom})
    good = [
        definition,
        _assignment("receiver", roles.builtin_role_id(roles.SERVICE_BUS_DATA_RECEIVER)),
        _assignment("custom", custom),
    ]
    assert stack_violations("role-assignments", good) == []
    # Engine outputs name the custom role's GUID "name".
    as_outputs = [StackResource(rules.ROLE_DEFINITION, "role", {"name": custom}), good[2]]
    assert stack_violations("role-assignments", as_outputs) == []
    cases = [
        (_assignment("old-id", "4f6d3b9b-027b-4f4a-9142-0e5a2a2247e0"), "neither a built-in role"),
        (_assignment("owner", roles.builtin_role_id("Owner")), "'Owner' is never assigned"),
        (
            _assignment("data-owner", roles.builtin_role_id("Azure Service Bus Data Owner")),
            "'Azure Service Bus Data Owner' is never assigned",
        ),
        (
            _assignment("sub", roles.builtin_role_id(roles.ACR_PULL), SUB),
            "subscription or resource group",
        ),
        (
            _assignment("rg", roles.builtin_role_id(roles.ACR_PULL), RG),
            "subscription or resource group",
        ),
        (_assignment("custom-elsewhere", custom), "nor a custom role of this stack"),
    ]
    for resource, expected in cases:
        found = stack_violations("role-assignments", [resource])
        assert any(expected in message for message in found), (resource.name, found)


def test_diagnostics_rule() -> None:
    vault = StackResource(rules.KEY_VAULT, "keyvault", {"vaultName": "kv-x"})
    storage = StackResource(rules.STORAGE_ACCOUNT, "storage", {"accountName": "stx"})
    setting = lambda uri: StackResource(rules.DIAGNOSTIC_SETTING, "d", {"resourceUri": uri})  # noqa: E731
    vault_id = f"{RG}/providers/Microsoft.KeyVault/vaults/kv-x"
    storage_id = f"{RG}/providers/Microsoft.Storage/storageAccounts/stx"
    good = [vault, storage, setting(vault_id), setting(f"{storage_id}/blobServices/default")]
    assert stack_violations("diagnostics", good) == []
    # As outputs: the setting's id is under its resource, the vault's name is "name".
    outputs = [
        StackResource(rules.KEY_VAULT, "keyvault", {"name": "kv-x"}),
        StackResource(
            rules.DIAGNOSTIC_SETTING,
            "d",
            {"id": f"{vault_id}/providers/microsoft.insights/diagnosticSettings/to-log-analytics"},
        ),
    ]
    assert stack_violations("diagnostics", outputs) == []
    found = stack_violations("diagnostics", [vault, storage, setting(storage_id)])
    assert sorted(found) == [
        "keyvault: no diagnostic setting sends its logs to Log Analytics",
        "storage: no diagnostic setting sends its logs to Log Analytics",
    ]


@pytest.fixture(params=["dev_stack", "prod_stack", "dev_preview", "prod_preview"])
def registered(request: pytest.FixtureRequest) -> StackResult:
    return request.getfixturevalue(request.param)


def test_the_stacks_own_resources_pass_every_rule(registered: StackResult) -> None:
    resources = [
        StackResource(r.type, r.name, policy_props(r.inputs)) for r in registered.resources
    ]
    violations, skipped = rules.evaluate(resources)
    assert violations == []
    types = {r.type for r in registered.resources}
    # Every rule met its resources (the firewall rule type is absent on purpose).
    for rule in rules.RESOURCE_RULES:
        assert rule.types & types or rule.types == {rules.POSTGRES_FIREWALL_RULE}, rule.name
    if registered.resources[0].id:  # after deployment every value is known
        assert skipped == []


def test_tagged_types_are_the_taggable_types_the_program_creates(dev_stack, prod_stack) -> None:
    taggable = set()
    for resource in [*dev_stack.resources, *prod_stack.resources]:
        _, module, name = resource.type.split(":")
        cls = getattr(importlib.import_module(f"pulumi_azure_native.{module}"), name)
        if "tags" in inspect.signature(cls._internal_init).parameters:
            taggable.add(resource.type)
    assert taggable == set(rules.TAGGED_TYPES)


def test_build_policies_reports_through_pulumi_policy() -> None:
    policies = {p.name: p for p in rules.build_policies()}
    assert set(policies) == {r.name for r in rules.RESOURCE_RULES} | {
        r.name for r in rules.STACK_RULES
    }
    assert (
        policies["storage-locked-down"].enforcement_level
        == pulumi_policy.EnforcementLevel.MANDATORY
    )
    assert policies["health-probes"].enforcement_level == pulumi_policy.EnforcementLevel.ADVISORY
    reported: list[str] = []
    opts = pulumi_policy.PolicyResourceOptions(False, [], None, [], None, [])
    args = pulumi_policy.ResourceValidationArgs(
        rules.SERVICE_BUS_NAMESPACE,
        {"disableLocalAuth": False, "minimumTlsVersion": "1.2"},
        "urn",
        "sb",
        opts,
        None,
    )
    policies["servicebus-identity-only"].validate(
        args, lambda message, urn: reported.append(message)
    )
    assert reported == [
        "Service Bus local (SAS) authentication must be off (disableLocalAuth: true)"
    ]


def test_pack_main_only_builds_the_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    built: dict[str, Any] = {}
    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda **kwargs: built.update(kwargs))
    runpy.run_path(str(REPO / "policies" / "stepway-azure" / "__main__.py"), run_name="__main__")
    assert built["name"] == "stepway-azure"
    assert [p.name for p in built["policies"]] == [p.name for p in rules.build_policies()]
    assert (REPO / "policies" / "stepway-azure" / "PulumiPolicy.yaml").exists()
