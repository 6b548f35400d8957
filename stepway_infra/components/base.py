"""Shared building blocks of the components: the stack context, identities, role
assignments, and helpers that keep every computed value an Output."""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Any, TypeVar

import pulumi
from pulumi_azure_native import authorization, managedidentity

from stepway_infra import roles
from stepway_infra.config import StackConfig

T = TypeVar("T")

#: Namespace of the deterministic (uuid5) role assignment and definition names.
ROLE_ASSIGNMENT_NAMESPACE = uuid.UUID("6f1c2b8e-3d4a-5e6f-9a0b-1c2d3e4f5a6b")

#: Type token prefix of the program's components.
COMPONENT_PREFIX = "stepway:platform:"


class ProgramError(ValueError):
    """The configuration and the catalog do not fit together, or Azure returned
    something the program cannot use."""


@dataclass(frozen=True)
class StackContext:
    """What every component needs: configuration, names, tags and the scope."""

    config: StackConfig
    base: str
    tags: dict[str, str]
    resource_group_name: pulumi.Output[str]
    resource_group_id: pulumi.Output[str]
    subscription_id: pulumi.Output[str]
    tenant_id: pulumi.Output[str]

    def tagged(self, **extra: str) -> dict[str, str]:
        return {**self.tags, **extra}


@dataclass
class Identity:
    """A user-assigned managed identity of one app, job or worker area."""

    key: str
    resource: managedidentity.UserAssignedIdentity


def role_definition_id(subscription_id: pulumi.Input[str], guid: str) -> pulumi.Output[str]:
    """The full role definition id of a (built-in or custom) role."""
    return pulumi.Output.concat(
        "/subscriptions/",
        subscription_id,
        "/providers/Microsoft.Authorization/roleDefinitions/",
        guid,
    )


def assignment_name(*parts: str) -> str:
    """Deterministic role assignment name: the same inputs give the same GUID."""
    return str(uuid.uuid5(ROLE_ASSIGNMENT_NAMESPACE, "/".join(parts)))


def scale_rule_name(queue: str) -> str:
    """A Container Apps scale rule name for a queue (lowercase, '-', unique)."""
    name = re.sub(r"[^a-z0-9-]", "-", queue.lower()).strip("-")
    digest = hashlib.sha1(queue.encode()).hexdigest()[:6]
    return f"sb-{name[:40]}-{digest}"


def area_slug(area: str) -> str:
    return area.replace("_", "-")


def _unknown_output() -> pulumi.Output[Any]:
    """An Output whose value is not known yet (as in a preview)."""
    loop = asyncio.get_event_loop()
    value: asyncio.Future[Any] = loop.create_future()
    value.set_result(None)
    known: asyncio.Future[bool] = loop.create_future()
    known.set_result(False)
    return pulumi.Output(set(), value, known)


def present(value: pulumi.Output[T | None], what: str) -> pulumi.Output[T]:
    """A value Azure computes (an endpoint, a host name, an address).

    During a preview a missing value stays unknown, as the provider reports it for a
    resource not created yet; after creation a missing value stops the program with
    a message naming it, instead of deploying ``https://None``.
    """

    def check(resolved: T | None) -> Any:
        if resolved is None:
            if pulumi.runtime.is_dry_run():
                return _unknown_output()
            raise ProgramError(f"Azure returned no {what}")
        return resolved

    return value.apply(check)


def https(host: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.concat("https://", host)


def make_identity(ctx: StackContext, key: str, parent: pulumi.Resource) -> Identity:
    resource = managedidentity.UserAssignedIdentity(
        f"id-{key}",
        resource_name_=f"id-{ctx.base}-{key}",
        resource_group_name=ctx.resource_group_name,
        location=ctx.config.location,
        tags=ctx.tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return Identity(key=key, resource=resource)


def grant(
    ctx: StackContext,
    identity: Identity,
    role_name: str,
    scope: pulumi.Input[str],
    scope_key: str,
    parent: pulumi.Resource,
) -> authorization.RoleAssignment:
    """Assign a built-in role (by its name in the snapshot) to an identity."""
    guid = roles.builtin_role_id(role_name)
    role_key = role_name.lower().replace(" ", "-")
    return authorization.RoleAssignment(
        f"ra-{identity.key}-{role_key}-{scope_key}",
        role_assignment_name=assignment_name(ctx.base, identity.key, guid, scope_key),
        principal_id=identity.resource.principal_id,
        principal_type="ServicePrincipal",
        role_definition_id=role_definition_id(ctx.subscription_id, guid),
        scope=scope,
        description=f"Stepway {ctx.base}: {role_name} for {identity.key} on {scope_key}",
        opts=pulumi.ResourceOptions(parent=parent),
    )


def delete_lock(
    ctx: StackContext, key: str, scope: pulumi.Input[str], parent: pulumi.Resource
) -> authorization.ManagementLockByScope | None:
    """A ``CanNotDelete`` lock on a production data store (none outside production)."""
    if not ctx.config.production:
        return None
    return authorization.ManagementLockByScope(
        f"lock-{key}",
        lock_name=f"stepway-{key}-cannot-delete",
        level="CanNotDelete",
        scope=scope,
        notes=f"Stepway {ctx.base}: production data store; remove the lock to delete it",
        opts=pulumi.ResourceOptions(parent=parent),
    )
