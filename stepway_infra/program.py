"""The Stepway platform program: one Pulumi stack per environment.

``run(config, catalog)`` declares every resource of one environment as a tree of
ComponentResources (``stepway_infra/components/``). It is a plain function so that
tests can call it under Pulumi mocks; ``platform/__main__.py`` calls it with the
stack's configuration and the worker catalog (``workers/*/worker.yaml``). Adding a
worker code area is a catalog change: the program derives the area's component
(app, identity, scale rules, role assignments) from the entry.

Every security setting is written out explicitly (even where it equals the Azure
default) so that the policy pack (``stepway_infra/policy_rules.py``) and
tests/unit/stepway_infra can assert on it. Every value Azure computes (endpoints, host names,
addresses) stays an Output and is composed with ``Output.concat``/``apply``, so the
program also runs where those values are unknown (a first preview).
"""

from __future__ import annotations

import re
from typing import Any

import pulumi
from pulumi_azure_native import authorization, resources

from stepway_infra.components.base import (
    ROLE_ASSIGNMENT_NAMESPACE,
    ProgramError,
    StackContext,
    area_slug,
    assignment_name,
    role_definition_id,
    scale_rule_name,
)
from stepway_infra.components.control_plane import (
    WORKER_IDENTITIES_ENV,
    ControlPlane,
    ControlPlaneArgs,
    WorkerGrant,
)
from stepway_infra.components.data import Data, DataArgs
from stepway_infra.components.engine import ENGINE_ROLE_ENV, Engine, EngineArgs
from stepway_infra.components.hosting import Hosting, HostingArgs
from stepway_infra.components.messaging import Messaging, MessagingArgs
from stepway_infra.components.network import Network, NetworkArgs
from stepway_infra.components.observability import Observability, ObservabilityArgs
from stepway_infra.components.workers import WorkerArea, WorkerAreaArgs
from stepway_infra.config import StackConfig
from stepway_infra.stage_guard import guard_stage
from workers.catalog import WorkerCatalogEntry

__all__ = [
    "ENGINE_ROLE_ENV",
    "ROLE_ASSIGNMENT_NAMESPACE",
    "WORKER_IDENTITIES_ENV",
    "ProgramError",
    "area_slug",
    "assignment_name",
    "role_definition_id",
    "run",
    "scale_rule_name",
]

# The platform apps' variables are read by ``engine/config.py`` and
# ``control_plane/serve.py`` (``stepway engine`` / ``stepway serve``);
# docs/configuration.md lists them all and tests/config/test_infra_env.py feeds the
# apps' env to those readers.

_APP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")


def _worker_app_name(config: StackConfig, entry: WorkerCatalogEntry) -> str:
    kind = "j" if entry.job else "w"
    return f"{config.base_name}-{kind}-{area_slug(entry.name)}"


def _worker_replicas(config: StackConfig, entry: WorkerCatalogEntry) -> tuple[int, int]:
    """(floor, max) replicas of a worker app for this stack."""
    override = config.workers.get(entry.name)
    min_replicas = entry.min_replicas
    max_replicas = entry.max_replicas
    scale_to_zero = config.workers_scale_to_zero and entry.scale_to_zero
    if override:
        if override.min_replicas is not None:
            min_replicas = override.min_replicas
        if override.max_replicas is not None:
            max_replicas = override.max_replicas
        if override.scale_to_zero is not None:
            scale_to_zero = override.scale_to_zero
    return (0 if scale_to_zero else min_replicas), max_replicas


def check(config: StackConfig, catalog: list[WorkerCatalogEntry]) -> None:
    """The catalog and the stack configuration fit together."""
    names = [entry.name for entry in catalog]
    if len(set(names)) != len(names):
        raise ProgramError(f"worker catalog has duplicate code areas: {names}")
    unknown = sorted(set(config.workers) - set(names))
    if unknown:
        raise ProgramError(
            f"stepway:workers names code areas that are not in the worker catalog: "
            f"{', '.join(unknown)} (catalog: {', '.join(names) or 'empty'})"
        )
    for entry in catalog:
        name = _worker_app_name(config, entry)
        if not _APP_NAME.match(name):
            raise ProgramError(
                f"worker code area {entry.name!r}: app name {name!r} is not a valid "
                "Container App name (2-32 lowercase letters, digits and '-'); use a "
                "shorter area name or stepway:namePrefix"
            )
        override = config.workers.get(entry.name)
        low, high = _worker_replicas(config, entry)
        if low > high:
            raise ProgramError(
                f"stepway:workers.{entry.name}: minReplicas {low} exceeds maxReplicas {high}"
            )
        if override and override.scale_to_zero is False and entry.job:
            raise ProgramError(f"stepway:workers.{entry.name}: scaleToZero does not apply to a job")
    for suffix in ("orch", "act", "cp"):
        name = f"{config.base_name}-{suffix}"
        if not _APP_NAME.match(name):
            raise ProgramError(f"app name {name!r} is too long; shorten stepway:namePrefix")


