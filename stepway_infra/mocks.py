"""Run the platform program under Pulumi mocks: no CLI, no Azure account.

Used by tests/unit/stepway_infra and the policy pack's tests.

Two mocks:

* :class:`PlainMocks` returns exactly the inputs it is given and fakes nothing: run
  as a preview (``run_stack(..., plain=True)``), every value Azure computes (ids,
  endpoints, host names, addresses) is unknown, as in the preview of a first
  ``pulumi up``. It proves the program composes those values with Output
  combinators only.
* :class:`Recorder` stands in for Azure after a deployment: besides the inputs it
  returns the read-only properties Azure would (endpoints, host names, client ids)
  in the documented shapes, so tests can assert on the values the apps receive.

``run_stack`` resets Pulumi's process-global settings, installs fresh mocks, runs
``stepway_infra.program.run`` and returns every registered custom resource (type
token, logical name, inputs as the provider receives them, id) and the stack
outputs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi.runtime
from pulumi.output import Unknown
from pulumi.runtime import settings as pulumi_settings

from stepway_infra.config import StackConfig
from stepway_infra.program import run
from workers.catalog import WorkerCatalogEntry

SUBSCRIPTION = "00000000-0000-0000-0000-00000000aaaa"
TENANT = "00000000-0000-0000-0000-00000000bbbb"
ENV_DOMAIN = "happy-sea-123.westeurope.azurecontainerapps.io"
NAT_IP = "20.50.60.70"
STACK_REFERENCE = "pulumi:pulumi:StackReference"


@dataclass
class Res:
    type: str
    name: str
    inputs: dict[str, Any]
    id: str
    parent: str = ""


@dataclass
class StackResult:
    resources: list[Res]
    outputs: dict[str, Any]
    config: StackConfig
    catalog: list[WorkerCatalogEntry]
    components: list[Res] = field(default_factory=list)
    #: Logical name -> logical names of its explicit ``depends_on``.
    depends_on: dict[str, set[str]] = field(default_factory=dict)
    #: Logical name -> logical name of its parent component ("" for the stack).
    parents: dict[str, str] = field(default_factory=dict)

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


#: ARM id shapes (provider path, name input) of the resources whose ids the tests
#: and the policy pack read.
_ARM_PATHS = {
    "azure-native:servicebus:Namespace": ("Microsoft.ServiceBus/namespaces", "namespaceName"),
    "azure-native:keyvault:Vault": ("Microsoft.KeyVault/vaults", "vaultName"),
    "azure-native:dbforpostgresql:Server": (
        "Microsoft.DBforPostgreSQL/flexibleServers",
        "serverName",
    ),
    "azure-native:containerregistry:Registry": (
        "Microsoft.ContainerRegistry/registries",
        "registryName",
    ),
    "azure-native:storage:StorageAccount": ("Microsoft.Storage/storageAccounts", "accountName"),
    "azure-native:app:ManagedEnvironment": ("Microsoft.App/managedEnvironments", "environmentName"),
}


def _resource_id(args: pulumi.runtime.MockResourceArgs) -> str:
    if args.typ in _ARM_PATHS:
        path, key = _ARM_PATHS[args.typ]
        return (
            f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/{path}/{args.inputs[key]}"
        )
    if args.typ == "azure-native:resources:ResourceGroup":
        return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{args.inputs['resourceGroupName']}"
    return (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/"
        f"{args.typ.split(':', 1)[-1]}/{args.name}"
    )


def _output_shape(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs in the provider's output shape: a list of user-assigned identity ids
    becomes the map keyed by id that the provider returns. No value is added."""
    state = copy.deepcopy(inputs)
    identity = state.get("identity")
    if isinstance(identity, dict) and isinstance(identity.get("userAssignedIdentities"), list):
        identity["userAssignedIdentities"] = {i: {} for i in identity["userAssignedIdentities"]}
    return state


