"""The kind a task row stores and the ``taskType`` Conductor reports for it.

A row stores its task's kind (``task_type``): ``WORKER`` for a worker (SIMPLE) task, whose
worker task type is the row's ``task_def_name``, else the system task type as Conductor
names it: ``DECISION`` or ``SWITCH`` as defined, ``FORK`` for a FORK_JOIN or
FORK_JOIN_DYNAMIC, ``JOIN``, ``LAMBDA``, ... Conductor's ``taskType`` of a worker task is
the name of its type, of a system task its kind.
"""

from __future__ import annotations

__all__ = ["SCHEDULED_KINDS", "WORKER", "conductor_task_type", "row_kind"]

#: The kind of a worker (SIMPLE) task row.
WORKER = "WORKER"

#: Kinds of tasks that do I/O (a worker, an activity, a wait, a child run); the others
#: are decided inline and are decided again when a run is retried.
SCHEDULED_KINDS = frozenset(
    {
        WORKER,
        "HTTP",
        "CALL_TOOL",
        "LOGIC_APP",
        "DOCUMENT_INTELLIGENCE",
        "HUMAN",
        "WAIT",
        "SUB_WORKFLOW",
        "START_WORKFLOW",
    }
)

#: Definition types whose rows Conductor reports under another name.
_ROW_KINDS = {"SIMPLE": WORKER, "FORK_JOIN": "FORK", "FORK_JOIN_DYNAMIC": "FORK"}


def row_kind(declared_type: str) -> str:
    """The kind of a row of a task defined with ``declared_type`` (as the definition
    spells it, aliases included: ``SIMPLE``, ``DECISION``)."""
    kind = declared_type.upper()
    return _ROW_KINDS.get(kind, kind)


def conductor_task_type(kind: str, task_def_name: str | None) -> str:
    """Conductor's ``taskType`` of a row: a worker task's type name, else the kind."""
    if kind == WORKER and task_def_name:
        return task_def_name
    return kind
