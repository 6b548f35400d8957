"""One component per worker code area (``workers/<area>/worker.yaml``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import app

from stepway_infra import roles
from stepway_infra.components.apps import (
    AppSpec,
    common_env,
    container_app,
    container_job,
    runtime_grants,
)
from stepway_infra.components.base import (
    COMPONENT_PREFIX,
    StackContext,
    area_slug,
    grant,
    make_identity,
    scale_rule_name,
)
from stepway_infra.components.data import Data
from stepway_infra.components.hosting import Hosting
from stepway_infra.components.messaging import Messaging
from stepway_infra.components.observability import Observability
from workers.catalog import WorkerCatalogEntry, entry_queues


@dataclass(frozen=True)
class WorkerAreaArgs:
    ctx: StackContext
    entry: WorkerCatalogEntry
    app_name: str
    image: str
    min_replicas: int
    max_replicas: int
    observability: Observability
    hosting: Hosting
    data: Data
    messaging: Messaging


class WorkerArea(pulumi.ComponentResource):
    """A code area's identity, its grants (Data Receiver on each of its own queues for
    the scaler, Key Vault Secrets User on each of its own secrets, AcrPull, telemetry)
    and, once the control plane's URL is known (:meth:`deploy`), its app or job: no
    ingress, one ``azure-servicebus`` scale rule per queue authenticated with the
    area's identity."""

    def __init__(self, name: str, args: WorkerAreaArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"{COMPONENT_PREFIX}WorkerArea", name, None, opts)
        self._args = args
        ctx, entry = args.ctx, args.entry
        self.entry = entry
        self.queues = entry_queues(entry)
        self.identity = ident = make_identity(ctx, f"worker-{area_slug(entry.name)}", self)
        self.grants: list[pulumi.Resource] = [
            grant(
                ctx,
                ident,
                roles.SERVICE_BUS_DATA_RECEIVER,
                args.messaging.queue_scope(queue),
                f"queue-{queue}",
                self,
            )
            for queue in self.queues
        ]
        self.grants += [
            grant(
                ctx,
                ident,
                roles.KEY_VAULT_SECRETS_USER,
                pulumi.Output.concat(args.data.vault.id, "/secrets/", secret),
                f"secret-{secret}",
                self,
            )
            for secret in entry.secrets
        ]
        self.grants += runtime_grants(ctx, ident, args.hosting, args.observability, self)
        self.resource: pulumi.CustomResource | None = None

    def deploy(self, task_api_url: pulumi.Input[str]) -> pulumi.CustomResource:
        """The area's app (or job), polling the Task API at ``task_api_url``."""
        args, entry, ident = self._args, self.entry, self.identity
        ctx = args.ctx
        env: dict[str, pulumi.Input[str]] = {
            **common_env(ctx, ident, args.observability, f"stepway-worker-{area_slug(entry.name)}"),
            **entry.env,
            "STEPWAY_WORKER_AREA": entry.name,
            "STEPWAY_TASK_TYPES": ",".join(entry.task_types),
            "STEPWAY_DOMAINS": ",".join(entry.domains),
            # Read by the worker SDK (workers/sdk/stepway_worker/settings.py, auth.py).
            "STEPWAY_SERVER_URL": task_api_url,
        }
        audience = ctx.config.control_plane.token_audience
        if audience:
            env["STEPWAY_API_SCOPE"] = f"{audience.rstrip('/')}/.default"
        spec = AppSpec(
            logical_name=f"job-{entry.name}" if entry.job else f"app-worker-{entry.name}",
            app_name=args.app_name,
            container_name="worker",
            component="worker",
            image=args.image,
            cpu=entry.cpu,
            memory=entry.memory,
            env=env,
            secret_env={
                re.sub(r"[^A-Z0-9]", "_", secret.upper()): secret.lower()
                for secret in entry.secrets
            },
            key_vault_secrets={
                secret.lower(): args.data.secret_url(secret) for secret in entry.secrets
            },
        )
        metadata = {
            "namespace": args.messaging.namespace_name,
            "messageCount": str(entry.messages_per_replica),
        }
        if entry.job:
            self.resource = container_job(
                ctx,
                args.hosting,
                ident,
                spec,
                app.JobConfigurationEventTriggerConfigArgs(
                    parallelism=1,
                    replica_completion_count=1,
                    scale=app.JobScaleArgs(
                        min_executions=0,
                        max_executions=args.max_replicas,
                        polling_interval=30,
                        rules=[
                            app.JobScaleRuleArgs(
                                name=scale_rule_name(queue),
                                type="azure-servicebus",
                                identity=ident.resource.id,
                                metadata={**metadata, "queueName": queue},
                            )
                            for queue in self.queues
                        ],
                    ),
                ),
                entry.job_timeout_seconds,
                depends_on=self.grants,
                parent=self,
            )
        else:
            self.resource = container_app(
                ctx,
                args.hosting,
                ident,
                spec,
                app.ScaleArgs(
                    min_replicas=args.min_replicas,
                    max_replicas=args.max_replicas,
                    rules=[
                        app.ScaleRuleArgs(
                            name=scale_rule_name(queue),
                            custom=app.CustomScaleRuleArgs(
                                type="azure-servicebus",
                                identity=ident.resource.id,
                                metadata={**metadata, "queueName": queue},
                            ),
                        )
                        for queue in self.queues
                    ],
                ),
                depends_on=self.grants,
                parent=self,
            )
        self.register_outputs({"clientId": ident.resource.client_id})
        return self.resource
