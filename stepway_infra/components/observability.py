"""Log Analytics, Application Insights and the diagnostic settings that feed them."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import applicationinsights, monitor, operationalinsights

from stepway_infra.components.base import COMPONENT_PREFIX, StackContext, present


@dataclass(frozen=True)
class ObservabilityArgs:
    ctx: StackContext


class Observability(pulumi.ComponentResource):
    """One Log Analytics workspace for every log, and a workspace-based Application
    Insights component for the apps' OpenTelemetry traces. Local (instrumentation
    key) authentication is off: each app publishes with its own identity, which
    holds Monitoring Metrics Publisher on the component."""

    workspace_id: pulumi.Output[str]
    insights_id: pulumi.Output[str]
    connection_string: pulumi.Output[str]

    def __init__(
        self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(f"{COMPONENT_PREFIX}Observability", name, None, opts)
        ctx = args.ctx
        self._ctx = ctx
        child = pulumi.ResourceOptions(parent=self)
        self.workspace = operationalinsights.Workspace(
            "logs",
            workspace_name=f"log-{ctx.base}",
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            sku=operationalinsights.WorkspaceSkuArgs(name="PerGB2018"),
            retention_in_days=ctx.config.logs.retention_days,
            tags=ctx.tags,
            opts=child,
        )
        self.insights = applicationinsights.Component(
            "insights",
            resource_name_=f"appi-{ctx.base}",
            resource_group_name=ctx.resource_group_name,
            location=ctx.config.location,
            kind="web",
            application_type="web",
            workspace_resource_id=self.workspace.id,
            ingestion_mode="LogAnalytics",
            disable_local_auth=True,
            sampling_percentage=ctx.config.logs.sampling_percentage,
            tags=ctx.tags,
            opts=child,
        )
        self.workspace_id = self.workspace.id
        self.insights_id = self.insights.id
        self.connection_string = present(
            self.insights.connection_string, "Application Insights connection string"
        )
        self.register_outputs({"workspaceId": self.workspace_id, "insightsId": self.insights_id})

    def diagnostics(
        self,
        key: str,
        resource_uri: pulumi.Input[str],
        parent: pulumi.Resource,
        metrics: bool = True,
    ) -> monitor.DiagnosticSetting:
        """Send every log (category group ``allLogs``, which includes audit logs) and,
        where the resource has them, all metrics to the workspace."""
        return monitor.DiagnosticSetting(
            f"diag-{key}",
            name="to-log-analytics",
            resource_uri=resource_uri,
            workspace_id=self.workspace_id,
            logs=[monitor.DiagnosticsLogSettingsArgs(category_group="allLogs", enabled=True)],
            metrics=[monitor.DiagnosticsMetricSettingsArgs(category="AllMetrics", enabled=True)]
            if metrics
            else None,
            opts=pulumi.ResourceOptions(parent=parent),
        )

    def telemetry_env(self, service: str) -> dict[str, pulumi.Input[str]]:
        """OpenTelemetry settings of one app (docs/configuration.md, "Telemetry")."""
        return {
            "APPLICATIONINSIGHTS_CONNECTION_STRING": self.connection_string,
            "OTEL_SERVICE_NAME": service,
            "OTEL_RESOURCE_ATTRIBUTES": (
                f"service.namespace=stepway,deployment.environment={self._ctx.config.environment}"
            ),
        }
