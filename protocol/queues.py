"""Queue names of WORKER task types, both ways.

Every WORKER task type has the queues ``<type>`` (normal priority), ``<type>-high``
(runs started with a priority above 0) and ``<domain>-<type>`` for each domain declared
for it (runs whose ``taskToDomain`` maps the type, or ``*``, to that domain). A task
type is a Service Bus queue name part: letters, digits, ``.``, ``-`` and ``_``,
starting and ending with a letter or digit, not ending in ``-high``, and at most
:data:`MAX_TASK_TYPE_LENGTH` characters, so that ``<type>-high`` and ``<domain>-<type>``
fit in a queue name with domains of up to :data:`MAX_DOMAIN_LENGTH` characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = [
    "HIGH_PRIORITY_SUFFIX",
    "MAX_DOMAIN_LENGTH",
    "MAX_QUEUE_NAME_LENGTH",
    "MAX_TASK_TYPE_LENGTH",
    "is_queue_name_part",
    "poll_queues",
    "queue_for",
    "queue_names",
]

#: Service Bus allows queue names of 1-260 characters.
MAX_QUEUE_NAME_LENGTH = 260
#: Suffix of the high-priority queue of a task type.
HIGH_PRIORITY_SUFFIX = "-high"
#: Task type names are kept short enough that ``<domain>-<type>`` and ``<type>-high``
#: always fit in a queue name.
MAX_TASK_TYPE_LENGTH = 200
MAX_DOMAIN_LENGTH = MAX_QUEUE_NAME_LENGTH - MAX_TASK_TYPE_LENGTH - 1 - len(HIGH_PRIORITY_SUFFIX)

# Letters, digits, '.', '-', '_'; starts and ends with a letter or digit.
_QUEUE_PART = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


def is_queue_name_part(value: str) -> bool:
    """Whether ``value`` may be a task type or a domain as far as its characters go
    (lengths and the ``-high`` suffix are checked by the callers, which word the error)."""
    return bool(_QUEUE_PART.match(value))


def queue_names(task_type: str, domains: Iterable[str] = ()) -> list[str]:
    """The queues of a task type: ``<type>``, ``<type>-high``, then ``<domain>-<type>``
    for each domain, in the order given."""
    return [
        task_type,
        task_type + HIGH_PRIORITY_SUFFIX,
        *(f"{domain}-{task_type}" for domain in domains),
    ]


def queue_for(
    task_type: str, priority: int, task_to_domain: Mapping[str, str]
) -> tuple[str, str | None]:
    """The queue an attempt of a WORKER task goes to, and its domain:
    ``<domain>-<type>`` when the run maps the type (or ``*``) to a domain, else
    ``<type>-high`` when the run's priority is above 0, else ``<type>``."""
    domain = task_to_domain.get(task_type) or task_to_domain.get("*")
    if domain:
        return f"{domain}-{task_type}", domain
    if priority > 0:
        return task_type + HIGH_PRIORITY_SUFFIX, None
    return task_type, None


def poll_queues(task_type: str, domain: str | None) -> list[str]:
    """The queues a poll for ``task_type`` reads, in order: only ``<domain>-<type>``
    for a worker of a domain, else ``<type>-high`` before ``<type>``."""
    if domain:
        return [f"{domain}-{task_type}"]
    return [task_type + HIGH_PRIORITY_SUFFIX, task_type]
