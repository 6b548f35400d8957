"""The data stores: payload storage, Key Vault and the PostgreSQL run store."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import dbforpostgresql, keyvault, storage

from stepway_infra.components.base import (
    COMPONENT_PREFIX,
    Identity,
    StackContext,
    delete_lock,
    present,
)
from stepway_infra.components.network import Network
from stepway_infra.components.observability import Observability


@dataclass(frozen=True)
class DataArgs:
    ctx: StackContext
    network: Network
    observability: Observability


class Data(pulumi.ComponentResource):
    """Storage account with the payload container, Key Vault (RBAC, purge
    protection) and PostgreSQL flexible server with private access only and Entra
    authentication only. Audit and metrics go to Log Analytics; production stores
    carry a ``CanNotDelete`` lock."""

    blob_endpoint: pulumi.Output[str]
    vault_uri: pulumi.Output[str]
    postgres_host: pulumi.Output[str]

    def __init__(self, name: str, args: DataArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{COMPONENT_PREFIX}Data", name, None, opts)
        self._ctx = ctx = args.ctx
        self._network = args.network
        config = ctx.config
        private = config.network.private_endpoints
        obs = args.observability
        child = pulumi.ResourceOptions(parent=self)

        # -- payload storage ---------------------------------------------------
        st = config.storage
        self.storage_account = storage.StorageAccount(
            "storage",
            account_name=f"st{config.compact_name}"[:24],
            resource_group_name=ctx.resource_group_name,
            location=config.location,
            kind="StorageV2",
            sku=storage.SkuArgs(name=st.sku),
            allow_blob_public_access=False,
            allow_shared_key_access=False,
            default_to_o_auth_authentication=True,
            minimum_tls_version="TLS1_2",
            enable_https_traffic_only=True,
            allow_cross_tenant_replication=False,
            public_network_access="Enabled" if st.public_network_access else "Disabled",
            tags=ctx.tags,
            opts=child,
        )
        self.payload_container = storage.BlobContainer(
            "payloads",
            container_name=st.payload_container,
            account_name=self.storage_account.name,
            resource_group_name=ctx.resource_group_name,
            public_access="None",
            opts=child,
        )
        storage.ManagementPolicy(
            "payload-lifecycle",
            management_policy_name="default",
            account_name=self.storage_account.name,
            resource_group_name=ctx.resource_group_name,
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
            opts=child,
        )
        self.blob_endpoint = present(
            self.storage_account.primary_endpoints.apply(lambda e: e.blob if e else None),
            "storage account blob endpoint",
        )
        # The storage account itself has metrics only; blob logs are on its service.
        obs.diagnostics(
            "storage-blob",
            pulumi.Output.concat(self.storage_account.id, "/blobServices/default"),
            self,
        )
        if private:
            args.network.private_endpoint("blob", self.storage_account.id, "blob", self)
        delete_lock(ctx, "storage", self.storage_account.id, self)

        # -- Key Vault -----------------------------------------------------------
        self.vault = keyvault.Vault(
            "keyvault",
            vault_name=config.vault_name,
            resource_group_name=ctx.resource_group_name,
            location=config.location,
            properties=keyvault.VaultPropertiesArgs(
                tenant_id=ctx.tenant_id,
                sku=keyvault.SkuArgs(family="A", name="standard"),
                enable_rbac_authorization=True,
                enable_soft_delete=True,
                soft_delete_retention_in_days=90,
                enable_purge_protection=True,
                public_network_access="Disabled" if private else "Enabled",
                network_acls=keyvault.NetworkRuleSetArgs(default_action="Deny", bypass="None")
                if private
                else None,
                access_policies=[],
            ),
            tags=ctx.tags,
            opts=child,
        )
        self.vault_uri = present(
            self.vault.properties.apply(lambda p: p.vault_uri), "Key Vault URI"
        )
        obs.diagnostics("keyvault", self.vault.id, self)
        if private:
            args.network.private_endpoint("keyvault", self.vault.id, "vault", self)
        delete_lock(ctx, "keyvault", self.vault.id, self)

        # -- PostgreSQL ------------------------------------------------------------
        pg = config.postgres
        self.postgres = dbforpostgresql.Server(
            "postgres",
            server_name=f"psql-{ctx.base}",
            resource_group_name=ctx.resource_group_name,
            location=config.location,
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
                tenant_id=ctx.tenant_id,
            ),
            # Private access: a delegated subnet and a private DNS zone; no public
            # endpoint, so no firewall rule.
            network=dbforpostgresql.NetworkArgs(
                delegated_subnet_resource_id=args.network.postgres_subnet_id,
                private_dns_zone_arm_resource_id=args.network.postgres_dns_zone_id,
                public_network_access="Disabled",
            ),
            create_mode="Create",
            tags=ctx.tags,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[args.network.zone_links["postgres"]]
            ),
        )
        dbforpostgresql.Database(
            "postgres-db",
            database_name=pg.database,
            server_name=self.postgres.name,
            resource_group_name=ctx.resource_group_name,
            charset="UTF8",
            collation="en_US.utf8",
            opts=child,
        )
        self.postgres_host = present(
            self.postgres.fully_qualified_domain_name, "PostgreSQL server host name"
        )
        obs.diagnostics("postgres", self.postgres.id, self)
        delete_lock(ctx, "postgres", self.postgres.id, self)
        self._last_admin: list[pulumi.Resource] = []
        self.register_outputs(
            {
                "blobEndpoint": self.blob_endpoint,
                "vaultUri": self.vault_uri,
                "postgresHost": self.postgres_host,
            }
        )

    def run_store_login(self, identity: Identity, parent: pulumi.Resource) -> pulumi.Resource:
        """Make an identity an Entra administrator of the run store (the GA
        ``AdministratorsMicrosoftEntra`` resource). ARM can only create
        administrators; narrower database roles are a SQL step (docs/deploy.md)."""
        ctx = self._ctx
        admin = dbforpostgresql.AdministratorsMicrosoftEntra(
            f"pg-admin-{identity.key}",
            object_id=identity.resource.principal_id,
            principal_name=identity.resource.name,
            principal_type="ServicePrincipal",
            tenant_id=ctx.tenant_id,
            server_name=self.postgres.name,
            resource_group_name=ctx.resource_group_name,
            # The server applies one administrator change at a time.
            opts=pulumi.ResourceOptions(parent=parent, depends_on=list(self._last_admin)),
        )
        self._last_admin = [admin]
        return admin

    def run_store_env(self, identity: Identity) -> dict[str, pulumi.Input[str]]:
        """PostgreSQL with Entra auth: the user is the identity's PostgreSQL role."""
        return {
            "STEPWAY_RUN_STORE_URL": pulumi.Output.concat(
                "postgresql+psycopg://",
                identity.resource.name,
                "@",
                self.postgres_host,
                ":5432/",
                self._ctx.config.postgres.database,
                "?sslmode=require",
            ),
            "STEPWAY_RUN_STORE_AUTH": "entra",
        }

    def payload_store_url(self) -> pulumi.Output[str]:
        container = self._ctx.config.storage.payload_container
        return self.blob_endpoint.apply(lambda endpoint: f"{endpoint.rstrip('/')}/{container}")

    def secret_url(self, secret: str) -> pulumi.Output[str]:
        return pulumi.Output.concat(
            self.vault_uri.apply(lambda u: u.rstrip("/")), "/secrets/", secret
        )
