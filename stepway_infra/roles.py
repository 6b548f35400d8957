"""Azure built-in role definition GUIDs used by the program.

Role definition ids are always passed in the full
``/subscriptions/<sub>/providers/Microsoft.Authorization/roleDefinitions/<guid>``
form (see :func:`stepway_infra.program.role_definition_id`).
"""

from __future__ import annotations

# Durable Task Scheduler
DURABLE_TASK_WORKER = "80d0d6b0-f522-40a4-8886-a5a11720c375"
DURABLE_TASK_DATA_CONTRIBUTOR = "0ad04412-c4d5-4796-b79c-f76d14c8d402"
# Service Bus (data plane)
SERVICE_BUS_DATA_RECEIVER = "4f6d3b9b-027b-4f4a-9142-0e5a2a2247e0"
SERVICE_BUS_DATA_SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2552a50a"
# Storage
STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
STORAGE_BLOB_DELEGATOR = "db58b8e5-c6ad-4a2a-8342-4190687cbf4a"
# Container registry
ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
# Key Vault (RBAC mode), assigned per secret
KEY_VAULT_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"

NAMES = {
    DURABLE_TASK_WORKER: "Durable Task Worker",
    DURABLE_TASK_DATA_CONTRIBUTOR: "Durable Task Data Contributor",
    SERVICE_BUS_DATA_RECEIVER: "Azure Service Bus Data Receiver",
    SERVICE_BUS_DATA_SENDER: "Azure Service Bus Data Sender",
    STORAGE_BLOB_DATA_CONTRIBUTOR: "Storage Blob Data Contributor",
    STORAGE_BLOB_DATA_READER: "Storage Blob Data Reader",
    STORAGE_BLOB_DELEGATOR: "Storage Blob Delegator",
    ACR_PULL: "AcrPull",
    KEY_VAULT_SECRETS_USER: "Key Vault Secrets User",
}

#: Actions of the custom "queue manager" role given to the control plane: it
#: creates and updates queues when task definitions are registered. No built-in
#: role is that narrow (Azure Service Bus Data Owner is data plane; Contributor
#: is everything).
QUEUE_MANAGER_ACTIONS = [
    "Microsoft.ServiceBus/namespaces/read",
    "Microsoft.ServiceBus/namespaces/queues/read",
    "Microsoft.ServiceBus/namespaces/queues/write",
]
