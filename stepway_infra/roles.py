"""Azure built-in roles, referenced by name.

The ids come from a dated snapshot of Azure's "Azure built-in roles" page kept in
``stepway_infra/data/azure_builtin_roles.json`` (its ``source``, ``sourceRevision``
and ``taken`` keys say where and when). The program never spells a role GUID: it asks
:func:`builtin_role_id` for a name, so a role missing from the snapshot fails before
anything is planned, and the policy pack (``stepway_infra/policy_rules.py``) admits a
role assignment only if its GUID is in the same snapshot (or is a custom role the
stack defines).

Role definition ids are passed in the full
``/subscriptions/<sub>/providers/Microsoft.Authorization/roleDefinitions/<guid>`` form
(:func:`stepway_infra.components.base.role_definition_id`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

SNAPSHOT_PATH = Path(__file__).with_name("data") / "azure_builtin_roles.json"

# The roles the program assigns, by their names in the snapshot.
DURABLE_TASK_WORKER = "Durable Task Worker"
DURABLE_TASK_DATA_CONTRIBUTOR = "Durable Task Data Contributor"
SERVICE_BUS_DATA_RECEIVER = "Azure Service Bus Data Receiver"
SERVICE_BUS_DATA_SENDER = "Azure Service Bus Data Sender"
STORAGE_BLOB_DATA_CONTRIBUTOR = "Storage Blob Data Contributor"
STORAGE_BLOB_DATA_READER = "Storage Blob Data Reader"
STORAGE_BLOB_DELEGATOR = "Storage Blob Delegator"
ACR_PULL = "AcrPull"
KEY_VAULT_SECRETS_USER = "Key Vault Secrets User"
MONITORING_METRICS_PUBLISHER = "Monitoring Metrics Publisher"

#: Roles no identity of the stack may hold: they manage everything, grant access,
#: or own a whole data plane.
FORBIDDEN_ROLE_NAMES = frozenset(
    {
        "Owner",
        "Contributor",
        "User Access Administrator",
        "Role Based Access Control Administrator",
    }
)


def is_forbidden(name: str) -> bool:
    """Owner, Contributor, the access administrators and every ``... Data Owner``."""
    return name in FORBIDDEN_ROLE_NAMES or name.endswith("Data Owner")


@dataclass(frozen=True)
class RoleSnapshot:
    source: str
    source_revision: str
    taken: str
    roles: dict[str, str]

    def id_of(self, name: str) -> str:
        try:
            return self.roles[name]
        except KeyError:
            raise KeyError(
                f"role {name!r} is not in the built-in roles snapshot {SNAPSHOT_PATH.name}; "
                "add it from the source page first"
            ) from None

    def name_of(self, guid: str) -> str | None:
        lowered = guid.lower()
        for name, role_id in self.roles.items():
            if role_id == lowered:
                return name
        return None


@cache
def snapshot() -> RoleSnapshot:
    data: dict[str, Any] = json.loads(SNAPSHOT_PATH.read_text(encoding="utf-8"))
    return RoleSnapshot(
        source=data["source"],
        source_revision=data["sourceRevision"],
        taken=data["taken"],
        roles={name: str(guid).lower() for name, guid in data["roles"].items()},
    )


def builtin_role_id(name: str) -> str:
    """The GUID of a built-in role, looked up by its exact Azure name."""
    return snapshot().id_of(name)


#: Actions of the custom "queue manager" role given to the control plane: it
#: creates and updates queues when task definitions are registered. No built-in
#: role is that narrow (Azure Service Bus Data Owner is data plane; Contributor
#: is everything).
QUEUE_MANAGER_ACTIONS = [
    "Microsoft.ServiceBus/namespaces/read",
    "Microsoft.ServiceBus/namespaces/queues/read",
    "Microsoft.ServiceBus/namespaces/queues/write",
]
