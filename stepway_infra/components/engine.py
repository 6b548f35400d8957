"""The engine: the Durable Task Scheduler and the orchestrator and activity apps."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import app, durabletask, monitor

from stepway_infra import roles
from stepway_infra.components.apps import (
    AppSpec,
    common_env,
    container_app,
    runtime_grants,
)
from stepway_infra.components.base import (
    COMPONENT_PREFIX,
    Identity,
    StackContext,
    delete_lock,
    grant,
    make_identity,
    present,
)
from stepway_infra.components.data import Data
from stepway_infra.components.hosting import Hosting
from stepway_infra.components.messaging import Messaging
from stepway_infra.components.network import Network
from stepway_infra.components.observability import Observability

#: DTS work item filtering: the orchestrator app hosts orchestrations only, the
#: activity app activities only. The engine reads this variable.
ENGINE_ROLE_ENV = "STEPWAY_ENGINE_ROLE"


@dataclass(frozen=True)
class EngineArgs:
    ctx: StackContext
    network: Network
    observability: Observability
    hosting: Hosting
    data: Data
    messaging: Messaging
    #: ``False`` at ``deployStage: infrastructure``: identities and grants only.
    apps_enabled: bool


def dts_allowlist(
    configured: list[str], egress_ip: pulumi.Output[str] | None
) -> pulumi.Input[list[str]]:
    """The scheduler's IP allow-list: the configured addresses plus the NAT
    gateway's static address (the apps' only egress) when there is one."""
    if egress_ip is None:
        return list(configured)
    return egress_ip.apply(
        lambda ip: [*configured, ip] if ip not in configured else list(configured)
    )


class Engine(pulumi.ComponentResource):
    """Scheduler, task hub and retention policy; the orchestrator app (orchestrations
    only, always on) and the activity app (activities only, down to zero), each
    scaled by the DTS scaler on its own work item type; a health signal per app
    (restart and replica metric alerts: the engine serves no HTTP to probe)."""

    endpoint: pulumi.Output[str]
    task_hub_name: pulumi.Output[str]

    def __init__(self, name: str, args: EngineArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{COMPONENT_PREFIX}Engine", name, None, opts)
        ctx = args.ctx
        self._ctx = ctx
        self._args = args
        dts = ctx.config.dts
        child = pulumi.ResourceOptions(parent=self)
        self.scheduler = durabletask.Scheduler(
            "dts",
            scheduler_name=f"dts-{ctx.base}",
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            properties=durabletask.SchedulerPropertiesArgs(
                ip_allowlist=dts_allowlist(dts.ip_allowlist, args.network.egress_ip),
                sku=durabletask.SchedulerSkuArgs(name=dts.sku, capacity=dts.capacity),
                public_network_access="Enabled",
            ),
            tags=ctx.tags,
            opts=child,
        )
        self.task_hub = durabletask.TaskHub(
            "taskhub",
            task_hub_name=dts.task_hub_name,
            scheduler_name=self.scheduler.name,
            resource_group_name=ctx.resource_group_name,
            opts=child,
        )
        durabletask.RetentionPolicy(
            "dts-retention",
            scheduler_name=self.scheduler.name,
            resource_group_name=ctx.resource_group_name,
            properties=durabletask.RetentionPolicyPropertiesArgs(
                retention_policies=[
                    durabletask.RetentionPolicyDetailsArgs(
                        orchestration_state=state, retention_period_in_days=days
                    )
                    for state, days in (
                        ("Completed", dts.retention.completed_days),
                        ("Terminated", dts.retention.completed_days),
                        ("Failed", dts.retention.failed_days),
                        ("Canceled", dts.retention.failed_days),
                    )
                ]
            ),
            opts=child,
        )
        delete_lock(ctx, "scheduler", self.scheduler.id, self)
        self.endpoint = present(
            self.scheduler.properties.apply(lambda p: p.endpoint), "scheduler endpoint"
        )
        self.dashboard_url = present(
            self.task_hub.properties.apply(lambda p: p.dashboard_url if p else None),
            "task hub dashboard URL",
        )
        self.task_hub_name = pulumi.Output.from_input(dts.task_hub_name)

        self.orchestrator_id = make_identity(ctx, "engine-orchestrator", self)
        self.activity_id = make_identity(ctx, "engine-activity", self)
        orch, act = self.orchestrator_id, self.activity_id
        data, messaging = args.data, args.messaging
        # Orchestrator: runs the WorkflowInterpreter orchestration only. Activities do
        # the I/O; the orchestration reads definitions (run store login) and offloaded
        # payloads (read role). Nothing that writes.
        orch_grants = [
            grant(ctx, orch, roles.DURABLE_TASK_WORKER, self.task_hub.id, "taskhub", self),
            grant(
                ctx,
                orch,
                roles.STORAGE_BLOB_DATA_READER,
                data.payload_container.id,
                "payload-container",
                self,
            ),
            *runtime_grants(ctx, orch, args.hosting, args.observability, self),
            data.run_store_login(orch, self),
        ]
        # Activities: dispatch to queues, payload offload, run store writes.
        act_grants = [
            grant(ctx, act, roles.DURABLE_TASK_WORKER, self.task_hub.id, "taskhub", self),
            grant(
                ctx, act, roles.SERVICE_BUS_DATA_SENDER, messaging.namespace_id, "servicebus", self
            ),
            grant(
                ctx,
                act,
                roles.STORAGE_BLOB_DATA_CONTRIBUTOR,
                data.payload_container.id,
                "payload-container",
                self,
            ),
            *runtime_grants(ctx, act, args.hosting, args.observability, self),
            data.run_store_login(act, self),
        ]
        # each secret HTTP tasks may send, readable by the activity identity alone
        secrets = ctx.config.engine.activity.secrets
        act_grants += [
            grant(
                ctx,
                act,
                roles.KEY_VAULT_SECRETS_USER,
                pulumi.Output.concat(data.vault.id, "/secrets/", secret.vault_name(name)),
                f"secret-{secret.vault_name(name)}",
                self,
            )
            for name, secret in secrets.items()
        ]
        self.orchestrator_app: app.ContainerApp | None = None
        self.activity_app: app.ContainerApp | None = None
        if args.apps_enabled:
            engine = ctx.config.engine
            self.orchestrator_app = self._app(
                "orch",
                "orchestrator",
                engine.orchestrator,
                orch,
                {
                    **self.backend_env(),
                    # The interpreter reads workflow definitions from the run store.
                    **data.run_store_env(orch),
                    ENGINE_ROLE_ENV: "orchestrator",
                },
                "Orchestration",
                orch_grants,
            )
            self.activity_app = self._app(
                "act",
                "activity",
                engine.activity,
                act,
                {
                    **self.backend_env(),
                    **data.run_store_env(act),
                    "STEPWAY_QUEUE": pulumi.Output.concat("servicebus://", messaging.fqdn),
                    "STEPWAY_PAYLOAD_STORE": data.payload_store_url(),
                    ENGINE_ROLE_ENV: "activity",
                    **(
                        {"STEPWAY_TOKEN_HOSTS": json.dumps(engine.activity.token_hosts)}
                        if engine.activity.token_hosts
                        else {}
                    ),
                    **(
                        {
                            "STEPWAY_SECRET_HOSTS": json.dumps(
                                {name: s.hosts for name, s in secrets.items()}
                            )
                        }
                        if secrets
                        else {}
                    ),
                },
                "Activity",
                act_grants,
                secret_env={_secret_env(name): _app_secret(name) for name in secrets},
                key_vault_secrets={
                    _app_secret(name): data.secret_url(secret.vault_name(name))
                    for name, secret in secrets.items()
                },
            )
        self.register_outputs({"endpoint": self.endpoint, "taskHub": self.task_hub_name})

    def backend_env(self) -> dict[str, pulumi.Input[str]]:
        """The Durable Task Scheduler, reached with the app's managed identity
        (``AZURE_CLIENT_ID``)."""
        return {
            "STEPWAY_BACKEND_KIND": "azure",
            "STEPWAY_BACKEND_ENDPOINT": self.endpoint,
            "STEPWAY_BACKEND_TASK_HUB": self.task_hub_name,
            "STEPWAY_BACKEND_CREDENTIAL": "managed_identity",
        }

    def _app(
        self,
        key: str,
        role: str,
        settings: Any,
        identity: Identity,
        env: dict[str, pulumi.Input[str]],
        work_item_type: str,
        grants: list[pulumi.Resource],
        secret_env: dict[str, str] | None = None,
        key_vault_secrets: dict[str, pulumi.Input[str]] | None = None,
    ) -> app.ContainerApp:
        ctx, args = self._ctx, self._args
        per_replica = settings.max_concurrent_work_items
        spec = AppSpec(
            logical_name=f"app-{key}",
            app_name=f"{ctx.base}-{key}",
            container_name=key,
            component=f"engine-{role}",
            image=settings.image,
            cpu=settings.cpu,
            memory=settings.memory,
            env={
                **common_env(ctx, identity, args.observability, f"stepway-engine-{role}"),
                **env,
                "STEPWAY_MAX_CONCURRENT_WORK_ITEMS": str(per_replica),
            },
            secret_env=secret_env or {},
            key_vault_secrets=key_vault_secrets or {},
        )
        rule = app.ScaleRuleArgs(
            name=f"dts-{work_item_type.lower()}",
            custom=app.CustomScaleRuleArgs(
                type="azure-durabletask-scheduler",
                identity=identity.resource.id,
                metadata={
                    "endpoint": self.endpoint,
                    "taskhubName": self.task_hub_name,
                    "maxConcurrentWorkItemsCount": str(per_replica),
                    "workItemType": work_item_type,
                },
            ),
        )
        resource = container_app(
            ctx,
            args.hosting,
            identity,
            spec,
            app.ScaleArgs(
                min_replicas=settings.min_replicas,
                max_replicas=settings.max_replicas,
                rules=[rule],
            ),
            depends_on=grants,
            parent=self,
        )
        self._health_alerts(key, resource, always_on=settings.min_replicas > 0)
        return resource

    def _health_alerts(self, key: str, resource: app.ContainerApp, always_on: bool) -> None:
        """The engine's health signal: Azure Monitor alerts on the app's restarts and,
        for an always-on app, on having no running replica."""
        ctx = self._ctx
        checks = [("restarts", "RestartCount", "Total", "GreaterThan", 3.0, 2)]
        if always_on:
            checks.append(("no-replica", "Replicas", "Maximum", "LessThan", 1.0, 1))
        for suffix, metric, aggregation, operator, threshold, severity in checks:
            monitor.MetricAlert(
                f"alert-{key}-{suffix}",
                rule_name=f"{ctx.base}-{key}-{suffix}",
                resource_group_name=ctx.resource_group_name,
                location="global",
                description=f"Stepway {ctx.base}: engine app {key}: {metric} {operator} "
                f"{threshold:g}",
                severity=severity,
                enabled=True,
                scopes=[resource.id],
                evaluation_frequency="PT5M",
                window_size="PT15M",
                auto_mitigate=True,
                criteria=monitor.MetricAlertSingleResourceMultipleMetricCriteriaArgs(
                    odata_type="Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria",
                    all_of=[
                        monitor.MetricCriteriaArgs(
                            criterion_type="StaticThresholdCriterion",
                            name=metric,
                            metric_name=metric,
                            metric_namespace="Microsoft.App/containerApps",
                            operator=operator,
                            threshold=threshold,
                            time_aggregation=aggregation,
                        )
                    ],
                ),
                tags=ctx.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )


def _app_secret(name: str) -> str:
    """The container app's secret holding an HTTP task secret (lowercase, '-')."""
    return "http-secret-" + name.lower().replace("_", "-")


def _secret_env(name: str) -> str:
    """The variable the engine reads a secret's value from (engine/runtime/builtins/
    secrets.py, ``env_name``; tests/unit/stepway_infra/test_process_env.py reads it back)."""
    return "STEPWAY_SECRET_" + "".join(c if c.isalnum() else "_" for c in name.upper())
