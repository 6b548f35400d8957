"""The platform program under Pulumi mocks, for the dev and prod example stacks."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from stepway_infra import roles
from stepway_infra.mocks import ENV_DOMAIN, SUBSCRIPTION, StackResult, run_stack
from stepway_infra.program import WORKER_IDENTITIES_ENV, assignment_name
from workers.catalog import entry_queues, load_catalog

T = "azure-native:"
RG = f"{T}resources:ResourceGroup"
IDENTITY = f"{T}managedidentity:UserAssignedIdentity"
RA = f"{T}authorization:RoleAssignment"
ROLE_DEF = f"{T}authorization:RoleDefinition"
APP = f"{T}app:ContainerApp"
JOB = f"{T}app:Job"
ROLE_ID = re.compile(
    r"^/subscriptions/[0-9a-f-]{36}/providers/Microsoft\.Authorization/roleDefinitions/"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


@pytest.fixture(params=["dev", "prod"])
def stack(request: pytest.FixtureRequest) -> StackResult:
    return request.getfixturevalue(f"{request.param}_stack")


# -- helpers -------------------------------------------------------------------


def role_id(guid: str) -> str:
    return f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/{guid}"


def identity_of(stack: StackResult, key: str) -> Any:
    return stack.one(IDENTITY, f"id-{key}")


def grants(stack: StackResult, key: str) -> set[tuple[str, str]]:
    """(role name, scope) of every role assignment of an identity: the name of the
    built-in role in the snapshot, or the GUID of a custom role."""
    principal = f"principal-id-{key}"
    snapshot = roles.snapshot()
    result = set()
    for ra in stack.of_type(RA):
        if ra.inputs["principalId"] != principal:
            continue
        guid = ra.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
        result.add((snapshot.name_of(guid) or guid, ra.inputs["scope"]))
    return result


def runtime(i: dict[str, str]) -> set[tuple[str, str]]:
    """What every app identity holds to start: AcrPull and telemetry publishing."""
    return {(roles.ACR_PULL, i["registry"]), (roles.MONITORING_METRICS_PUBLISHER, i["insights"])}


def ids(stack: StackResult) -> dict[str, str]:
    sb = stack.one(f"{T}servicebus:Namespace")
    return {
        "taskhub": stack.one(f"{T}durabletask:TaskHub").id,
        "namespace": sb.id,
        "container": stack.one(f"{T}storage:BlobContainer").id,
        "storage": stack.one(f"{T}storage:StorageAccount").id,
        "registry": stack.one(f"{T}containerregistry:Registry").id,
        "vault": stack.one(f"{T}keyvault:Vault").id,
        "insights": stack.one(f"{T}applicationinsights:Component").id,
        "rg": stack.one(RG).id,
    }


def worker_resource(stack: StackResult, area: str) -> Any:
    found = [r for r in stack.resources if r.name in (f"app-worker-{area}", f"job-{area}")]
    assert len(found) == 1
    return found[0]


def env_of(resource: Any) -> dict[str, Any]:
    template = resource.inputs["template"]
    (container,) = template["containers"]
    return {item["name"]: item.get("value", item.get("secretRef")) for item in container["env"]}


# -- every resource exists with its security settings -------------------------


def test_every_platform_resource_exists(stack: StackResult) -> None:
    for token in (
        RG,
        f"{T}durabletask:Scheduler",
        f"{T}durabletask:TaskHub",
        f"{T}durabletask:RetentionPolicy",
        f"{T}servicebus:Namespace",
        f"{T}storage:StorageAccount",
        f"{T}storage:BlobContainer",
        f"{T}storage:ManagementPolicy",
        f"{T}dbforpostgresql:Server",
        f"{T}dbforpostgresql:Database",
        f"{T}operationalinsights:Workspace",
        f"{T}applicationinsights:Component",
        f"{T}app:ManagedEnvironment",
        f"{T}containerregistry:Registry",
        f"{T}keyvault:Vault",
        f"{T}network:VirtualNetwork",
        ROLE_DEF,
    ):
        stack.one(token)
    assert {r.name for r in stack.of_type(f"{T}monitor:DiagnosticSetting")} == {
        "diag-keyvault",
        "diag-servicebus",
        "diag-postgres",
        "diag-storage-blob",
        "diag-registry",
        "diag-apps-env",
    }
    assert {r.name for r in stack.of_type(APP)} == {
        "app-orch",
        "app-act",
        "app-cp",
        "app-worker-document",
        "app-worker-connector",
    }
    assert {r.name for r in stack.of_type(JOB)} == {"job-data_platform"}
    # One user-assigned identity per app.
    assert {r.name for r in stack.of_type(IDENTITY)} == {
        "id-engine-orchestrator",
        "id-engine-activity",
        "id-control-plane",
        "id-worker-document",
        "id-worker-connector",
        "id-worker-data-platform",
    }


def test_naming_and_tags_come_from_config(stack: StackResult) -> None:
    base = stack.config.base_name
    rg = stack.one(RG)
    assert rg.inputs["resourceGroupName"] == f"rg-{base}"
    assert rg.inputs["location"] == stack.config.location
    for resource in stack.resources:
        tags = resource.inputs.get("tags")
        if tags is not None:
            assert tags["stepway-environment"] == stack.config.environment
            assert tags["stepway-production"] == str(stack.config.production).lower()
            for key, value in stack.config.tags.items():
                assert tags[key] == value
    assert stack.one(APP, "app-cp").inputs["containerAppName"] == f"{base}-cp"


def test_durable_task_scheduler(stack: StackResult) -> None:
    dts = stack.config.dts
    props = stack.one(f"{T}durabletask:Scheduler").inputs["properties"]
    nat = [stack.outputs["egressIp"]] if stack.config.network.nat_gateway else []
    assert props["ipAllowlist"] == [*dts.ip_allowlist, *nat]
    assert props["sku"]["name"] == dts.sku
    assert props["sku"].get("capacity") == dts.capacity
    hub = stack.one(f"{T}durabletask:TaskHub").inputs
    assert hub["taskHubName"] == dts.task_hub_name
    policies = stack.one(f"{T}durabletask:RetentionPolicy").inputs["properties"]
    days = {
        p["orchestrationState"]: p["retentionPeriodInDays"] for p in policies["retentionPolicies"]
    }
    assert days == {
        "Completed": dts.retention.completed_days,
        "Terminated": dts.retention.completed_days,
        "Failed": dts.retention.failed_days,
        "Canceled": dts.retention.failed_days,
    }


def test_service_bus_identity_only(stack: StackResult) -> None:
    sb = stack.one(f"{T}servicebus:Namespace").inputs
    assert sb["disableLocalAuth"] is True
    assert sb["minimumTlsVersion"] == "1.2"
    assert sb["sku"]["name"] == stack.config.service_bus.sku


def test_prod_service_bus_is_premium(prod_stack: StackResult) -> None:
    sb = prod_stack.one(f"{T}servicebus:Namespace").inputs
    assert sb["sku"] == {"name": "Premium", "tier": "Premium", "capacity": 1}


def test_storage_no_public_access_no_shared_keys(stack: StackResult) -> None:
    st = stack.one(f"{T}storage:StorageAccount").inputs
    assert st["allowBlobPublicAccess"] is False
    assert st["allowSharedKeyAccess"] is False
    assert st["minimumTlsVersion"] == "TLS1_2"
    assert st["enableHttpsTrafficOnly"] is True
    assert st["defaultToOAuthAuthentication"] is True
    container = stack.one(f"{T}storage:BlobContainer").inputs
    assert container["publicAccess"] == "None"
    assert container["containerName"] == stack.config.storage.payload_container
    (rule,) = stack.one(f"{T}storage:ManagementPolicy").inputs["policy"]["rules"]
    assert rule["enabled"] is True
    definition = rule["definition"]
    assert definition["filters"]["prefixMatch"] == [f"{stack.config.storage.payload_container}/"]
    delete = definition["actions"]["baseBlob"]["delete"]
    assert delete["daysAfterModificationGreaterThan"] == stack.config.storage.payload_retention_days


def test_postgres_entra_only_with_engine_and_control_plane_users(stack: StackResult) -> None:
    server = stack.one(f"{T}dbforpostgresql:Server").inputs
    assert server["authConfig"]["activeDirectoryAuth"] == "Enabled"
    assert server["authConfig"]["passwordAuth"] == "Disabled"
    assert "administratorLogin" not in server
    assert "administratorLoginPassword" not in server
    assert stack.of_type(f"{T}dbforpostgresql:FirewallRule") == []
    # The GA administrator resource, one per identity that uses the run store.
    assert stack.of_type(f"{T}dbforpostgresql:Administrator") == []
    admins = stack.of_type(f"{T}dbforpostgresql:AdministratorsMicrosoftEntra")
    assert {a.inputs["objectId"] for a in admins} == {
        "principal-id-engine-orchestrator",
        "principal-id-engine-activity",
        "principal-id-control-plane",
    }
    assert all(a.inputs["principalType"] == "ServicePrincipal" for a in admins)


def test_registry_and_key_vault(stack: StackResult) -> None:
    registry = stack.one(f"{T}containerregistry:Registry").inputs
    assert registry["adminUserEnabled"] is False
    assert registry["anonymousPullEnabled"] is False
    vault = stack.one(f"{T}keyvault:Vault").inputs["properties"]
    assert vault["enableRbacAuthorization"] is True
    assert vault["enablePurgeProtection"] is True
    assert vault["accessPolicies"] == []


def test_every_app_pulls_with_its_own_identity(stack: StackResult) -> None:
    registry = f"{stack.one(f'{T}containerregistry:Registry').inputs['registryName']}.azurecr.io"
    identities = {r.id for r in stack.of_type(IDENTITY)}
    seen = set()
    for resource in [*stack.of_type(APP), *stack.of_type(JOB)]:
        inputs = resource.inputs
        (assigned,) = inputs["identity"]["userAssignedIdentities"]
        assert inputs["identity"]["type"] == "UserAssigned"
        assert assigned in identities
        assert assigned not in seen, "identities are not shared between apps"
        seen.add(assigned)
        (reg,) = inputs["configuration"]["registries"]
        assert reg == {"server": registry, "identity": assigned}
        (container,) = inputs["template"]["containers"]
        assert container["image"].startswith(f"{registry}/")
        env = env_of(resource)
        client = stack.by_name(assigned.rsplit("/", 1)[-1])
        assert env["AZURE_CLIENT_ID"] == f"client-{client.name}"


# -- engine ----------------------------------------------------------------------


def test_engine_split_by_work_item_filtering(stack: StackResult) -> None:
    endpoint = f"https://dts-{stack.config.base_name}.westeurope.durabletask.io"
    orch = stack.one(APP, "app-orch").inputs
    act = stack.one(APP, "app-act").inputs
    assert orch["template"]["scale"]["minReplicas"] >= 1
    assert orch["template"]["scale"]["minReplicas"] == stack.config.engine.orchestrator.min_replicas
    assert act["template"]["scale"]["minReplicas"] == 0
    assert orch["configuration"].get("ingress") is None
    assert act["configuration"].get("ingress") is None
    for inputs, kind, key in (
        (orch, "Orchestration", "orchestrator"),
        (act, "Activity", "activity"),
    ):
        (rule,) = inputs["template"]["scale"]["rules"]
        custom = rule["custom"]
        assert custom["type"] == "azure-durabletask-scheduler"
        assert custom["metadata"]["workItemType"] == kind
        assert custom["metadata"]["endpoint"] == endpoint
        assert custom["metadata"]["taskhubName"] == stack.config.dts.task_hub_name
        assert custom["identity"] == identity_of(stack, f"engine-{key}").id
    assert env_of(stack.one(APP, "app-orch"))["STEPWAY_ENGINE_ROLE"] == "orchestrator"
    assert env_of(stack.one(APP, "app-act"))["STEPWAY_ENGINE_ROLE"] == "activity"


def test_engine_roles(stack: StackResult) -> None:
    i = ids(stack)
    assert grants(stack, "engine-orchestrator") == {
        (roles.DURABLE_TASK_WORKER, i["taskhub"]),
        (roles.STORAGE_BLOB_DATA_READER, i["container"]),
        *runtime(i),
    }
    assert grants(stack, "engine-activity") == {
        (roles.DURABLE_TASK_WORKER, i["taskhub"]),
        (roles.SERVICE_BUS_DATA_SENDER, i["namespace"]),
        (roles.STORAGE_BLOB_DATA_CONTRIBUTOR, i["container"]),
        *runtime(i),
    }


# -- control plane -----------------------------------------------------------


def test_control_plane_app(stack: StackResult) -> None:
    cp = stack.one(APP, "app-cp").inputs
    ingress = cp["configuration"]["ingress"]
    assert ingress["external"] is True
    assert ingress["allowInsecure"] is False
    assert ingress["targetPort"] == stack.config.control_plane.target_port
    assert cp["template"]["scale"]["minReplicas"] == stack.config.control_plane.min_replicas
    # The app's stable host name (configuration.ingress.fqdn), not a revision's.
    url = f"https://{stack.config.base_name}-cp.{ENV_DOMAIN}"
    assert stack.outputs["controlPlaneUrl"] == url
    for resource in [*stack.of_type(APP), *stack.of_type(JOB)]:
        if resource.name.startswith(("app-worker-", "job-")):
            assert env_of(resource)["STEPWAY_SERVER_URL"] == url


def test_internal_ingress_gives_workers_the_internal_host_name(dev_config, repo_catalog) -> None:
    config = dev_config.model_copy(
        update={
            "control_plane": dev_config.control_plane.model_copy(update={"external_ingress": False})
        }
    )
    result = run_stack(config, repo_catalog)
    url = f"https://{config.base_name}-cp.internal.{ENV_DOMAIN}"
    assert result.outputs["controlPlaneUrl"] == url
    assert env_of(worker_resource(result, "document"))["STEPWAY_SERVER_URL"] == url


def test_control_plane_probes_its_health_endpoint(stack: StackResult) -> None:
    (container,) = stack.one(APP, "app-cp").inputs["template"]["containers"]
    probes = {p["type"]: p["httpGet"] for p in container["probes"]}
    port = stack.config.control_plane.target_port
    assert probes == {
        "Liveness": {"path": "/health", "port": port, "scheme": "HTTP"},
        "Readiness": {"path": "/health", "port": port, "scheme": "HTTP"},
    }


def test_prod_control_plane_runs_at_least_two_replicas(prod_stack: StackResult) -> None:
    cp = prod_stack.one(APP, "app-cp").inputs
    assert cp["template"]["scale"]["minReplicas"] >= 2


def test_control_plane_roles(stack: StackResult) -> None:
    i = ids(stack)
    custom = stack.one(ROLE_DEF).inputs
    assert grants(stack, "control-plane") == {
        (roles.DURABLE_TASK_DATA_CONTRIBUTOR, i["taskhub"]),
        (roles.SERVICE_BUS_DATA_RECEIVER, i["namespace"]),
        (roles.SERVICE_BUS_DATA_SENDER, i["namespace"]),
        (custom["roleDefinitionId"], i["namespace"]),
        (roles.STORAGE_BLOB_DATA_CONTRIBUTOR, i["container"]),
        (roles.STORAGE_BLOB_DELEGATOR, i["storage"]),
        *runtime(i),
    }


def test_queue_manager_role_is_narrow(stack: StackResult) -> None:
    custom = stack.one(ROLE_DEF).inputs
    assert custom["roleType"] == "CustomRole"
    (permission,) = custom["permissions"]
    assert permission["actions"] == [
        "Microsoft.ServiceBus/namespaces/read",
        "Microsoft.ServiceBus/namespaces/queues/read",
        "Microsoft.ServiceBus/namespaces/queues/write",
    ]
    assert permission["dataActions"] == []
    assert custom["assignableScopes"] == [ids(stack)["rg"]]
    uuid.UUID(custom["roleDefinitionId"])


def test_control_plane_gets_worker_identity_map(stack: StackResult) -> None:
    mapping = json.loads(env_of(stack.one(APP, "app-cp"))[WORKER_IDENTITIES_ENV])
    assert mapping == {
        "client-id-worker-document": ["parse_pdf", "extract_excel", "classify_document"],
        "client-id-worker-data-platform": ["reconcile_ledger", "bulk_export"],
        "client-id-worker-connector": ["fetch_bank_feed", "lodge_return"],
    }


# -- workers ---------------------------------------------------------------------


def test_worker_apps_scale_on_exactly_their_queues(stack: StackResult) -> None:
    namespace = stack.one(f"{T}servicebus:Namespace").inputs["namespaceName"]
    for entry in stack.catalog:
        resource = worker_resource(stack, entry.name)
        ident = identity_of(stack, f"worker-{entry.name.replace('_', '-')}")
        if entry.job:
            config = resource.inputs["configuration"]
            assert config["triggerType"] == "Event"
            scale = config["eventTriggerConfig"]["scale"]
            assert scale["minExecutions"] == 0
            rules = [
                {"type": r["type"], "identity": r["identity"], "metadata": r["metadata"]}
                for r in scale["rules"]
            ]
        else:
            assert resource.inputs["configuration"].get("ingress") is None
            rules = [r["custom"] for r in resource.inputs["template"]["scale"]["rules"]]
            assert all(
                set(r) == {"name", "custom"} for r in resource.inputs["template"]["scale"]["rules"]
            )
        assert len(rules) == len(entry_queues(entry))
        assert sorted(r["metadata"]["queueName"] for r in rules) == sorted(entry_queues(entry))
        for rule in rules:
            assert rule["type"] == "azure-servicebus"
            assert rule["identity"] == ident.id
            assert rule["metadata"]["namespace"] == namespace
            assert "connectionFromEnv" not in rule["metadata"]
            assert "auth" not in rule


def test_worker_replicas_per_stack(dev_stack: StackResult, prod_stack: StackResult) -> None:
    def scale(stack: StackResult, area: str) -> dict[str, Any]:
        return worker_resource(stack, area).inputs["template"]["scale"]

    # Dev: zero when idle. Prod: at least two replicas (docs/architecture.md,
    # "Worker code areas").
    assert scale(dev_stack, "document")["minReplicas"] == 0
    assert scale(dev_stack, "connector")["minReplicas"] == 0
    assert scale(prod_stack, "document")["minReplicas"] == 2
    assert scale(prod_stack, "connector")["minReplicas"] == 2
    assert scale(prod_stack, "document")["maxReplicas"] == 10


def test_worker_roles_are_exactly_its_task_list(stack: StackResult) -> None:
    i = ids(stack)
    for entry in stack.catalog:
        key = f"worker-{entry.name.replace('_', '-')}"
        expected = runtime(i)
        expected |= {
            (roles.SERVICE_BUS_DATA_RECEIVER, f"{i['namespace']}/queues/{queue}")
            for queue in entry_queues(entry)
        }
        expected |= {
            (roles.KEY_VAULT_SECRETS_USER, f"{i['vault']}/secrets/{secret}")
            for secret in entry.secrets
        }
        assert grants(stack, key) == expected, entry.name


def test_connector_holds_its_own_secret(stack: StackResult) -> None:
    connector = worker_resource(stack, "connector").inputs
    (secret,) = connector["configuration"]["secrets"]
    assert secret["keyVaultUrl"].endswith("/secrets/connector-api-key")
    assert secret["identity"] == identity_of(stack, "worker-connector").id
    assert "value" not in secret
    for area in ("document", "data_platform"):
        assert worker_resource(stack, area).inputs["configuration"]["secrets"] == []
    holders = {
        ra.inputs["principalId"]
        for ra in stack.of_type(RA)
        if ra.inputs["roleDefinitionId"]
        == role_id(roles.builtin_role_id(roles.KEY_VAULT_SECRETS_USER))
    }
    assert holders == {"principal-id-worker-connector"}


def test_role_assignments_are_deterministic_and_fully_qualified(stack: StackResult) -> None:
    names = [ra.inputs["roleAssignmentName"] for ra in stack.of_type(RA)]
    assert len(names) == len(set(names))
    for ra in stack.of_type(RA):
        assert uuid.UUID(ra.inputs["roleAssignmentName"]).version == 5
        assert ROLE_ID.match(ra.inputs["roleDefinitionId"]), ra.inputs["roleDefinitionId"]
        assert ra.inputs["principalType"] == "ServicePrincipal"
    assert assignment_name("a", "b") == assignment_name("a", "b")


def test_every_assigned_role_is_in_the_snapshot_or_a_custom_role_of_the_stack(
    stack: StackResult,
) -> None:
    custom = {r.inputs["roleDefinitionId"] for r in stack.of_type(ROLE_DEF)}
    snapshot = roles.snapshot()
    assigned = set()
    for ra in stack.of_type(RA):
        guid = ra.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
        assert ra.inputs["roleDefinitionId"] == role_id(guid)
        name = snapshot.name_of(guid)
        assert name is not None or guid in custom, f"{ra.name}: {guid} is no known role"
        assert name is None or not roles.is_forbidden(name), ra.name
        assigned.add(name or "custom")
    assert assigned == {
        roles.DURABLE_TASK_WORKER,
        roles.DURABLE_TASK_DATA_CONTRIBUTOR,
        roles.SERVICE_BUS_DATA_RECEIVER,
        roles.SERVICE_BUS_DATA_SENDER,
        roles.STORAGE_BLOB_DATA_CONTRIBUTOR,
        roles.STORAGE_BLOB_DATA_READER,
        roles.STORAGE_BLOB_DELEGATOR,
        roles.ACR_PULL,
        roles.KEY_VAULT_SECRETS_USER,
        roles.MONITORING_METRICS_PUBLISHER,
        "custom",
    }


def test_every_app_depends_on_the_grants_it_needs_at_start(stack: StackResult) -> None:
    """AcrPull (and every other grant of the app's identity) is an explicit
    dependency of the app, so the first image pull does not race the assignment."""
    for resource in [*stack.of_type(APP), *stack.of_type(JOB)]:
        (assigned,) = resource.inputs["identity"]["userAssignedIdentities"]
        principal = f"principal-{assigned.rsplit('/', 1)[-1]}"
        own = {ra.name for ra in stack.of_type(RA) if ra.inputs["principalId"] == principal}
        assert any("acrpull" in name for name in own), resource.name
        assert own <= stack.depends_on[resource.name], resource.name


def test_role_assignment_names_stable_across_runs(dev_config, repo_catalog, dev_stack):
    again = run_stack(dev_config, repo_catalog, "dev")
    assert sorted(r.inputs["roleAssignmentName"] for r in again.of_type(RA)) == sorted(
        r.inputs["roleAssignmentName"] for r in dev_stack.of_type(RA)
    )


def test_outputs(stack: StackResult) -> None:
    out = stack.outputs
    assert out["dtsEndpoint"].startswith("https://dts-")
    assert out["taskHub"] == stack.config.dts.task_hub_name
    assert out["dashboardUrl"].startswith("https://")
    assert out["serviceBusNamespace"].endswith(".servicebus.windows.net")
    assert out["blobEndpoint"].endswith(".blob.core.windows.net/")
    assert out["controlPlaneUrl"].startswith("https://")
    assert set(out["identities"]) == {
        "engine-orchestrator",
        "engine-activity",
        "control-plane",
        "worker-document",
        "worker-data-platform",
        "worker-connector",
    }
    assert out["identities"]["control-plane"] == "client-id-control-plane"


# -- the catalog drives the workers -------------------------------------------

NEW_AREA = """\
name: ledger_sync
taskTypes: [sync_ledger]
image: stepway/worker-ledger-sync:1
domains: [acme, globex]
secrets: [ledger-api-key]
"""


def _snapshot(stack: StackResult) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r.type, r.name): r.inputs for r in stack.resources}


def test_adding_a_code_area_adds_only_its_resources(
    tmp_path: Path, dev_config, dev_stack: StackResult
) -> None:
    root = tmp_path / "workers"
    shutil.copytree(Path(__file__).resolve().parents[3] / "workers", root)
    (root / "ledger_sync").mkdir()
    (root / "ledger_sync" / "worker.yaml").write_text(NEW_AREA)
    catalog = load_catalog(root)
    after = run_stack(dev_config, catalog, "dev")

    before_map, after_map = _snapshot(dev_stack), _snapshot(after)
    added = set(after_map) - set(before_map)
    assert set(before_map) <= set(after_map), "nothing is removed"

    queues = [
        "sync_ledger",
        "sync_ledger-high",
        "acme-sync_ledger",
        "globex-sync_ledger",
    ]
    expected_added = {
        (APP, "app-worker-ledger_sync"),
        (IDENTITY, "id-worker-ledger-sync"),
        (RA, "ra-worker-ledger-sync-acrpull-registry"),
        (RA, "ra-worker-ledger-sync-monitoring-metrics-publisher-insights"),
        (RA, "ra-worker-ledger-sync-key-vault-secrets-user-secret-ledger-api-key"),
        *{(RA, f"ra-worker-ledger-sync-azure-service-bus-data-receiver-queue-{q}") for q in queues},
    }
    assert added == expected_added

    app_inputs = after_map[(APP, "app-worker-ledger_sync")]
    rules = app_inputs["template"]["scale"]["rules"]
    assert sorted(r["custom"]["metadata"]["queueName"] for r in rules) == sorted(queues)
    i = ids(after)
    assert grants(after, "worker-ledger-sync") == {
        *runtime(i),
        (roles.KEY_VAULT_SECRETS_USER, f"{i['vault']}/secrets/ledger-api-key"),
        *{(roles.SERVICE_BUS_DATA_RECEIVER, f"{i['namespace']}/queues/{q}") for q in queues},
    }

    # Nothing else changes, except the control plane learning the new identity.
    changed = {key for key in before_map if before_map[key] != after_map[key]}
    assert changed == {(APP, "app-cp")}
    before_env = env_of(dev_stack.by_name("app-cp"))
    after_env = env_of(after.by_name("app-cp"))
    assert {k for k in after_env if before_env.get(k) != after_env[k]} == {WORKER_IDENTITIES_ENV}
    mapping = json.loads(after_env[WORKER_IDENTITIES_ENV])
    assert mapping["client-id-worker-ledger-sync"] == ["sync_ledger"]


# -- deployment stages -----------------------------------------------------------


def test_infrastructure_stage_has_no_apps_and_no_workers(dev_config, repo_catalog) -> None:
    config = dev_config.model_copy(update={"deploy_stage": "infrastructure"})
    result = run_stack(config, repo_catalog)
    assert result.of_type(APP) == [] and result.of_type(JOB) == []
    assert {r.name for r in result.of_type(IDENTITY)} == {
        "id-engine-orchestrator",
        "id-engine-activity",
        "id-control-plane",
    }
    # Platform roles are in place before the apps that use them.
    assert grants(result, "control-plane")
    assert not any("worker" in ra.inputs["principalId"] for ra in result.of_type(RA))
    assert "controlPlaneUrl" not in result.outputs


def test_platform_stage_adds_engine_and_control_plane_only(dev_config, repo_catalog) -> None:
    config = dev_config.model_copy(update={"deploy_stage": "platform"})
    result = run_stack(config, repo_catalog)
    assert {r.name for r in result.of_type(APP)} == {"app-orch", "app-act", "app-cp"}
    assert result.of_type(JOB) == []
    assert json.loads(env_of(result.one(APP, "app-cp"))[WORKER_IDENTITIES_ENV]) == {}
    assert not any("worker" in ra.inputs["principalId"] for ra in result.of_type(RA))


def test_http_task_secrets_reach_the_activity_app_as_key_vault_references(
    dev_config: Any, repo_catalog: Any
) -> None:
    """``engine.activity.secrets``: each is a Key Vault reference of the activity app
    (readable by its identity alone), its value the engine's STEPWAY_SECRET_<NAME> and
    its hosts in STEPWAY_SECRET_HOSTS, as the engine reads them."""
    from engine.app.config import EngineConfig
    from stepway_infra.config import EngineSecret

    secrets = {"API_TOKEN": EngineSecret(hosts=["api.example.com"])}
    activity = dev_config.engine.activity.model_copy(update={"secrets": secrets})
    config = dev_config.model_copy(
        update={"engine": dev_config.engine.model_copy(update={"activity": activity})}
    )
    stack = run_stack(config, repo_catalog, "dev")
    act = stack.one(APP, "app-act").inputs
    (secret,) = act["configuration"]["secrets"]
    assert secret["keyVaultUrl"].endswith("/secrets/API-TOKEN")
    assert secret["identity"] == identity_of(stack, "engine-activity").id
    assert "value" not in secret
    (container,) = act["template"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["STEPWAY_SECRET_API_TOKEN"] == {
        "name": "STEPWAY_SECRET_API_TOKEN",
        "secretRef": secret["name"],
    }
    i = ids(stack)
    assert (roles.KEY_VAULT_SECRETS_USER, f"{i['vault']}/secrets/API-TOKEN") in grants(
        stack, "engine-activity"
    )
    assert not any(
        scope.endswith("/secrets/API-TOKEN") for _, scope in grants(stack, "engine-orchestrator")
    )
    # the policy pack accepts it: a Key Vault reference, read with an identity
    from stepway_infra import policy_rules
    from stepway_infra.mocks import policy_props
    from stepway_infra.policy_rules import StackResource

    resources = [StackResource(r.type, r.name, policy_props(r.inputs)) for r in stack.resources]
    assert policy_rules.evaluate(resources)[0] == []
    # the engine reads it back (the value is Key Vault's; here a stand-in)
    plain = {k: str(v["value"]) for k, v in env.items() if "value" in v}
    engine = EngineConfig.from_env({**plain, "STEPWAY_SECRET_API_TOKEN": "from-key-vault"})
    assert engine.secrets.value_for("API_TOKEN", "https://api.example.com/x") == "from-key-vault"
