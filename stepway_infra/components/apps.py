"""Container Apps and Jobs as the program builds them: one user-assigned identity
each, images pulled with it, secrets only as Key Vault references, and every grant
the app needs at start as an explicit dependency."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_azure_native import app

from stepway_infra import roles
from stepway_infra.components.base import Identity, StackContext, grant
from stepway_infra.components.hosting import WORKLOAD_PROFILE, Hosting
from stepway_infra.components.observability import Observability

#: Tag naming what a container app or job is; the policy pack reads it
#: (``stepway_infra/policy_rules.py``: workers never have ingress).
COMPONENT_TAG = "stepway-component"


@dataclass
class AppSpec:
    """One container app (or the container of a job)."""

    logical_name: str
    app_name: str
    container_name: str
    component: str
    image: str
    cpu: float
    memory: str
    env: dict[str, pulumi.Input[str]]
    #: Env var -> secret name (the secret is a Key Vault reference).
    secret_env: dict[str, str] = field(default_factory=dict)
    #: Secret name -> Key Vault secret URL.
    key_vault_secrets: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    probes: list[app.ContainerAppProbeArgs] | None = None


def runtime_grants(
    ctx: StackContext,
    identity: Identity,
    hosting: Hosting,
    observability: Observability,
    parent: pulumi.Resource,
) -> list[pulumi.Resource]:
    """What every app needs before its first revision starts: pulling its image
    (AcrPull) and publishing telemetry (Monitoring Metrics Publisher)."""
    return [
        grant(ctx, identity, roles.ACR_PULL, hosting.registry_id, "registry", parent),
        grant(
            ctx,
            identity,
            roles.MONITORING_METRICS_PUBLISHER,
            observability.insights_id,
            "insights",
            parent,
        ),
    ]


def http_probes(port: int, path: str) -> list[app.ContainerAppProbeArgs]:
    """Liveness and readiness on the app's health endpoint."""
    return [
        app.ContainerAppProbeArgs(
            type="Liveness",
            http_get=app.ContainerAppProbeHttpGetArgs(path=path, port=port, scheme="HTTP"),
            initial_delay_seconds=10,
            period_seconds=10,
            timeout_seconds=3,
            failure_threshold=3,
        ),
        app.ContainerAppProbeArgs(
            type="Readiness",
            http_get=app.ContainerAppProbeHttpGetArgs(path=path, port=port, scheme="HTTP"),
            initial_delay_seconds=3,
            period_seconds=5,
            timeout_seconds=3,
            failure_threshold=3,
        ),
    ]


def _container(hosting: Hosting, spec: AppSpec) -> app.ContainerArgs:
    variables = [app.EnvironmentVarArgs(name=key, value=value) for key, value in spec.env.items()]
    variables += [
        app.EnvironmentVarArgs(name=key, secret_ref=ref) for key, ref in spec.secret_env.items()
    ]
    return app.ContainerArgs(
        name=spec.container_name,
        image=hosting.image(spec.image),
        resources=app.ContainerResourcesArgs(cpu=spec.cpu, memory=spec.memory),
        env=variables,
        probes=spec.probes,
    )


def _secrets(spec: AppSpec, identity: Identity) -> list[app.SecretArgs]:
    return [
        app.SecretArgs(name=name, key_vault_url=url, identity=identity.resource.id)
        for name, url in spec.key_vault_secrets.items()
    ]


def _registries(hosting: Hosting, identity: Identity) -> list[app.RegistryCredentialsArgs]:
    return [app.RegistryCredentialsArgs(server=hosting.login_server, identity=identity.resource.id)]


def _identity(identity: Identity) -> app.ManagedServiceIdentityArgs:
    return app.ManagedServiceIdentityArgs(
        type="UserAssigned", user_assigned_identities=[identity.resource.id]
    )


def container_app(
    ctx: StackContext,
    hosting: Hosting,
    identity: Identity,
    spec: AppSpec,
    scale: app.ScaleArgs,
    depends_on: list[pulumi.Resource],
    parent: pulumi.Resource,
    ingress: app.IngressArgs | None = None,
) -> app.ContainerApp:
    return app.ContainerApp(
        spec.logical_name,
        container_app_name=spec.app_name,
        resource_group_name=ctx.resource_group_name,
        location=ctx.config.location,
        managed_environment_id=hosting.environment_id,
        workload_profile_name=WORKLOAD_PROFILE,
        identity=_identity(identity),
        configuration=app.ConfigurationArgs(
            active_revisions_mode="Single",
            ingress=ingress,
            registries=_registries(hosting, identity),
            secrets=_secrets(spec, identity),
        ),
        template=app.TemplateArgs(containers=[_container(hosting, spec)], scale=scale),
        tags=ctx.tagged(**{COMPONENT_TAG: spec.component}),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on),
    )


def container_job(
    ctx: StackContext,
    hosting: Hosting,
    identity: Identity,
    spec: AppSpec,
    trigger: app.JobConfigurationEventTriggerConfigArgs,
    timeout_seconds: int,
    depends_on: list[pulumi.Resource],
    parent: pulumi.Resource,
) -> app.Job:
    return app.Job(
        spec.logical_name,
        job_name=spec.app_name,
        resource_group_name=ctx.resource_group_name,
        location=ctx.config.location,
        environment_id=hosting.environment_id,
        workload_profile_name=WORKLOAD_PROFILE,
        identity=_identity(identity),
        configuration=app.JobConfigurationArgs(
            trigger_type="Event",
            replica_timeout=timeout_seconds,
            replica_retry_limit=0,
            registries=_registries(hosting, identity),
            secrets=_secrets(spec, identity),
            event_trigger_config=trigger,
        ),
        template=app.JobTemplateArgs(containers=[_container(hosting, spec)]),
        tags=ctx.tagged(**{COMPONENT_TAG: spec.component}),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on),
    )


def common_env(
    ctx: StackContext, identity: Identity, observability: Observability, service: str
) -> dict[str, pulumi.Input[str]]:
    return {
        "AZURE_CLIENT_ID": identity.resource.client_id,
        "STEPWAY_ENVIRONMENT": ctx.config.environment,
        **observability.telemetry_env(service),
    }


def ingress_fqdn(resource: app.ContainerApp) -> pulumi.Output[Any]:
    """The app's stable host name (``configuration.ingress.fqdn``): Azure's
    ``<app>.<environment domain>``, or ``<app>.internal.<environment domain>`` for
    internal ingress. Not the per-revision ``latestRevisionFqdn``."""
    return resource.configuration.apply(
        lambda c: c.ingress.fqdn if c is not None and c.ingress is not None else None
    )