def _computed(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """The read-only properties Azure returns, in their documented shapes."""
    state = _output_shape(inputs)
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
        state["defaultDomain"] = ENV_DOMAIN
    elif typ == "azure-native:app:ContainerApp":
        app_name = inputs["containerAppName"]
        state["name"] = app_name
        state["latestRevisionFqdn"] = f"{app_name}--rev1.{ENV_DOMAIN}"
        ingress = (state.get("configuration") or {}).get("ingress")
        if ingress:
            # Azure's stable host name: <app>.<domain>, or <app>.internal.<domain>.
            internal = "" if ingress.get("external") else "internal."
            ingress["fqdn"] = f"{app_name}.{internal}{ENV_DOMAIN}"
    elif typ == "azure-native:resources:ResourceGroup":
        state["name"] = inputs["resourceGroupName"]
    elif typ == "azure-native:network:PublicIPAddress":
        state["ipAddress"] = NAT_IP
    elif typ == "azure-native:network:VirtualNetwork":
        state["name"] = inputs["virtualNetworkName"]
    elif typ == "azure-native:network:PrivateEndpoint":
        state["name"] = inputs["privateEndpointName"]
    elif typ == "azure-native:privatedns:PrivateZone":
        state["name"] = inputs["privateZoneName"]
    elif typ == "azure-native:applicationinsights:Component":
        state["connectionString"] = (
            "InstrumentationKey=00000000-0000-0000-0000-0000000000cc;"
            "IngestionEndpoint=https://westeurope-5.in.applicationinsights.azure.com/"
        )
    return state


class _Recording(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[Res] = []
        self.components: list[Res] = []

    def _record(self, args: pulumi.runtime.MockResourceArgs, rid: str) -> None:
        res = Res(args.typ, args.name, copy.deepcopy(args.inputs), rid)
        if args.custom:
            self.resources.append(res)
        elif args.typ != STACK_REFERENCE:
            self.components.append(res)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]] | dict:
        if args.token == "azure-native:authorization:getClientConfig":
            return {
                "subscriptionId": SUBSCRIPTION,
                "tenantId": TENANT,
                "clientId": "deployer",
                "objectId": "deployer-object",
            }
        raise AssertionError(f"unexpected invoke {args.token}")


class Recorder(_Recording):
    """Azure after a deployment: inputs plus the properties Azure computes.

    ``previous_outputs`` are the outputs the stack's last deployment left (read by
    the deployStage guard through a StackReference)."""

    def __init__(self, previous_outputs: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.previous_outputs = previous_outputs or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        if args.typ == STACK_REFERENCE:
            return args.name, {**args.inputs, "outputs": dict(self.previous_outputs)}
        rid = _resource_id(args)
        self._record(args, rid)
        return rid, _computed(args.typ, args.name, args.inputs)


def has_unknown(value: Any) -> bool:
    """Whether a mocked input holds a value not known yet (anywhere inside)."""
    if isinstance(value, Unknown):
        return True
    if isinstance(value, dict):
        return any(has_unknown(item) for item in value.values())
    if isinstance(value, list):
        return any(has_unknown(item) for item in value)
    return False


def policy_props(value: Any) -> Any:
    """Inputs as the policy pack receives them: an unknown value is the engine's
    unknown sentinel."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    if isinstance(value, Unknown):
        return UNKNOWN_STRING_VALUE
    if isinstance(value, dict):
        return {key: policy_props(item) for key, item in value.items()}
    if isinstance(value, list):
        return [policy_props(item) for item in value]
    return value


def _without_unknowns(value: Any) -> Any:
    """Leave out what is not known: an unknown input is an unknown output."""
    if isinstance(value, dict):
        return {
            key: _without_unknowns(item)
            for key, item in value.items()
            if not has_unknown(item) or isinstance(item, dict)
        }
    return value


class PlainMocks(_Recording):
    """Returns the inputs and nothing else: no id, no computed property."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self._record(args, "")
        return "", _output_shape(_without_unknowns(args.inputs))


def run_stack(
    config: StackConfig,
    catalog: list[WorkerCatalogEntry],
    stack: str = "test",
    *,
    plain: bool = False,
    previous_outputs: dict[str, Any] | None = None,
) -> StackResult:
    """Run the program once. ``plain=True``: :class:`PlainMocks` in a preview."""
    preview = plain
    pulumi_settings.reset_options(project="stepway", stack=stack, preview=preview)
    mocks: _Recording = PlainMocks() if plain else Recorder(previous_outputs)
    pulumi.runtime.set_mocks(
        mocks, project="stepway", stack=stack, preview=preview, organization="organization"
    )
    result: dict[str, Any] = {}

    depends_on: dict[str, set[str]] = {}
    parents: dict[str, str] = {}

    def record_options(
        args: pulumi.ResourceTransformationArgs,
    ) -> pulumi.ResourceTransformationResult | None:
        deps = args.opts.depends_on if args.opts else None
        if isinstance(deps, pulumi.Resource):
            deps = [deps]
        depends_on[args.name] = {d._name for d in deps or [] if isinstance(d, pulumi.Resource)}
        parent = args.opts.parent if args.opts else None
        parents[args.name] = parent._name if isinstance(parent, pulumi.Resource) else ""
        return None

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        pulumi.runtime.register_stack_transformation(record_options)
        outputs = run(config, catalog)
        return pulumi.Output.from_input(outputs).apply(lambda resolved: result.update(resolved))

    program()
    return StackResult(
        mocks.resources, result, config, catalog, mocks.components, depends_on, parents
    )
