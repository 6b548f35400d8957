"""Where the apps run: the container registry and the Container Apps environment."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import app, containerregistry

from stepway_infra.components.base import COMPONENT_PREFIX, StackContext, present
from stepway_infra.components.network import Network
from stepway_infra.components.observability import Observability

#: The workload profile every app and job runs on (serverless, billed per use).
WORKLOAD_PROFILE = "Consumption"


@dataclass(frozen=True)
class HostingArgs:
    ctx: StackContext
    network: Network
    observability: Observability


class Hosting(pulumi.ComponentResource):
    """A workload profiles environment in the stack's VNet (apps subnet), peer traffic
    encrypted, zone redundant when configured, logs to Log Analytics through a
    diagnostic setting (no workspace key handed over); and the registry the apps pull
    from with their own identities."""

    environment_id: pulumi.Output[str]
    default_domain: pulumi.Output[str]
    login_server: pulumi.Output[str]
    registry_id: pulumi.Output[str]

    def __init__(self, name: str, args: HostingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{COMPONENT_PREFIX}Hosting", name, None, opts)
        ctx = args.ctx
        child = pulumi.ResourceOptions(parent=self)
        self.registry = containerregistry.Registry(
            "registry",
            registry_name=f"acr{ctx.config.compact_name}"[:50],
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            sku=containerregistry.SkuArgs(name=ctx.config.registry.sku),
            admin_user_enabled=False,
            anonymous_pull_enabled=False,
            # Public: the deployer pushes images from outside the VNet; pulls need
            # AcrPull with an identity (docs/deploy.md, "What is private, what is public").
            public_network_access="Enabled",
            tags=ctx.tags,
            opts=child,
        )
        args.observability.diagnostics("registry", self.registry.id, self)
        self.environment = app.ManagedEnvironment(
            "apps-env",
            environment_name=f"cae-{ctx.base}",
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            workload_profiles=[
                app.WorkloadProfileArgs(name=WORKLOAD_PROFILE, workload_profile_type="Consumption")
            ],
            vnet_configuration=app.VnetConfigurationArgs(
                infrastructure_subnet_id=args.network.apps_subnet_id, internal=False
            ),
            zone_redundant=ctx.config.zone_redundant,
            peer_traffic_configuration=app.ManagedEnvironmentPeerTrafficConfigurationArgs(
                encryption=app.ManagedEnvironmentEncryptionArgs(enabled=True)
            ),
            app_logs_configuration=app.AppLogsConfigurationArgs(destination="azure-monitor"),
            tags=ctx.tags,
            opts=child,
        )
        args.observability.diagnostics("apps-env", self.environment.id, self, metrics=False)
        self.environment_id = self.environment.id
        self.default_domain = present(
            self.environment.default_domain, "Container Apps environment default domain"
        )
        self.login_server = present(self.registry.login_server, "registry login server")
        self.registry_id = self.registry.id
        self.register_outputs(
            {"environmentId": self.environment_id, "loginServer": self.login_server}
        )

    def image(self, image: str) -> pulumi.Input[str]:
        """An image reference: one without a registry host comes from the stack's
        registry."""
        first = image.split("/", 1)[0]
        if "/" in image and ("." in first or ":" in first or first == "localhost"):
            return image
        return pulumi.Output.concat(self.login_server, "/", image)
