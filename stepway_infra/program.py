"""The Stepway platform program: one Pulumi stack per environment.

``run(config, catalog)`` declares every resource of one environment. It is a
plain function so that tests can call it under Pulumi mocks once per test;
``platform/__main__.py`` calls it with the stack's configuration and the worker
catalog (``workers/*/worker.yaml``). Adding a worker code area is a catalog
change: the program derives the app, identity, scale rules and role
assignments from the entry.

Every security setting is written out explicitly (even where it equals the
Azure default) so that the policy pack and tests/infra can assert on it.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_azure_native import (
    app,
    authorization,
    containerregistry,
    dbforpostgresql,
    durabletask,
    keyvault,
    managedidentity,
    monitor,
    operationalinsights,
    resources,
    servicebus,
    storage,
)

from stepway_infra import roles
from stepway_infra.config import AppSettings, StackConfig
from workers.catalog import WorkerCatalogEntry, entry_queues

#: Namespace of the deterministic (uuid5) role assignment and definition names.
ROLE_ASSIGNMENT_NAMESPACE = uuid.UUID("6f1c2b8e-3d4a-5e6f-9a0b-1c2d3e4f5a6b")

#: Env var of the control plane holding ``{"<worker client id>": ["<task type>", ...]}``.
WORKER_IDENTITIES_ENV = "STEPWAY_WORKER_IDENTITIES"

#: DTS work item filtering: the orchestrator app hosts orchestrations only, the
#: activity app activities only (docs/architecture.md, "Engine roles and
#: routing"). The engine reads this variable.
ENGINE_ROLE_ENV = "STEPWAY_ENGINE_ROLE"

# The platform apps' variables (``_backend_env``, ``_run_store_env``, ``_data_env``,
# ``_control_plane_app``) are read by ``engine/app/config.py`` and ``control_plane/cli/serve.py``
# (``stepway engine`` / ``stepway serve``); docs/configuration.md lists them all and
# tests/config/test_infra_env.py feeds the apps' env to those readers.

_APP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")


class ProgramError(ValueError):
    """The configuration and the catalog do not fit together."""


def role_definition_id(subscription_id: pulumi.Input[str], guid: str) -> pulumi.Output[str]:
    """The full role definition id of a (built-in or custom) role."""
    return pulumi.Output.concat(
        "/subscriptions/",
        subscription_id,
        "/providers/Microsoft.Authorization/roleDefinitions/",
        guid,
    )


def assignment_name(*parts: str) -> str:
    """Deterministic role assignment name: the same inputs give the same GUID."""
    return str(uuid.uuid5(ROLE_ASSIGNMENT_NAMESPACE, "/".join(parts)))


def scale_rule_name(queue: str) -> str:
    """A Container Apps scale rule name for a queue (lowercase, '-', unique)."""
    name = re.sub(r"[^a-z0-9-]", "-", queue.lower()).strip("-")
    digest = hashlib.sha1(queue.encode()).hexdigest()[:6]
    return f"sb-{name[:40]}-{digest}"


def area_slug(area: str) -> str:
    return area.replace("_", "-")


@dataclass
class Identity:
    key: str
    resource: managedidentity.UserAssignedIdentity


@dataclass
class WorkerApp:
    entry: WorkerCatalogEntry
    identity: Identity
    resource: pulumi.CustomResource
    queues: list[str] = field(default_factory=list)


class _Program:
    def __init__(self, config: StackConfig, catalog: list[WorkerCatalogEntry]) -> None:
        self.config = config
        self.catalog = sorted(catalog, key=lambda entry: entry.name)
        self.base = config.base_name
        self.tags = {
            **config.tags,
            "stepway-environment": config.environment,
            "managed-by": "pulumi",
        }
        self._check()

    # -- checks ---------------------------------------------------------------

    def _check(self) -> None:
        names = [entry.name for entry in self.catalog]
        if len(set(names)) != len(names):
            raise ProgramError(f"worker catalog has duplicate code areas: {names}")
        unknown = sorted(set(self.config.workers) - set(names))
        if unknown:
            raise ProgramError(
                f"stepway:workers names code areas that are not in the worker catalog: "
                f"{', '.join(unknown)} (catalog: {', '.join(names) or 'empty'})"
            )
        for entry in self.catalog:
            name = self._worker_app_name(entry)
            if not _APP_NAME.match(name):
                raise ProgramError(
                    f"worker code area {entry.name!r}: app name {name!r} is not a valid "
                    "Container App name (2-32 lowercase letters, digits and '-'); use a "
                    "shorter area name or stepway:namePrefix"
                )
            override = self.config.workers.get(entry.name)
            low, high = self._worker_replicas(entry)
            if low > high:
                raise ProgramError(
                    f"stepway:workers.{entry.name}: minReplicas {low} exceeds maxReplicas {high}"
                )
            if override and override.scale_to_zero is False and entry.job:
                raise ProgramError(
                    f"stepway:workers.{entry.name}: scaleToZero does not apply to a job"
                )
        for suffix in ("orch", "act", "cp"):
            name = f"{self.base}-{suffix}"
            if not _APP_NAME.match(name):
                raise ProgramError(f"app name {name!r} is too long; shorten stepway:namePrefix")

    # -- naming ---------------------------------------------------------------

    def _worker_app_name(self, entry: WorkerCatalogEntry) -> str:
        kind = "j" if entry.job else "w"
        return f"{self.base}-{kind}-{area_slug(entry.name)}"

    def _worker_replicas(self, entry: WorkerCatalogEntry) -> tuple[int, int]:
        """(floor, max) replicas of a worker app for this stack."""
        override = self.config.workers.get(entry.name)
        min_replicas = entry.min_replicas
        max_replicas = entry.max_replicas
        scale_to_zero = self.config.workers_scale_to_zero and entry.scale_to_zero
        if override:
            if override.min_replicas is not None:
                min_replicas = override.min_replicas
            if override.max_replicas is not None:
                max_replicas = override.max_replicas
            if override.scale_to_zero is not None:
                scale_to_zero = override.scale_to_zero
        return (0 if scale_to_zero else min_replicas), max_replicas

    def _image(self, image: str) -> pulumi.Input[str]:
        first = image.split("/", 1)[0]
        if "/" in image and ("." in first or ":" in first or first == "localhost"):
            return image
        return pulumi.Output.concat(self.registry.login_server, "/", image)

    # -- building blocks ------------------------------------------------------

    def identity(self, key: str) -> Identity:
        resource = managedidentity.UserAssignedIdentity(
            f"id-{key}",
            resource_name_=f"id-{self.base}-{key}",
            resource_group_name=self.rg.name,
            location=self.config.location,
            tags=self.tags,
        )
        return Identity(key=key, resource=resource)

    def assign(
        self,
        identity: Identity,
        role_guid: str,
        scope: pulumi.Input[str],
        scope_key: str,
        depends_on: list[pulumi.Resource] | None = None,
    ) -> authorization.RoleAssignment:
        role_key = roles.NAMES.get(role_guid, role_guid).lower().replace(" ", "-")
        return authorization.RoleAssignment(
            f"ra-{identity.key}-{role_key}-{scope_key}",
            role_assignment_name=assignment_name(self.base, identity.key, role_guid, scope_key),
            principal_id=identity.resource.principal_id,
            principal_type="ServicePrincipal",
            role_definition_id=role_definition_id(self.subscription_id, role_guid),
            scope=scope,
            description=f"Stepway {self.base}: {roles.NAMES.get(role_guid, role_guid)} "
            f"for {identity.key} on {scope_key}",
            opts=pulumi.ResourceOptions(depends_on=depends_on or []),
        )

    def registry_access(self, identity: Identity) -> None:
        self.assign(identity, roles.ACR_PULL, self.registry.id, "registry")

    def container(
        self,
        name: str,
        image: str,
        cpu: float,
        memory: str,
        env: dict[str, pulumi.Input[str]],
        secret_env: dict[str, str] | None = None,
    ) -> app.ContainerArgs:
        variables = [app.EnvironmentVarArgs(name=key, value=value) for key, value in env.items()]
        variables += [
            app.EnvironmentVarArgs(name=key, secret_ref=ref)
            for key, ref in (secret_env or {}).items()
        ]
        return app.ContainerArgs(
            name=name,
            image=self._image(image),
            resources=app.ContainerResourcesArgs(cpu=cpu, memory=memory),
            env=variables,
        )

    def common_env(self, identity: Identity) -> dict[str, pulumi.Input[str]]:
        return {
            "AZURE_CLIENT_ID": identity.resource.client_id,
            "STEPWAY_ENVIRONMENT": self.config.environment,
        }

    # -- resources ------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        config = self.config
        client = authorization.get_client_config_output()
        self.subscription_id = client.subscription_id
        self.tenant_id = client.tenant_id

        self.rg = resources.ResourceGroup(
            "rg",
            resource_group_name=f"rg-{self.base}",
            location=config.location,
            tags=self.tags,
        )
        self._durable_task()
        self._service_bus()
        self._storage()
        self._key_vault()
        self._registry()
        self._logs_and_environment()

        # Identities first: PostgreSQL administrators and role assignments need them.
        self.orchestrator_id = self.identity("engine-orchestrator")
        self.activity_id = self.identity("engine-activity")
        self.control_plane_id = self.identity("control-plane")
        stage = self.config.deploy_stage
        self.apps_enabled = stage != "infrastructure"
        worker_areas = self.catalog if stage == "all" else []
        self.worker_ids = {
            entry.name: self.identity(f"worker-{area_slug(entry.name)}") for entry in worker_areas
        }

        self._postgres()
        self._engine()
        self._control_plane()
        self.workers = [self._worker(entry) for entry in worker_areas]
        self._control_plane_app()
        return self._outputs()

    def _durable_task(self) -> None:
        dts = self.config.dts
        if not dts.ip_allowlist:
            pulumi.log.warn(
                "stepway:dts.ipAllowlist is empty: the scheduler denies every client "
                "(engine apps included). Add the outbound addresses of the apps."
            )
        self.scheduler = durabletask.Scheduler(
            "dts",
            scheduler_name=f"dts-{self.base}",
            resource_group_name=self.rg.name,
            location=self.config.location,
            properties=durabletask.SchedulerPropertiesArgs(
                ip_allowlist=list(dts.ip_allowlist),
                sku=durabletask.SchedulerSkuArgs(name=dts.sku, capacity=dts.capacity),
                public_network_access="Enabled",
            ),
            tags=self.tags,
        )
        self.task_hub = durabletask.TaskHub(
            "taskhub",
            task_hub_name=dts.task_hub_name,
            scheduler_name=self.scheduler.name,
            resource_group_name=self.rg.name,
        )
        durabletask.RetentionPolicy(
            "dts-retention",
            scheduler_name=self.scheduler.name,
            resource_group_name=self.rg.name,
            properties=durabletask.RetentionPolicyPropertiesArgs(
                retention_policies=[
                    durabletask.RetentionPolicyDetailsArgs(
                        orchestration_state="Completed",
                        retention_period_in_days=dts.retention.completed_days,
                    ),
                    durabletask.RetentionPolicyDetailsArgs(
                        orchestration_state="Terminated",
                        retention_period_in_days=dts.retention.completed_days,
                    ),
                    durabletask.RetentionPolicyDetailsArgs(
                        orchestration_state="Failed",
                        retention_period_in_days=dts.retention.failed_days,
                    ),
                    durabletask.RetentionPolicyDetailsArgs(
                        orchestration_state="Canceled",
                        retention_period_in_days=dts.retention.failed_days,
                    ),
                ]
            ),
        )
        self.dts_endpoint = self.scheduler.properties.apply(lambda p: p.endpoint)
        self.task_hub_id = self.task_hub.id

    def _service_bus(self) -> None:
        sb = self.config.service_bus
        self.namespace = servicebus.Namespace(
            "servicebus",
            namespace_name=f"sb-{self.base}",
            resource_group_name=self.rg.name,
            location=self.config.location,
            sku=servicebus.SBSkuArgs(name=sb.sku, tier=sb.sku, capacity=sb.capacity),
            disable_local_auth=True,
            minimum_tls_version="1.2",
            public_network_access="Enabled",
            zone_redundant=sb.zone_redundant,
            tags=self.tags,
        )
        self.namespace_fqdn = pulumi.Output.concat(self.namespace.name, ".servicebus.windows.net")

    def queue_scope(self, queue: str) -> pulumi.Output[str]:
        """Resource id of a queue created by ``stepway apply`` (not by this program)."""
        return pulumi.Output.concat(self.namespace.id, "/queues/", queue)

    def _storage(self) -> None:
        st = self.config.storage
        self.storage_account = storage.StorageAccount(
            "storage",
            account_name=f"st{self.config.compact_name}"[:24],
            resource_group_name=self.rg.name,
            location=self.config.location,
            kind="StorageV2",
            sku=storage.SkuArgs(name=st.sku),
            allow_blob_public_access=False,
            allow_shared_key_access=False,
            default_to_o_auth_authentication=True,
            minimum_tls_version="TLS1_2",
            enable_https_traffic_only=True,
            allow_cross_tenant_replication=False,
            public_network_access="Enabled",
            tags=self.tags,
        )
        self.payload_container = storage.BlobContainer(
            "payloads",
            container_name=st.payload_container,
            account_name=self.storage_account.name,
            resource_group_name=self.rg.name,
            public_access="None",
        )
        storage.ManagementPolicy(
            "payload-lifecycle",
            management_policy_name="default",
            account_name=self.storage_account.name,
            resource_group_name=self.rg.name,
            policy=storage.ManagementPolicySchemaArgs(
                rules=[
                    storage.ManagementPolicyRuleArgs(
                        name="delete-payloads",
                        enabled=True,
                        type="Lifecycle",
                        definition=storage.ManagementPolicyDefinitionArgs(
                            filters=storage.ManagementPolicyFilterArgs(
                                blob_types=["blockBlob"],
                                prefix_match=[f"{st.payload_container}/"],
                            ),
                            actions=storage.ManagementPolicyActionArgs(
                                base_blob=storage.ManagementPolicyBaseBlobArgs(
                                    delete=storage.DateAfterModificationArgs(
                                        days_after_modification_greater_than=(
                                            st.payload_retention_days
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    )
                ]
            ),
        )
        self.blob_endpoint = self.storage_account.primary_endpoints.apply(lambda e: e.blob)

    def _key_vault(self) -> None:
        self.vault = keyvault.Vault(
            "keyvault",
            vault_name=f"kv-{self.base}"[:24],
            resource_group_name=self.rg.name,
            location=self.config.location,
            properties=keyvault.VaultPropertiesArgs(
                tenant_id=self.tenant_id,
                sku=keyvault.SkuArgs(family="A", name="standard"),
                enable_rbac_authorization=True,
                enable_soft_delete=True,
                soft_delete_retention_in_days=90,
                enable_purge_protection=True,
                public_network_access="Enabled",
                access_policies=[],
            ),
            tags=self.tags,
        )
        self.vault_uri = self.vault.properties.apply(lambda p: p.vault_uri)

    def _registry(self) -> None:
        self.registry = containerregistry.Registry(
            "registry",
            registry_name=f"acr{self.config.compact_name}"[:50],
            resource_group_name=self.rg.name,
            location=self.config.location,
            sku=containerregistry.SkuArgs(name=self.config.registry.sku),
            admin_user_enabled=False,
            anonymous_pull_enabled=False,
            public_network_access="Enabled",
            tags=self.tags,
        )

    def _logs_and_environment(self) -> None:
        self.workspace = operationalinsights.Workspace(
            "logs",
            workspace_name=f"log-{self.base}",
            resource_group_name=self.rg.name,
            location=self.config.location,
            sku=operationalinsights.WorkspaceSkuArgs(name="PerGB2018"),
            retention_in_days=self.config.logs.retention_days,
            tags=self.tags,
        )
        # Logs go through Azure Monitor diagnostic settings: no workspace shared
        # key is handed to the environment.
        self.environment = app.ManagedEnvironment(
            "apps-env",
            environment_name=f"cae-{self.base}",
            resource_group_name=self.rg.name,
            location=self.config.location,
            app_logs_configuration=app.AppLogsConfigurationArgs(destination="azure-monitor"),
            zone_redundant=False,
            tags=self.tags,
        )
        # Workers reach the Task API at the control plane's URL, derived from its
        # app name and the environment's default domain so that worker apps do
        # not wait for the control plane app (which needs the workers' ids).
        self.task_api_url = self.environment.default_domain.apply(
            lambda domain: f"https://{self.base}-cp.{domain}"
        )
        monitor.DiagnosticSetting(
            "apps-env-logs",
            name="to-log-analytics",
            resource_uri=self.environment.id,
            workspace_id=self.workspace.id,
            logs=[monitor.DiagnosticsLogSettingsArgs(category_group="allLogs", enabled=True)],
        )

    def _postgres(self) -> None:
        pg = self.config.postgres
        self.postgres = dbforpostgresql.Server(
            "postgres",
            server_name=f"psql-{self.base}",
            resource_group_name=self.rg.name,
            location=self.config.location,
            version=pg.version,
            sku=dbforpostgresql.SkuArgs(name=pg.sku_name, tier=pg.tier),
            storage=dbforpostgresql.StorageArgs(storage_size_gb=pg.storage_gb, auto_grow="Enabled"),
            backup=dbforpostgresql.BackupArgs(
                backup_retention_days=pg.backup_retention_days,
                geo_redundant_backup="Enabled" if pg.geo_redundant_backup else "Disabled",
            ),
            high_availability=dbforpostgresql.HighAvailabilityArgs(
                mode="ZoneRedundant" if pg.high_availability else "Disabled"
            ),
            auth_config=dbforpostgresql.AuthConfigArgs(
                active_directory_auth="Enabled",
                password_auth="Disabled",
                tenant_id=self.tenant_id,
            ),
            network=dbforpostgresql.NetworkArgs(public_network_access="Enabled"),
            create_mode="Create",
            tags=self.tags,
        )
        dbforpostgresql.Database(
            "postgres-db",
            database_name=pg.database,
            server_name=self.postgres.name,
            resource_group_name=self.rg.name,
            charset="UTF8",
            collation="en_US.utf8",
        )
        if pg.allow_azure_services:
            dbforpostgresql.FirewallRule(
                "postgres-azure-services",
                firewall_rule_name="AllowAzureServices",
                server_name=self.postgres.name,
                resource_group_name=self.rg.name,
                start_ip_address="0.0.0.0",
                end_ip_address="0.0.0.0",
            )
        previous: list[pulumi.Resource] = []
        # Every process that reads or writes the run store has an Entra login; the
        # orchestrator reads definitions from it. ARM can only create Entra
        # *administrators*; narrower database roles are SQL grants (docs/deploy.md).
        for ident in (self.orchestrator_id, self.activity_id, self.control_plane_id):
            # The server applies one administrator change at a time.
            admin = dbforpostgresql.Administrator(
                f"pg-admin-{ident.key}",
                object_id=ident.resource.principal_id,
                principal_name=ident.resource.name,
                principal_type="ServicePrincipal",
                tenant_id=self.tenant_id,
                server_name=self.postgres.name,
                resource_group_name=self.rg.name,
                opts=pulumi.ResourceOptions(depends_on=previous),
            )
            previous = [admin]
        self.postgres_host = self.postgres.fully_qualified_domain_name

    def _backend_env(self) -> dict[str, pulumi.Input[str]]:
        """The Durable Task Scheduler, reached with the app's managed identity
        (``AZURE_CLIENT_ID``)."""
        return {
            "STEPWAY_BACKEND_KIND": "azure",
            "STEPWAY_BACKEND_ENDPOINT": self.dts_endpoint,
            "STEPWAY_BACKEND_TASK_HUB": self.task_hub.name,
            "STEPWAY_BACKEND_CREDENTIAL": "managed_identity",
        }

    def _run_store_env(self, identity: Identity) -> dict[str, pulumi.Input[str]]:
        """PostgreSQL with Entra auth: the user is the identity's PostgreSQL role."""
        return {
            "STEPWAY_RUN_STORE_URL": pulumi.Output.concat(
                "postgresql+psycopg://",
                identity.resource.name,
                "@",
                self.postgres_host,
                ":5432/",
                self.config.postgres.database,
                "?sslmode=require",
            ),
            "STEPWAY_RUN_STORE_AUTH": "entra",
        }

    def _data_env(self, identity: Identity) -> dict[str, pulumi.Input[str]]:
        container = self.config.storage.payload_container
        return {
            **self.common_env(identity),
            **self._backend_env(),
            **self._run_store_env(identity),
            "STEPWAY_QUEUE": pulumi.Output.concat("servicebus://", self.namespace_fqdn),
            "STEPWAY_PAYLOAD_STORE": self.blob_endpoint.apply(
                lambda endpoint: f"{endpoint.rstrip('/')}/{container}"
            ),
        }

    def _dts_scale_rule(self, identity: Identity, work_item_type: str, per_replica: int) -> Any:
        return app.ScaleRuleArgs(
            name=f"dts-{work_item_type.lower()}",
            custom=app.CustomScaleRuleArgs(
                type="azure-durabletask-scheduler",
                identity=identity.resource.id,
                metadata={
                    "endpoint": self.dts_endpoint,
                    "taskhubName": self.task_hub.name,
                    "maxConcurrentWorkItemsCount": str(per_replica),
                    "workItemType": work_item_type,
                },
            ),
        )

    def _platform_app(
        self,
        key: str,
        settings: AppSettings,
        identity: Identity,
        env: dict[str, pulumi.Input[str]],
        rules: list[Any],
        ingress: app.IngressArgs | None = None,
        depends_on: list[pulumi.Resource] | None = None,
    ) -> app.ContainerApp:
        return app.ContainerApp(
            f"app-{key}",
            container_app_name=f"{self.base}-{key}",
            resource_group_name=self.rg.name,
            location=self.config.location,
            managed_environment_id=self.environment.id,
            identity=app.ManagedServiceIdentityArgs(
                type="UserAssigned", user_assigned_identities=[identity.resource.id]
            ),
            configuration=app.ConfigurationArgs(
                active_revisions_mode="Single",
                ingress=ingress,
                registries=[
                    app.RegistryCredentialsArgs(
                        server=self.registry.login_server, identity=identity.resource.id
                    )
                ],
                secrets=[],
            ),
            template=app.TemplateArgs(
                containers=[
                    self.container(key, settings.image, settings.cpu, settings.memory, env)
                ],
                scale=app.ScaleArgs(
                    min_replicas=settings.min_replicas,
                    max_replicas=settings.max_replicas,
                    rules=rules,
                ),
            ),
            tags=self.tags,
            opts=pulumi.ResourceOptions(depends_on=depends_on or []),
        )

    def _engine(self) -> None:
        engine = self.config.engine
        grants: list[pulumi.Resource] = []
        # Orchestrator: runs the WorkflowInterpreter orchestration only. Activities do
        # the I/O; the orchestration reads published definitions (run store login, see
        # _postgres) and, for expressions over offloaded payloads, reads the payload
        # container. Nothing that writes.
        grants.append(
            self.assign(
                self.orchestrator_id, roles.DURABLE_TASK_WORKER, self.task_hub_id, "taskhub"
            )
        )
        grants.append(
            self.assign(
                self.orchestrator_id,
                roles.STORAGE_BLOB_DATA_READER,
                self.payload_container.id,
                "payload-container",
            )
        )
        self.registry_access(self.orchestrator_id)
        # Activities: dispatch to queues, payload offload, run store writes.
        act = self.activity_id
        activity_grants = [
            self.assign(act, roles.DURABLE_TASK_WORKER, self.task_hub_id, "taskhub"),
            self.assign(act, roles.SERVICE_BUS_DATA_SENDER, self.namespace.id, "servicebus"),
            self.assign(
                act,
                roles.STORAGE_BLOB_DATA_CONTRIBUTOR,
                self.payload_container.id,
                "payload-container",
            ),
        ]
        self.registry_access(act)
        if not self.apps_enabled:
            return
        self.orchestrator_app = self._platform_app(
            "orch",
            engine.orchestrator,
            self.orchestrator_id,
            {
                **self.common_env(self.orchestrator_id),
                **self._backend_env(),
                # The interpreter reads workflow definitions from the run store.
                **self._run_store_env(self.orchestrator_id),
                ENGINE_ROLE_ENV: "orchestrator",
                "STEPWAY_MAX_CONCURRENT_WORK_ITEMS": str(
                    engine.orchestrator.max_concurrent_work_items
                ),
            },
            [
                self._dts_scale_rule(
                    self.orchestrator_id,
                    "Orchestration",
                    engine.orchestrator.max_concurrent_work_items,
                )
            ],
            depends_on=grants,
        )
        self.activity_app = self._platform_app(
            "act",
            engine.activity,
            act,
            {
                **self._data_env(act),
                ENGINE_ROLE_ENV: "activity",
                "STEPWAY_MAX_CONCURRENT_WORK_ITEMS": str(engine.activity.max_concurrent_work_items),
            },
            [self._dts_scale_rule(act, "Activity", engine.activity.max_concurrent_work_items)],
            depends_on=activity_grants,
        )

    def _control_plane(self) -> None:
        cp = self.control_plane_id
        self.queue_manager_role_guid = assignment_name(self.base, "role", "queue-manager")
        self.queue_manager_role = authorization.RoleDefinition(
            "role-queue-manager",
            role_definition_id=self.queue_manager_role_guid,
            role_name=f"Stepway queue manager ({self.base})",
            description="Create and update Service Bus queues when task definitions are "
            "registered. Nothing else.",
            role_type="CustomRole",
            scope=self.rg.id,
            assignable_scopes=[self.rg.id],
            permissions=[
                authorization.PermissionArgs(
                    actions=list(roles.QUEUE_MANAGER_ACTIONS),
                    not_actions=[],
                    data_actions=[],
                    not_data_actions=[],
                )
            ],
        )
        self.control_plane_grants = [
            self.assign(cp, roles.DURABLE_TASK_DATA_CONTRIBUTOR, self.task_hub_id, "taskhub"),
            self.assign(cp, roles.SERVICE_BUS_DATA_RECEIVER, self.namespace.id, "servicebus"),
            self.assign(cp, roles.SERVICE_BUS_DATA_SENDER, self.namespace.id, "servicebus"),
            authorization.RoleAssignment(
                "ra-control-plane-queue-manager-servicebus",
                role_assignment_name=assignment_name(
                    self.base, cp.key, self.queue_manager_role_guid, "servicebus"
                ),
                principal_id=cp.resource.principal_id,
                principal_type="ServicePrincipal",
                role_definition_id=role_definition_id(
                    self.subscription_id, self.queue_manager_role_guid
                ),
                scope=self.namespace.id,
                description=f"Stepway {self.base}: queue manager for control-plane on servicebus",
                opts=pulumi.ResourceOptions(depends_on=[self.queue_manager_role]),
            ),
            self.assign(
                cp,
                roles.STORAGE_BLOB_DATA_CONTRIBUTOR,
                self.payload_container.id,
                "payload-container",
            ),
            self.assign(cp, roles.STORAGE_BLOB_DELEGATOR, self.storage_account.id, "storage"),
        ]
        self.registry_access(cp)

    def _control_plane_app(self) -> None:
        self.control_plane_url: pulumi.Input[str] | None = None
        if not self.apps_enabled:
            return
        settings = self.config.control_plane
        cp = self.control_plane_id
        worker_map = pulumi.Output.all(
            *[w.identity.resource.client_id for w in self.workers]
        ).apply(
            lambda ids: json.dumps(
                {
                    client_id: list(w.entry.task_types)
                    for client_id, w in zip(ids, self.workers, strict=True)
                },
                sort_keys=True,
            )
        )
        restrictions = [
            app.IpSecurityRestrictionRuleArgs(
                name=f"allow-{index}", action="Allow", ip_address_range=cidr
            )
            for index, cidr in enumerate(settings.ingress_allowed_cidrs)
        ]
        self.control_plane_app = self._platform_app(
            "cp",
            settings,
            cp,
            {
                **self._data_env(cp),
                "STEPWAY_PORT": str(settings.target_port),
                "STEPWAY_AUTH_MODE": "entra",
                "STEPWAY_SERVICEBUS_RESOURCE_ID": self.namespace.id,
                "STEPWAY_TOKEN_AUDIENCE": settings.token_audience,
                "STEPWAY_TENANT_ID": self.tenant_id,
                WORKER_IDENTITIES_ENV: worker_map,
            },
            [
                app.ScaleRuleArgs(
                    name="http",
                    http=app.HttpScaleRuleArgs(metadata={"concurrentRequests": "50"}),
                )
            ],
            ingress=app.IngressArgs(
                external=settings.external_ingress,
                target_port=settings.target_port,
                transport="auto",
                allow_insecure=False,
                ip_security_restrictions=restrictions or None,
            ),
            depends_on=self.control_plane_grants,
        )
        self.control_plane_url = self.control_plane_app.latest_revision_fqdn.apply(
            lambda fqdn: f"https://{fqdn}"
        )

    def _worker(self, entry: WorkerCatalogEntry) -> WorkerApp:
        ident = self.worker_ids[entry.name]
        queues = entry_queues(entry)
        grants: list[pulumi.Resource] = []
        # The scaler reads the depth of the area's own queues, nothing else.
        for queue in queues:
            grants.append(
                self.assign(
                    ident,
                    roles.SERVICE_BUS_DATA_RECEIVER,
                    self.queue_scope(queue),
                    f"queue-{queue}",
                )
            )
        for secret in entry.secrets:
            grants.append(
                self.assign(
                    ident,
                    roles.KEY_VAULT_SECRETS_USER,
                    pulumi.Output.concat(self.vault.id, "/secrets/", secret),
                    f"secret-{secret}",
                )
            )
        self.registry_access(ident)

        override = self.config.workers.get(entry.name)
        image = override.image if override and override.image else entry.image
        floor, ceiling = self._worker_replicas(entry)
        secrets = [
            app.SecretArgs(
                name=secret.lower(),
                key_vault_url=pulumi.Output.concat(self.vault_uri, "secrets/", secret),
                identity=ident.resource.id,
            )
            for secret in entry.secrets
        ]
        secret_env = {
            re.sub(r"[^A-Z0-9]", "_", secret.upper()): secret.lower() for secret in entry.secrets
        }
        env: dict[str, pulumi.Input[str]] = {
            **self.common_env(ident),
            **entry.env,
            "STEPWAY_WORKER_AREA": entry.name,
            "STEPWAY_TASK_TYPES": ",".join(entry.task_types),
            "STEPWAY_DOMAINS": ",".join(entry.domains),
            # Read by the worker SDK (workers/sdk/stepway_worker/settings.py, auth.py).
            "STEPWAY_SERVER_URL": self.task_api_url,
        }
        audience = self.config.control_plane.token_audience
        if audience:
            env["STEPWAY_API_SCOPE"] = f"{audience.rstrip('/')}/.default"
        container = self.container(
            "worker", image, entry.cpu, entry.memory, env, secret_env=secret_env
        )
        registries = [
            app.RegistryCredentialsArgs(
                server=self.registry.login_server, identity=ident.resource.id
            )
        ]
        identity_args = app.ManagedServiceIdentityArgs(
            type="UserAssigned", user_assigned_identities=[ident.resource.id]
        )
        name = self._worker_app_name(entry)
        opts = pulumi.ResourceOptions(depends_on=grants)
        metadata = {
            "namespace": self.namespace.name,
            "messageCount": str(entry.messages_per_replica),
        }
        if entry.job:
            resource: pulumi.CustomResource = app.Job(
                f"job-{entry.name}",
                job_name=name,
                resource_group_name=self.rg.name,
                location=self.config.location,
                environment_id=self.environment.id,
                identity=identity_args,
                configuration=app.JobConfigurationArgs(
                    trigger_type="Event",
                    replica_timeout=entry.job_timeout_seconds,
                    replica_retry_limit=0,
                    registries=registries,
                    secrets=secrets,
                    event_trigger_config=app.JobConfigurationEventTriggerConfigArgs(
                        parallelism=1,
                        replica_completion_count=1,
                        scale=app.JobScaleArgs(
                            min_executions=0,
                            max_executions=ceiling,
                            polling_interval=30,
                            rules=[
                                app.JobScaleRuleArgs(
                                    name=scale_rule_name(queue),
                                    type="azure-servicebus",
                                    identity=ident.resource.id,
                                    metadata={**metadata, "queueName": queue},
                                )
                                for queue in queues
                            ],
                        ),
                    ),
                ),
                template=app.JobTemplateArgs(containers=[container]),
                tags=self.tags,
                opts=opts,
            )
        else:
            resource = app.ContainerApp(
                f"app-worker-{entry.name}",
                container_app_name=name,
                resource_group_name=self.rg.name,
                location=self.config.location,
                managed_environment_id=self.environment.id,
                identity=identity_args,
                configuration=app.ConfigurationArgs(
                    active_revisions_mode="Single",
                    ingress=None,
                    registries=registries,
                    secrets=secrets,
                ),
                template=app.TemplateArgs(
                    containers=[container],
                    scale=app.ScaleArgs(
                        min_replicas=floor,
                        max_replicas=ceiling,
                        rules=[
                            app.ScaleRuleArgs(
                                name=scale_rule_name(queue),
                                custom=app.CustomScaleRuleArgs(
                                    type="azure-servicebus",
                                    identity=ident.resource.id,
                                    metadata={**metadata, "queueName": queue},
                                ),
                            )
                            for queue in queues
                        ],
                    ),
                ),
                tags=self.tags,
                opts=opts,
            )
        return WorkerApp(entry=entry, identity=ident, resource=resource, queues=queues)

    def _outputs(self) -> dict[str, Any]:
        outputs: dict[str, Any] = {
            "resourceGroup": self.rg.name,
            "dtsEndpoint": self.dts_endpoint,
            "taskHub": self.task_hub.name,
            "dashboardUrl": self.task_hub.properties.apply(lambda p: p.dashboard_url),
            "serviceBusNamespace": self.namespace_fqdn,
            "serviceBusResourceId": self.namespace.id,
            "blobEndpoint": self.blob_endpoint,
            "payloadContainer": self.config.storage.payload_container,
            "postgresHost": self.postgres_host,
            "registryLoginServer": self.registry.login_server,
            "keyVaultUri": self.vault_uri,
            "deployStage": self.config.deploy_stage,
            "identities": {
                ident.key: ident.resource.client_id
                for ident in (
                    self.orchestrator_id,
                    self.activity_id,
                    self.control_plane_id,
                    *self.worker_ids.values(),
                )
            },
            "workerQueues": {w.entry.name: w.queues for w in self.workers},
        }
        if self.control_plane_url is not None:
            outputs["controlPlaneUrl"] = self.control_plane_url
        for key, value in outputs.items():
            pulumi.export(key, value)
        return outputs


def run(config: StackConfig, catalog: list[WorkerCatalogEntry]) -> dict[str, Any]:
    """Declare one environment. Returns the stack outputs (also exported)."""
    return _Program(config, catalog).build()
