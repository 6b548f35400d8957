"""What is private and what is public, per stack (docs/deploy.md)."""

from __future__ import annotations

from typing import Any

from stepway_infra.mocks import NAT_IP, StackResult

T = "azure-native:"
APP = f"{T}app:ContainerApp"
JOB = f"{T}app:Job"


def _names(stack: StackResult, token: str) -> set[str]:
    return {r.name for r in stack.of_type(f"{T}{token}")}


def test_every_stack_has_a_vnet_with_delegated_subnets(dev_stack, prod_stack) -> None:
    for stack in (dev_stack, prod_stack):
        subnets = {r.name: r.inputs for r in stack.of_type(f"{T}network:Subnet")}
        assert subnets["snet-apps"]["delegations"] == [
            {"name": "apps", "serviceName": "Microsoft.App/environments"}
        ]
        assert subnets["snet-postgres"]["delegations"] == [
            {"name": "postgres", "serviceName": "Microsoft.DBforPostgreSQL/flexibleServers"}
        ]
        # Azure changes one subnet of a VNet at a time.
        assert stack.depends_on["snet-postgres"] == {"snet-apps"}


def test_apps_environment_uses_workload_profiles_in_the_vnet(dev_stack, prod_stack) -> None:
    for stack in (dev_stack, prod_stack):
        env = stack.one(f"{T}app:ManagedEnvironment").inputs
        apps_subnet = stack.one(f"{T}network:Subnet", "snet-apps").id
        (profile,) = env["workloadProfiles"]
        assert (profile["name"], profile["workloadProfileType"]) == ("Consumption", "Consumption")
        assert env["vnetConfiguration"] == {
            "infrastructureSubnetId": apps_subnet,
            "internal": False,
        }
        assert env["peerTrafficConfiguration"] == {"encryption": {"enabled": True}}
        assert env["zoneRedundant"] is stack.config.zone_redundant
        for resource in [*stack.of_type(APP), *stack.of_type(JOB)]:
            assert resource.inputs["workloadProfileName"] == "Consumption"
    assert prod_stack.config.zone_redundant is True
    assert dev_stack.config.zone_redundant is False


def test_prod_egress_is_the_nat_gateway_and_the_scheduler_admits_it(prod_stack) -> None:
    nat = prod_stack.one(f"{T}network:NatGateway").inputs
    ip = prod_stack.one(f"{T}network:PublicIPAddress")
    assert nat["publicIpAddresses"] == [{"id": ip.id}]
    assert ip.inputs["publicIPAllocationMethod"] == "Static"
    apps = prod_stack.one(f"{T}network:Subnet", "snet-apps").inputs
    assert apps["natGateway"] == {"id": prod_stack.one(f"{T}network:NatGateway").id}
    allowlist = prod_stack.one(f"{T}durabletask:Scheduler").inputs["properties"]["ipAllowlist"]
    assert allowlist == [NAT_IP]
    assert prod_stack.outputs["egressIp"] == NAT_IP


def test_dev_has_no_nat_gateway_and_no_private_endpoints(dev_stack) -> None:
    assert dev_stack.of_type(f"{T}network:NatGateway") == []
    assert dev_stack.of_type(f"{T}network:PrivateEndpoint") == []
    assert "egressIp" not in dev_stack.outputs
    assert dev_stack.one(f"{T}servicebus:Namespace").inputs["sku"]["name"] == "Standard"
    assert dev_stack.one(f"{T}servicebus:Namespace").inputs["publicNetworkAccess"] == "Enabled"
    vault = dev_stack.one(f"{T}keyvault:Vault").inputs["properties"]
    assert vault["publicNetworkAccess"] == "Enabled"


def test_prod_blob_key_vault_and_service_bus_are_behind_private_endpoints(prod_stack) -> None:
    endpoints = {r.name: r for r in prod_stack.of_type(f"{T}network:PrivateEndpoint")}
    targets = {
        "pe-blob": (f"{T}storage:StorageAccount", "blob", "privatelink.blob.core.windows.net"),
        "pe-keyvault": (f"{T}keyvault:Vault", "vault", "privatelink.vaultcore.azure.net"),
        "pe-servicebus": (
            f"{T}servicebus:Namespace",
            "namespace",
            "privatelink.servicebus.windows.net",
        ),
    }
    assert set(endpoints) == set(targets)
    subnet = prod_stack.one(f"{T}network:Subnet", "snet-private-endpoints").id
    zones = {
        r.inputs["privateZoneName"]: r for r in prod_stack.of_type(f"{T}privatedns:PrivateZone")
    }
    groups = {r.name: r.inputs for r in prod_stack.of_type(f"{T}network:PrivateDnsZoneGroup")}
    for name, (token, group, zone) in targets.items():
        inputs = endpoints[name].inputs
        assert inputs["subnet"] == {"id": subnet}
        (connection,) = inputs["privateLinkServiceConnections"]
        assert connection["privateLinkServiceId"] == prod_stack.one(token).id
        assert connection["groupIds"] == [group]
        (config,) = groups[f"{name}-dns"]["privateDnsZoneConfigs"]
        assert config["privateDnsZoneId"] == zones[zone].id
    namespace = prod_stack.one(f"{T}servicebus:Namespace").inputs
    assert namespace["sku"]["name"] == "Premium"
    assert namespace["publicNetworkAccess"] == "Disabled"
    vault = prod_stack.one(f"{T}keyvault:Vault").inputs["properties"]
    assert vault["publicNetworkAccess"] == "Disabled"
    assert vault["networkAcls"] == {"defaultAction": "Deny", "bypass": "None"}
    # Workers anywhere use signed payload URLs on the account's public endpoint.
    account = prod_stack.one(f"{T}storage:StorageAccount").inputs
    assert account["publicNetworkAccess"] == "Enabled"
    assert account["allowSharedKeyAccess"] is False


