"""The control plane: the metadata, workflow and Task APIs."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import app, authorization

from stepway_infra import roles
from stepway_infra.components.apps import (
    AppSpec,
    common_env,
    container_app,
    http_probes,
    ingress_fqdn,
    runtime_grants,
)
from stepway_infra.components.base import (
    COMPONENT_PREFIX,
    Identity,
    StackContext,
    assignment_name,
    grant,
    https,
    make_identity,
    present,
    role_definition_id,
)
from stepway_infra.components.data import Data
from stepway_infra.components.engine import Engine
from stepway_infra.components.hosting import Hosting
from stepway_infra.components.messaging import Messaging
from stepway_infra.components.observability import Observability

#: Env var of the control plane holding ``{"<worker client id>": ["<task type>", ...]}``.
WORKER_IDENTITIES_ENV = "STEPWAY_WORKER_IDENTITIES"

#: The control plane's liveness and readiness endpoint (``control_plane/app.py``).
HEALTH_PATH = "/health"


@dataclass(frozen=True)
class WorkerGrant:
    """A worker identity and the task types it serves."""

    identity: Identity
    task_types: tuple[str, ...]


@dataclass(frozen=True)
class ControlPlaneArgs:
    ctx: StackContext
    observability: Observability
    hosting: Hosting
    data: Data
    messaging: Messaging
    engine: Engine
    apps_enabled: bool
    #: The worker identities the Task API accepts, each for its own task types.
    workers: tuple[WorkerGrant, ...]


class ControlPlane(pulumi.ComponentResource):
    """Its identity and grants (including the custom queue-manager role), and the
    app with HTTPS-only ingress and liveness/readiness probes."""

    #: ``https://`` + the app's stable host name; ``None`` without apps.
    url: pulumi.Output[str] | None

    def __init__(
        self, name: str, args: ControlPlaneArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(f"{COMPONENT_PREFIX}ControlPlane", name, None, opts)
        ctx = args.ctx
        data, messaging = args.data, args.messaging
        self.identity = cp = make_identity(ctx, "control-plane", self)
        self.queue_manager_role_guid = assignment_name(ctx.base, "role", "queue-manager")
        self.queue_manager_role = authorization.RoleDefinition(
            "role-queue-manager",
            role_definition_id=self.queue_manager_role_guid,
            role_name=f"Stepway queue manager ({ctx.base})",
            description="Create and update Service Bus queues when task definitions are "
            "registered. Nothing else.",
            role_type="CustomRole",
            scope=ctx.resource_group_id,
            assignable_scopes=[ctx.resource_group_id],
            permissions=[
                authorization.PermissionArgs(
                    actions=list(roles.QUEUE_MANAGER_ACTIONS),
                    not_actions=[],
                    data_actions=[],
                    not_data_actions=[],
                )
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
        grants: list[pulumi.Resource] = [
            grant(
                ctx,
                cp,
                roles.DURABLE_TASK_DATA_CONTRIBUTOR,
                args.engine.task_hub.id,
                "taskhub",
                self,
            ),
            grant(
                ctx, cp, roles.SERVICE_BUS_DATA_RECEIVER, messaging.namespace_id, "servicebus", self
            ),
            grant(
                ctx, cp, roles.SERVICE_BUS_DATA_SENDER, messaging.namespace_id, "servicebus", self
            ),
            authorization.RoleAssignment(
                "ra-control-plane-queue-manager-servicebus",
                role_assignment_name=assignment_name(
                    ctx.base, cp.key, self.queue_manager_role_guid, "servicebus"
                ),
                principal_id=cp.resource.principal_id,
                principal_type="ServicePrincipal",
                role_definition_id=role_definition_id(
                    ctx.subscription_id, self.queue_manager_role_guid
                ),
                scope=messaging.namespace_id,
                description=f"Stepway {ctx.base}: queue manager for control-plane on servicebus",
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.queue_manager_role]),
            ),
            grant(
                ctx,
                cp,
                roles.STORAGE_BLOB_DATA_CONTRIBUTOR,
                data.payload_container.id,
                "payload-container",
                self,
            ),
            grant(ctx, cp, roles.STORAGE_BLOB_DELEGATOR, data.storage_account.id, "storage", self),
            *runtime_grants(ctx, cp, args.hosting, args.observability, self),
            data.run_store_login(cp, self),
        ]
        self.app: app.ContainerApp | None = None
        self.url = None
        if args.apps_enabled:
            self.app = self._app(args, grants)
            self.url = https(present(ingress_fqdn(self.app), "control plane ingress host name"))
        self.register_outputs({"url": self.url})

    def _app(self, args: ControlPlaneArgs, grants: list[pulumi.Resource]) -> app.ContainerApp:
        ctx = args.ctx
        settings = ctx.config.control_plane
        cp = self.identity
        worker_map = pulumi.Output.all(
            *[w.identity.resource.client_id for w in args.workers]
        ).apply(
            lambda ids: json.dumps(
                {
                    client_id: list(w.task_types)
                    for client_id, w in zip(ids, args.workers, strict=True)
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
        spec = AppSpec(
            logical_name="app-cp",
            app_name=f"{ctx.base}-cp",
            container_name="cp",
            component="control-plane",
            image=settings.image,
            cpu=settings.cpu,
            memory=settings.memory,
            env={
                **common_env(ctx, cp, args.observability, "stepway-control-plane"),
                **args.engine.backend_env(),
                **args.data.run_store_env(cp),
                "STEPWAY_QUEUE": pulumi.Output.concat("servicebus://", args.messaging.fqdn),
                "STEPWAY_PAYLOAD_STORE": args.data.payload_store_url(),
                "STEPWAY_PORT": str(settings.target_port),
                "STEPWAY_AUTH_MODE": "entra",
                "STEPWAY_SERVICEBUS_RESOURCE_ID": args.messaging.namespace_id,
                "STEPWAY_TOKEN_AUDIENCE": settings.token_audience,
                "STEPWAY_TENANT_ID": ctx.tenant_id,
                WORKER_IDENTITIES_ENV: worker_map,
            },
            probes=http_probes(settings.target_port, HEALTH_PATH),
        )
        return container_app(
            ctx,
            args.hosting,
            cp,
            spec,
            app.ScaleArgs(
                min_replicas=settings.min_replicas,
                max_replicas=settings.max_replicas,
                rules=[
                    app.ScaleRuleArgs(
                        name="http",
                        http=app.HttpScaleRuleArgs(metadata={"concurrentRequests": "50"}),
                    )
                ],
            ),
            depends_on=grants,
            parent=self,
            ingress=app.IngressArgs(
                external=settings.external_ingress,
                target_port=settings.target_port,
                transport="auto",
                allow_insecure=False,
                ip_security_restrictions=restrictions or None,
            ),
        )
