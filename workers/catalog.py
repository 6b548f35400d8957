"""The worker catalog: one ``workers/<area>/worker.yaml`` per code area.

A code area is a group of task types served by one worker app (docs/architecture.md,
"Worker code areas").
The catalog is read by the Pulumi program (one Container App or Job per area,
scaled on the area's queues) and by ``stepway validate`` (every WORKER type a
definition uses must have a worker here).

This module imports only pydantic, PyYAML, the standard library and :mod:`protocol`
(queue names and their limits): the Pulumi program and the workers must not import the
engine.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from protocol.queues import (
    HIGH_PRIORITY_SUFFIX,
    MAX_DOMAIN_LENGTH,
    MAX_QUEUE_NAME_LENGTH,
    MAX_TASK_TYPE_LENGTH,
    is_queue_name_part,
    queue_names,
)

__all__ = [
    "HIGH_PRIORITY_SUFFIX",
    "MAX_DOMAIN_LENGTH",
    "MAX_QUEUE_NAME_LENGTH",
    "MAX_TASK_TYPE_LENGTH",
    "CatalogError",
    "WorkerCatalogEntry",
    "entry_queues",
    "load_catalog",
    "load_entry",
    "queue_names",
]

# A code area name becomes part of Container App and identity names:
# lowercase letters, digits, '_' and '-', starting with a letter.
_AREA_NAME = re.compile(r"^[a-z](?:[a-z0-9_-]{0,18}[a-z0-9])?$")
# Key Vault secret names: 1-127 letters, digits and '-'.
_SECRET_NAME = re.compile(r"^[A-Za-z0-9-]{1,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Container Apps consumption profile: memory is given in Gi.
_MEMORY = re.compile(r"^\d+(?:\.\d+)?Gi$")
# Environment variables the platform sets on every worker app; a catalog entry
# may not override them.
RESERVED_ENV_PREFIXES = ("STEPWAY_", "AZURE_")


def check_cpu(value: float) -> float:
    """Container Apps CPU: a multiple of 0.25 cores between 0.25 and 4."""
    if not 0.25 <= value <= 4 or round(value * 4) != value * 4:
        raise ValueError(f"cpu {value} must be a multiple of 0.25 between 0.25 and 4")
    return value


def check_memory(value: str) -> str:
    """Container Apps memory: a size in Gi."""
    if not _MEMORY.match(value):
        raise ValueError(f"memory {value!r} must be a size in Gi, e.g. '1Gi' or '0.5Gi'")
    return value


def _queue_part(value: str, what: str, max_length: int) -> str:
    if not 1 <= len(value) <= max_length:
        raise ValueError(f"{what} {value!r} must be 1-{max_length} characters long")
    if not is_queue_name_part(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Service Bus queue name part: use letters, "
            "digits, '.', '-' and '_', starting and ending with a letter or digit"
        )
    if value.lower().endswith(HIGH_PRIORITY_SUFFIX):
        raise ValueError(
            f"{what} {value!r} must not end with {HIGH_PRIORITY_SUFFIX!r}: that suffix "
            "names the high-priority queue"
        )
    return value


def _task_type(value: str) -> str:
    return _queue_part(value, "task type", MAX_TASK_TYPE_LENGTH)


def _domain(value: str) -> str:
    return _queue_part(value, "domain", MAX_DOMAIN_LENGTH)


TaskTypeName = Annotated[str, AfterValidator(_task_type)]
DomainName = Annotated[str, AfterValidator(_domain)]


def _unique(values: list[str], what: str) -> list[str]:
    seen: set[str] = set()
    for value in values:
        # Service Bus queue names are case-insensitive.
        key = value.lower()
        if key in seen:
            raise ValueError(f"duplicate {what} {value!r} (names are case-insensitive)")
        seen.add(key)
    return values


class WorkerCatalogEntry(BaseModel):
    """One code area: ``workers/<area>/worker.yaml``. See docs/worker-catalog.md."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(description="Code area name; equals the directory name.")
    description: str = ""
    task_types: list[TaskTypeName] = Field(alias="taskTypes", min_length=1)
    image: str = Field(
        min_length=1,
        description="Image reference; without a registry host it is pulled from the "
        "stack's registry.",
    )
    cpu: float = Field(default=0.5, description="vCPU per replica (0.25 steps, 0.25-4).")
    memory: str = Field(default="1Gi", description="Memory per replica, e.g. '1Gi'.")
    min_replicas: int = Field(
        default=1,
        alias="minReplicas",
        ge=0,
        le=300,
        description="Replicas kept running when the worker does not scale to zero.",
    )
    max_replicas: int = Field(default=10, alias="maxReplicas", ge=1, le=300)
    scale_to_zero: bool = Field(
        default=True,
        alias="scaleToZero",
        description="Zero replicas when all queues of the area are empty.",
    )
    messages_per_replica: int = Field(
        default=5,
        alias="messagesPerReplica",
        ge=1,
        le=10_000,
        description="Queue depth per replica the scaler aims for.",
    )
    domains: list[DomainName] = Field(default_factory=list)
    job: bool = Field(
        default=False,
        description="Long-running batch work: an event-driven Container Apps Job.",
    )
    job_timeout_seconds: int = Field(default=3600, alias="jobTimeoutSeconds", ge=60, le=86_400 * 7)
    secrets: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _AREA_NAME.match(value):
            raise ValueError(
                f"code area name {value!r} must be 1-20 characters of lowercase letters, "
                "digits, '_' and '-', starting with a letter and ending with a letter or digit"
            )
        return value

    @field_validator("task_types")
    @classmethod
    def _check_task_types(cls, value: list[str]) -> list[str]:
        return _unique(value, "task type")

    @field_validator("domains")
    @classmethod
    def _check_domains(cls, value: list[str]) -> list[str]:
        return _unique(value, "domain")

    @field_validator("cpu")
    @classmethod
    def _check_cpu(cls, value: float) -> float:
        return check_cpu(value)

    @field_validator("memory")
    @classmethod
    def _check_memory(cls, value: str) -> str:
        return check_memory(value)

    @field_validator("secrets")
    @classmethod
    def _check_secrets(cls, value: list[str]) -> list[str]:
        for secret in value:
            if not _SECRET_NAME.match(secret):
                raise ValueError(
                    f"secret name {secret!r} must be 1-127 letters, digits and '-' "
                    "(a Key Vault secret name)"
                )
        return _unique(value, "secret")

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _ENV_NAME.match(key):
                raise ValueError(f"environment variable name {key!r} is not valid")
            if key.upper().startswith(RESERVED_ENV_PREFIXES):
                raise ValueError(
                    f"environment variable {key!r} is reserved: names starting with "
                    f"{' or '.join(RESERVED_ENV_PREFIXES)} are set by the platform"
                )
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> WorkerCatalogEntry:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"minReplicas ({self.min_replicas}) must not exceed maxReplicas "
                f"({self.max_replicas})"
            )
        for domain in self.domains:
            for task_type in self.task_types:
                name = f"{domain}-{task_type}"
                if len(name) > MAX_QUEUE_NAME_LENGTH:
                    raise ValueError(
                        f"queue name {name!r} is longer than {MAX_QUEUE_NAME_LENGTH} characters"
                    )
        _unique(entry_queues(self), "queue name (from taskTypes and domains)")
        return self

    def queue_names(self) -> list[str]:
        """All queues this area serves, see :func:`entry_queues`."""
        return entry_queues(self)


