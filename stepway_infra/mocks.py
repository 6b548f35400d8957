"""Run the platform program under Pulumi mocks: no CLI, no Azure account.

Used by tests/infra and reusable by the policy pack's tests.

``run_stack(config, catalog)`` resets Pulumi's process-global settings, installs
fresh mocks, runs ``stepway_infra.program.run`` and returns every registered
resource (type token, logical name, resolved inputs) and the stack outputs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.runtime
from pulumi.runtime import settings as pulumi_settings

from stepway_infra.config import StackConfig
from stepway_infra.program import run
from workers.catalog import WorkerCatalogEntry

SUBSCRIPTION = "00000000-0000-0000-0000-00000000aaaa"
TENANT = "00000000-0000-0000-0000-00000000bbbb"


@dataclass
class Res:
    type: str
    name: str
    inputs: dict[str, Any]
    id: str


@dataclass
class StackResult:
    resources: list[Res]
    outputs: dict[str, Any]
    config: StackConfig
    catalog: list[WorkerCatalogEntry]

    def of_type(self, token: str) -> list[Res]:
        return [r for r in self.resources if r.type == token]

    def one(self, token: str, name: str | None = None) -> Res:
        found = [r for r in self.of_type(token) if name is None or r.name == name]
        assert len(found) == 1, f"expected one {token} {name or ''}, found {len(found)}"
        return found[0]

    def by_name(self, name: str) -> Res:
        found = [r for r in self.resources if r.name == name]
        assert len(found) == 1, f"expected one resource named {name}, found {len(found)}"
        return found[0]


def _computed(typ: str, name: str, inputs: dict[str, Any], rid: str) -> dict[str, Any]:
    """Fake the read-only properties Azure would return."""
    state = copy.deepcopy(inputs)
    identity = state.get("identity")
    if isinstance(identity, dict) and isinstance(identity.get("userAssignedIdentities"), list):
        # Input is a list of ids, the returned state a map keyed by id.
        identity["userAssignedIdentities"] = {i: {} for i in identity["userAssignedIdentities"]}
    if typ == "azure-native:managedidentity:UserAssignedIdentity":
        state["clientId"] = f"client-{name}"
        state["principalId"] = f"principal-{name}"
        state["tenantId"] = TENANT
        state["name"] = inputs.get("resourceName", name)
    elif typ == "azure-native:durabletask:Scheduler":
        props = dict(state.get("properties") or {})
        props["endpoint"] = f"https://{inputs['schedulerName']}.westeurope.durabletask.io"
        state["properties"] = props
        state["name"] = inputs["schedulerName"]
    elif typ == "azure-native:durabletask:TaskHub":
        state["name"] = inputs["taskHubName"]
        state["properties"] = {"dashboardUrl": f"https://dashboard.durabletask.io/{name}"}
    elif typ == "azure-native:servicebus:Namespace":
        state["name"] = inputs["namespaceName"]
    elif typ == "azure-native:storage:StorageAccount":
        state["name"] = inputs["accountName"]
        state["primaryEndpoints"] = {
            "blob": f"https://{inputs['accountName']}.blob.core.windows.net/"
        }
    elif typ == "azure-native:containerregistry:Registry":
        state["name"] = inputs["registryName"]
        state["loginServer"] = f"{inputs['registryName']}.azurecr.io"
    elif typ == "azure-native:keyvault:Vault":
        state["name"] = inputs["vaultName"]
        props = dict(state.get("properties") or {})
        props["vaultUri"] = f"https://{inputs['vaultName']}.vault.azure.net/"
        state["properties"] = props
    elif typ == "azure-native:dbforpostgresql:Server":
        state["name"] = inputs["serverName"]
        state["fullyQualifiedDomainName"] = f"{inputs['serverName']}.postgres.database.azure.com"
    elif typ == "azure-native:app:ManagedEnvironment":
        state["name"] = inputs["environmentName"]
        state["defaultDomain"] = "happy-sea-123.westeurope.azurecontainerapps.io"
    elif typ == "azure-native:app:ContainerApp":
        state["name"] = inputs["containerAppName"]
        state["latestRevisionFqdn"] = (
            f"{inputs['containerAppName']}.happy-sea-123.westeurope.azurecontainerapps.io"
        )
    elif typ == "azure-native:resources:ResourceGroup":
        state["name"] = inputs["resourceGroupName"]
    return state


class Recorder(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[Res] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        rid = (
            f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/"
            f"{args.typ.split(':', 1)[-1]}/{args.name}"
        )
        if args.typ == "azure-native:servicebus:Namespace":
            rid = (
                f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/"
                f"Microsoft.ServiceBus/namespaces/{args.inputs['namespaceName']}"
            )
        self.resources.append(Res(args.typ, args.name, copy.deepcopy(args.inputs), rid))
        return rid, _computed(args.typ, args.name, args.inputs, rid)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]] | dict:
        if args.token == "azure-native:authorization:getClientConfig":
            return {
                "subscriptionId": SUBSCRIPTION,
                "tenantId": TENANT,
                "clientId": "deployer",
                "objectId": "deployer-object",
            }
        raise AssertionError(f"unexpected invoke {args.token}")


def run_stack(
    config: StackConfig, catalog: list[WorkerCatalogEntry], stack: str = "test"
) -> StackResult:
    pulumi_settings.reset_options(project="stepway", stack=stack, preview=False)
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="stepway", stack=stack, preview=False)
    result: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        outputs = run(config, catalog)
        return pulumi.Output.from_input(outputs).apply(lambda resolved: result.update(resolved))

    program()
    return StackResult(recorder.resources, result, config, catalog)
