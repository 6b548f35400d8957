"""Service Bus: the task queues (created by the control plane, not here)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import servicebus

from stepway_infra.components.base import COMPONENT_PREFIX, StackContext, delete_lock
from stepway_infra.components.network import Network
from stepway_infra.components.observability import Observability


@dataclass(frozen=True)
class MessagingArgs:
    ctx: StackContext
    network: Network
    observability: Observability


class Messaging(pulumi.ComponentResource):
    """The namespace: identity auth only (local SAS auth off), TLS 1.2, behind a
    private endpoint with public access off when ``network.privateEndpoints``
    (Premium only). Queues are created by ``stepway apply`` through the control
    plane's queue-manager role."""

    namespace_id: pulumi.Output[str]
    namespace_name: pulumi.Output[str]
    fqdn: pulumi.Output[str]

    def __init__(self, name: str, args: MessagingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{COMPONENT_PREFIX}Messaging", name, None, opts)
        ctx = args.ctx
        sb = ctx.config.service_bus
        private = ctx.config.network.private_endpoints
        namespace_name = f"sb-{ctx.base}"
        self.namespace = servicebus.Namespace(
            "servicebus",
            namespace_name=namespace_name,
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            sku=servicebus.SBSkuArgs(name=sb.sku, tier=sb.sku, capacity=sb.capacity),
            disable_local_auth=True,
            minimum_tls_version="1.2",
            public_network_access="Disabled" if private else "Enabled",
            zone_redundant=sb.zone_redundant,
            tags=ctx.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        args.observability.diagnostics("servicebus", self.namespace.id, self)
        if private:
            args.network.private_endpoint("servicebus", self.namespace.id, "namespace", self)
        delete_lock(ctx, "servicebus", self.namespace.id, self)
        self.namespace_id = self.namespace.id
        self.namespace_name = self.namespace.name
        # The namespace host is its name under servicebus.windows.net (the name is an
        # input, so this is known before the namespace exists).
        self.fqdn = pulumi.Output.concat(namespace_name, ".servicebus.windows.net")
        self.register_outputs({"namespaceId": self.namespace_id, "fqdn": self.fqdn})

    def queue_scope(self, queue: str) -> pulumi.Output[str]:
        """Resource id of a queue created by ``stepway apply`` (not by this program)."""
        return pulumi.Output.concat(self.namespace_id, "/queues/", queue)
