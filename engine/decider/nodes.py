"""Where each task sits in a definition, precomputed once per Decider."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.language.definitions import TaskDef, WorkflowTask

__all__ = ["Node"]


@dataclass
class Node:
    """Where a task sits in the definition."""

    task: WorkflowTask
    list_id: int
    pos: int
    parent: str | None
    task_def: TaskDef | None
    #: container lists by label: ``case:<key>``, ``default``, ``fork:<i>``, ``body``
    branches: dict[str, int] = field(default_factory=dict)
    #: JOIN: the FORK_JOIN right before it in the same list
    fork_ref: str | None = None
    #: JOIN: joinOn, or the last task of each branch of its fork
    join_on: list[str] = field(default_factory=list)
    #: FORK_JOIN: the JOIN right after it
    join_ref: str | None = None
    #: DO_WHILE: every ref inside the body, in definition order
    body_refs: list[str] = field(default_factory=list)
    #: a task a FORK_JOIN_DYNAMIC made while the run ran: that fork's ``taskReferenceName``
    made_by: str | None = None