def run(config: StackConfig, catalog: list[WorkerCatalogEntry]) -> dict[str, Any]:
    """Declare one environment. Returns the stack outputs (also exported)."""
    catalog = sorted(catalog, key=lambda entry: entry.name)
    check(config, catalog)
    stage = guard_stage(config)
    base = config.base_name
    tags = {
        **config.tags,
        "stepway-environment": config.environment,
        "stepway-production": "true" if config.production else "false",
        "managed-by": "pulumi",
    }
    client = authorization.get_client_config_output()
    rg = resources.ResourceGroup(
        "rg", resource_group_name=f"rg-{base}", location=config.location, tags=tags
    )
    ctx = StackContext(
        config=config,
        base=base,
        tags=tags,
        resource_group_name=rg.name,
        resource_group_id=rg.id,
        subscription_id=client.subscription_id,
        tenant_id=client.tenant_id,
    )
    apps_enabled = config.deploy_stage != "infrastructure"
    network = Network("network", NetworkArgs(ctx))
    observability = Observability("observability", ObservabilityArgs(ctx))
    hosting = Hosting("hosting", HostingArgs(ctx, network, observability))
    data = Data("data", DataArgs(ctx, network, observability))
    messaging = Messaging("messaging", MessagingArgs(ctx, network, observability))
    engine = Engine(
        "engine", EngineArgs(ctx, network, observability, hosting, data, messaging, apps_enabled)
    )
    areas = [
        WorkerArea(
            f"worker-{area_slug(entry.name)}",
            WorkerAreaArgs(
                ctx=ctx,
                entry=entry,
                app_name=_worker_app_name(config, entry),
                image=_worker_image(config, entry),
                min_replicas=_worker_replicas(config, entry)[0],
                max_replicas=_worker_replicas(config, entry)[1],
                observability=observability,
                hosting=hosting,
                data=data,
                messaging=messaging,
            ),
        )
        for entry in (catalog if config.deploy_stage == "all" else [])
    ]
    control_plane = ControlPlane(
        "control-plane",
        ControlPlaneArgs(
            ctx=ctx,
            observability=observability,
            hosting=hosting,
            data=data,
            messaging=messaging,
            engine=engine,
            apps_enabled=apps_enabled,
            workers=tuple(WorkerGrant(a.identity, tuple(a.entry.task_types)) for a in areas),
        ),
    )
    if control_plane.url is not None:
        for area in areas:
            area.deploy(control_plane.url)

    outputs: dict[str, Any] = {
        "resourceGroup": rg.name,
        "dtsEndpoint": engine.endpoint,
        "taskHub": engine.task_hub_name,
        "dashboardUrl": engine.dashboard_url,
        "serviceBusNamespace": messaging.fqdn,
        "serviceBusResourceId": messaging.namespace_id,
        "blobEndpoint": data.blob_endpoint,
        "payloadContainer": config.storage.payload_container,
        "postgresHost": data.postgres_host,
        "registryLoginServer": hosting.login_server,
        "keyVaultUri": data.vault_uri,
        "applicationInsightsId": observability.insights_id,
        # The guarded stage: reading it back is how the next run finds the stage
        # this stack last deployed (stepway_infra/stage_guard.py).
        "deployStage": stage,
        "identities": {
            ident.key: ident.resource.client_id
            for ident in (
                engine.orchestrator_id,
                engine.activity_id,
                control_plane.identity,
                *(a.identity for a in areas),
            )
        },
        "workerQueues": {a.entry.name: a.queues for a in areas},
    }
    if network.egress_ip is not None:
        outputs["egressIp"] = network.egress_ip
    if control_plane.url is not None:
        outputs["controlPlaneUrl"] = control_plane.url
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs


def _worker_image(config: StackConfig, entry: WorkerCatalogEntry) -> str:
    override = config.workers.get(entry.name)
    return override.image if override and override.image else entry.image
