"""The stack's virtual network: subnets, NAT gateway, private DNS zones, private
endpoints."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network, privatedns

from stepway_infra.components.base import COMPONENT_PREFIX, StackContext, present

#: Private DNS zone of each private endpoint group (Azure's ``privatelink`` zones).
PRIVATE_LINK_ZONES = {
    "blob": "privatelink.blob.core.windows.net",
    "vault": "privatelink.vaultcore.azure.net",
    "namespace": "privatelink.servicebus.windows.net",
}


@dataclass(frozen=True)
class NetworkArgs:
    ctx: StackContext


class Network(pulumi.ComponentResource):
    """VNet with three subnets: the apps environment (delegated to
    ``Microsoft.App/environments``, behind the NAT gateway when there is one),
    PostgreSQL (delegated to ``Microsoft.DBforPostgreSQL/flexibleServers``) and private
    endpoints (when ``network.privateEndpoints``)."""

    apps_subnet_id: pulumi.Output[str]
    postgres_subnet_id: pulumi.Output[str]
    postgres_dns_zone_id: pulumi.Output[str]
    #: The NAT gateway's static public address; ``None`` without a NAT gateway.
    egress_ip: pulumi.Output[str] | None

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{COMPONENT_PREFIX}Network", name, None, opts)
        ctx = args.ctx
        settings = ctx.config.network
        self._ctx = ctx
        child = pulumi.ResourceOptions(parent=self)
        self.vnet = network.VirtualNetwork(
            "vnet",
            virtual_network_name=f"vnet-{ctx.base}",
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            address_space=network.AddressSpaceArgs(address_prefixes=[settings.address_space]),
            tags=ctx.tags,
            opts=child,
        )
        nat: network.NatGateway | None = None
        self.egress_ip = None
        if settings.nat_gateway:
            public_ip = network.PublicIPAddress(
                "nat-ip",
                public_ip_address_name=f"pip-nat-{ctx.base}",
                resource_group_name=ctx.resource_group_name,
                location=ctx.config.location,
                sku=network.PublicIPAddressSkuArgs(name="Standard", tier="Regional"),
                public_ip_allocation_method="Static",
                public_ip_address_version="IPv4",
                tags=ctx.tags,
                opts=child,
            )
            nat = network.NatGateway(
                "nat",
                nat_gateway_name=f"nat-{ctx.base}",
                resource_group_name=ctx.resource_group_name,
                location=ctx.config.location,
                sku=network.NatGatewaySkuArgs(name="Standard"),
                public_ip_addresses=[network.SubResourceArgs(id=public_ip.id)],
                idle_timeout_in_minutes=4,
                tags=ctx.tags,
                opts=child,
            )
            self.egress_ip = present(public_ip.ip_address, "NAT gateway public IP address")
        # Azure changes one subnet of a VNet at a time: each subnet waits for the last.
        apps = network.Subnet(
            "snet-apps",
            subnet_name="apps",
            virtual_network_name=self.vnet.name,
            resource_group_name=ctx.resource_group_name,
            address_prefix=settings.apps_subnet,
            delegations=[
                network.DelegationArgs(name="apps", service_name="Microsoft.App/environments")
            ],
            nat_gateway=network.SubResourceArgs(id=nat.id) if nat else None,
            opts=child,
        )
        postgres = network.Subnet(
            "snet-postgres",
            subnet_name="postgres",
            virtual_network_name=self.vnet.name,
            resource_group_name=ctx.resource_group_name,
            address_prefix=settings.postgres_subnet,
            delegations=[
                network.DelegationArgs(
                    name="postgres", service_name="Microsoft.DBforPostgreSQL/flexibleServers"
                )
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[apps]),
        )
        self.apps_subnet_id = apps.id
        self.postgres_subnet_id = postgres.id
        self.private_endpoints_subnet: network.Subnet | None = None
        if settings.private_endpoints:
            self.private_endpoints_subnet = network.Subnet(
                "snet-private-endpoints",
                subnet_name="private-endpoints",
                virtual_network_name=self.vnet.name,
                resource_group_name=ctx.resource_group_name,
                address_prefix=settings.private_endpoints_subnet,
                private_endpoint_network_policies="Disabled",
                opts=pulumi.ResourceOptions(parent=self, depends_on=[postgres]),
            )
        self.zone_links: dict[str, privatedns.VirtualNetworkLink] = {}
        # PostgreSQL with private access resolves through a private zone whose name
        # ends in .postgres.database.azure.com.
        self.postgres_dns_zone_id = self._zone(
            "postgres", f"{ctx.base}.private.postgres.database.azure.com"
        ).id
        self._zones: dict[str, privatedns.PrivateZone] = {}
        if settings.private_endpoints:
            self._zones = {
                group: self._zone(group, zone) for group, zone in PRIVATE_LINK_ZONES.items()
            }
        self.register_outputs(
            {
                "vnetId": self.vnet.id,
                "appsSubnetId": self.apps_subnet_id,
                "egressIp": self.egress_ip,
            }
        )

    def _zone(self, key: str, zone_name: str) -> privatedns.PrivateZone:
        ctx = self._ctx
        zone = privatedns.PrivateZone(
            f"dns-{key}",
            private_zone_name=zone_name,
            resource_group_name=ctx.resource_group_name,
            location="global",
            tags=ctx.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.zone_links[key] = privatedns.VirtualNetworkLink(
            f"dns-{key}-link",
            virtual_network_link_name=f"link-{ctx.base}",
            private_zone_name=zone.name,
            resource_group_name=ctx.resource_group_name,
            location="global",
            virtual_network=privatedns.SubResourceArgs(id=self.vnet.id),
            registration_enabled=False,
            tags=ctx.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return zone

    def private_endpoint(
        self, key: str, target_id: pulumi.Input[str], group: str, parent: pulumi.Resource
    ) -> network.PrivateEndpoint:
        """A private endpoint for ``target_id`` (group ``blob``, ``vault`` or
        ``namespace``), registered in its private DNS zone."""
        if self.private_endpoints_subnet is None:
            raise ValueError("private endpoints are off (network.privateEndpoints)")
        ctx = self._ctx
        endpoint = network.PrivateEndpoint(
            f"pe-{key}",
            private_endpoint_name=f"pe-{ctx.base}-{key}",
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            # A reference by id only (SubnetArgs would add its policy defaults).
            subnet={"id": self.private_endpoints_subnet.id},
            private_link_service_connections=[
                network.PrivateLinkServiceConnectionArgs(
                    name=f"{key}-{group}",
                    private_link_service_id=target_id,
                    group_ids=[group],
                )
            ],
            tags=ctx.tags,
            opts=pulumi.ResourceOptions(parent=parent),
        )
        network.PrivateDnsZoneGroup(
            f"pe-{key}-dns",
            private_dns_zone_group_name="default",
            private_endpoint_name=endpoint.name,
            resource_group_name=ctx.resource_group_name,
            private_dns_zone_configs=[
                network.PrivateDnsZoneConfigArgs(
                    name=group, private_dns_zone_id=self._zones[group].id
                )
            ],
            opts=pulumi.ResourceOptions(parent=parent),
        )
        return endpoint
