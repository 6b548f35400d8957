"""Where payloads are kept in the payload store, and how a value stands for one.

Keys (references) of the payload store:

* ``payloads/<workflowId>/input.json``: a workflow input above the offload threshold;
* ``payloads/<workflowId>/output.json``: a workflow output above it;
* ``payloads/<workflowId>/<taskId>-<attempt>-input.json`` /
  ``...-output.json``: a task attempt's input or output;
* ``payloads/<workflowId>/<taskId>/...``: files a built-in activity writes
  (:data:`ACTIVITY_PREFIX_KEY` in its input names the folder);
* ``payloads/uploads/<taskType>/<kind>-<id>.json``: outputs a worker uploads itself
  through a signed URL (``GET /api/tasks/external-storage-location``);
* ``definitions/<sha256>.json``: definition snapshots (immutable, by content hash).

Values that stand for an offloaded one:

* ``{"outputRef": "<reference>"}``: a task or workflow output kept in the store;
* ``{"inputRef": "<reference>"}``: a workflow input kept in the store;
* ``{"$payloadRef": "<reference>", "path": "$.a.b"}``: a pointer to (part of) a
  payload, put in a scheduled task's input instead of the value
  (:mod:`engine.runtime.payload_refs`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ACTIVITY_PREFIX_KEY",
    "INPUT_REF",
    "OUTPUT_REF",
    "POINTER",
    "POINTER_PATH",
    "UPLOAD_PREFIX",
    "activity_prefix",
    "definition_snapshot_key",
    "offloaded",
    "rerun_input_key",
    "task_input_key",
    "task_output_key",
    "unowned_activity_prefix",
    "upload_key",
    "workflow_input_key",
    "workflow_output_key",
]

#: The key of an offloaded task or workflow output: ``{"outputRef": "<reference>"}``.
OUTPUT_REF = "outputRef"
#: The key of an offloaded workflow input: ``{"inputRef": "<reference>"}``.
INPUT_REF = "inputRef"
#: The keys of a pointer into a payload.
POINTER = "$payloadRef"
POINTER_PATH = "path"
#: The reserved input key that tells a built-in activity where to write its files.
ACTIVITY_PREFIX_KEY = "_payloadKeyPrefix"
UPLOAD_PREFIX = "payloads/uploads"


def offloaded(value: Any, key: str) -> str | None:
    """The reference of a value that stands for an offloaded one (``{key: ref}``), else
    None."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(key), str):
        return str(value[key])
    return None


def workflow_input_key(workflow_id: str) -> str:
    return f"payloads/{workflow_id}/input.json"


def workflow_output_key(workflow_id: str) -> str:
    return f"payloads/{workflow_id}/output.json"


def rerun_input_key(workflow_id: str, unique: str) -> str:
    """A rerun's new workflow input: a key of its own, as no key is written twice (the
    engine's payload cache keeps what it read under a key)."""
    return f"payloads/{workflow_id}/rerun-{unique}-input.json"


def task_input_key(workflow_id: str, task_id: str, attempt: int) -> str:
    return f"payloads/{workflow_id}/{task_id}-{attempt}-input.json"


def task_output_key(workflow_id: str, task_id: str, attempt: int) -> str:
    return f"payloads/{workflow_id}/{task_id}-{attempt}-output.json"


def activity_prefix(workflow_id: str, task_id: str) -> str:
    """The folder a built-in activity of a task writes its files under."""
    return f"payloads/{workflow_id}/{task_id}"


def unowned_activity_prefix(unique: str) -> str:
    """The folder of a built-in activity called without :data:`ACTIVITY_PREFIX_KEY`."""
    return f"payloads/activities/{unique}"


def upload_key(task_type: str | None, payload_type: str, unique: str) -> str:
    """Where a worker uploads a payload itself (``any`` for a worker of every type)."""
    return f"{UPLOAD_PREFIX}/{task_type or 'any'}/{payload_type.lower()}-{unique}.json"


def definition_snapshot_key(content_sha256: str) -> str:
    return f"definitions/{content_sha256}.json"