def entry_queues(entry: WorkerCatalogEntry) -> list[str]:
    """Every queue of a catalog entry, in catalog order."""
    names: list[str] = []
    for task_type in entry.task_types:
        names.extend(queue_names(task_type, entry.domains))
    return names


class CatalogError(ValueError):
    """A catalog file is missing, unreadable or invalid. The message names the file."""


def _format_errors(path: Path, error: ValidationError) -> str:
    lines = [f"{path}: invalid worker catalog entry"]
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "(file)"
        if item["type"] == "extra_forbidden":
            message = "unknown field (not part of the worker.yaml schema)"
        else:
            message = item["msg"].removeprefix("Value error, ")
        lines.append(f"  {location}: {message}")
    return "\n".join(lines)


def load_entry(path: Path) -> WorkerCatalogEntry:
    """Read and validate one ``worker.yaml``."""
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: must be a YAML mapping of worker catalog fields")
    try:
        entry = WorkerCatalogEntry.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(_format_errors(path, exc)) from exc
    if entry.name != path.parent.name:
        raise CatalogError(
            f"{path}: name: {entry.name!r} must equal the code area directory "
            f"name {path.parent.name!r}"
        )
    return entry


def load_catalog(root: Path) -> list[WorkerCatalogEntry]:
    """Read ``<root>/*/worker.yaml``, sorted by area name.

    ``root`` is the ``workers`` directory. Besides each file's own rules, a task
    type belongs to one code area only and no two areas share a queue.
    """
    root = Path(root)
    if not root.is_dir():
        raise CatalogError(f"{root}: worker catalog directory does not exist")
    entries = [load_entry(path) for path in sorted(root.glob("*/worker.yaml"))]
    owner: dict[str, tuple[str, str]] = {}
    for entry in entries:
        for queue in entry_queues(entry):
            key = queue.lower()
            if key in owner and owner[key][0] != entry.name:
                other_area, _ = owner[key]
                raise CatalogError(
                    f"{root / entry.name / 'worker.yaml'}: queue {queue!r} is also served by "
                    f"code area {other_area!r} ({root / other_area / 'worker.yaml'}); "
                    "a task type and its queues belong to one code area"
                )
            owner[key] = (entry.name, queue)
    return entries