def test_postgres_has_private_access_only(dev_stack, prod_stack) -> None:
    for stack in (dev_stack, prod_stack):
        server = stack.one(f"{T}dbforpostgresql:Server")
        zone = next(
            r
            for r in stack.of_type(f"{T}privatedns:PrivateZone")
            if r.inputs["privateZoneName"].endswith(".private.postgres.database.azure.com")
        )
        assert server.inputs["network"] == {
            "delegatedSubnetResourceId": stack.one(f"{T}network:Subnet", "snet-postgres").id,
            "privateDnsZoneArmResourceId": zone.id,
            "publicNetworkAccess": "Disabled",
        }
        assert stack.of_type(f"{T}dbforpostgresql:FirewallRule") == []
        # The zone is linked to the VNet before the server is created in it.
        assert "dns-postgres-link" in stack.depends_on["postgres"]


def test_diagnostics_reach_log_analytics(dev_stack, prod_stack) -> None:
    for stack in (dev_stack, prod_stack):
        workspace = stack.one(f"{T}operationalinsights:Workspace").id
        settings = {
            r.inputs["resourceUri"]: r.inputs
            for r in stack.of_type(f"{T}monitor:DiagnosticSetting")
        }
        storage = stack.one(f"{T}storage:StorageAccount").id
        for uri in (
            stack.one(f"{T}keyvault:Vault").id,
            stack.one(f"{T}servicebus:Namespace").id,
            stack.one(f"{T}dbforpostgresql:Server").id,
            stack.one(f"{T}containerregistry:Registry").id,
            f"{storage}/blobServices/default",
            stack.one(f"{T}app:ManagedEnvironment").id,
        ):
            setting = settings[uri]
            assert setting["workspaceId"] == workspace
            assert setting["logs"] == [{"categoryGroup": "allLogs", "enabled": True}]


def test_application_insights_and_telemetry_settings(stack_pair) -> None:
    for stack in stack_pair:
        insights = stack.one(f"{T}applicationinsights:Component").inputs
        assert insights["disableLocalAuth"] is True
        assert insights["ingestionMode"] == "LogAnalytics"
        assert insights["workspaceResourceId"] == stack.one(f"{T}operationalinsights:Workspace").id
        services = set()
        for resource in [*stack.of_type(APP), *stack.of_type(JOB)]:
            (container,) = resource.inputs["template"]["containers"]
            env: dict[str, Any] = {i["name"]: i.get("value") for i in container["env"]}
            assert env["APPLICATIONINSIGHTS_CONNECTION_STRING"].startswith("InstrumentationKey=")
            assert (
                f"deployment.environment={stack.config.environment}"
                in env["OTEL_RESOURCE_ATTRIBUTES"]
            )
            services.add(env["OTEL_SERVICE_NAME"])
        assert {
            "stepway-control-plane",
            "stepway-engine-orchestrator",
            "stepway-engine-activity",
            "stepway-worker-document",
        } <= services


def test_engine_health_signal(dev_stack) -> None:
    alerts = {r.name: r.inputs for r in dev_stack.of_type(f"{T}monitor:MetricAlert")}
    assert set(alerts) == {"alert-orch-restarts", "alert-orch-no-replica", "alert-act-restarts"}
    orch = dev_stack.one(APP, "app-orch").id
    (criterion,) = alerts["alert-orch-no-replica"]["criteria"]["allOf"]
    assert alerts["alert-orch-no-replica"]["scopes"] == [orch]
    assert (criterion["metricName"], criterion["operator"], criterion["threshold"]) == (
        "Replicas",
        "LessThan",
        1,
    )


def test_production_data_stores_cannot_be_deleted(dev_stack, prod_stack) -> None:
    assert dev_stack.of_type(f"{T}authorization:ManagementLockByScope") == []
    locks = {
        r.inputs["scope"]: r.inputs
        for r in prod_stack.of_type(f"{T}authorization:ManagementLockByScope")
    }
    for token in (
        "storage:StorageAccount",
        "keyvault:Vault",
        "dbforpostgresql:Server",
        "servicebus:Namespace",
        "durabletask:Scheduler",
    ):
        assert locks[prod_stack.one(f"{T}{token}").id]["level"] == "CanNotDelete", token
    assert len(locks) == 5


def test_program_is_a_tree_of_components(dev_stack) -> None:
    assert {c.type for c in dev_stack.components} == {
        f"stepway:platform:{kind}"
        for kind in (
            "Network",
            "Observability",
            "Hosting",
            "Data",
            "Messaging",
            "Engine",
            "ControlPlane",
            "WorkerArea",
        )
    }
    assert {c.name for c in dev_stack.components if c.type.endswith("WorkerArea")} == {
        "worker-document",
        "worker-connector",
        "worker-data-platform",
    }
    assert dev_stack.parents["app-worker-document"] == "worker-document"
    assert dev_stack.parents["postgres"] == "data"
    # Only the resource group sits directly under the stack.
    top = {name for name, parent in dev_stack.parents.items() if parent == ""}
    assert {r.name for r in dev_stack.resources if r.name in top} == {"rg"}
