"""The orchestration input of a run (and of each continued execution).

The control plane starts a run's ``WorkflowInterpreter`` with it; the interpreter
starts child runs and failure workflows with it, and carries its own state into the
next execution in it (``continue_as_new``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "BEHAVIOUR",
    "FAILURE_WORKFLOW_OUTPUT",
    "ORCHESTRATOR_NAME",
    "SYSTEM_METADATA",
    "ReplayTask",
    "RunInput",
    "TaskMock",
    "child_run_id",
    "child_run_input",
    "failure_run_id",
]

#: The one orchestration that runs every run of every definition.
ORCHESTRATOR_NAME = "WorkflowInterpreter"

#: The interpreter's behaviour version, stamped on every run it starts
#: (:attr:`RunInput.behaviour`). A run in flight at an upgrade is replayed by the new
#: interpreter from the history the old one wrote, and must decide the same actions
#: again. So a change of what the interpreter decides for a definition that could run
#: before (an action more or fewer, or another one) bumps this number, and the Decider
#: keeps the earlier behaviour for runs started under an earlier one;
#: tests/unit/engine/runtime/test_history_compat.py replays histories earlier versions
#: wrote (tests/data/histories/). The versions:
#:
#: * 0: runs started before the field (up to b7821a0): ``asyncComplete`` and
#:   ``permissive`` are read but not acted on.
#: * 1: a call with ``asyncComplete`` waits for a task update; a ``permissive`` task's
#:   failure lets the run go on.
#: * 2: a FORK_JOIN's JOIN is created right after its branches' first tasks, and a
#:   branch's first SWITCH with its case's first task (Conductor's ForkJoinTaskMapper and
#:   SwitchTaskMapper): a fork nested in a branch has its JOIN before the next branch's
#:   rows. Rows take their seq (and task id) in creation order, so runs started before
#:   keep the earlier order. A dynamically forked system task without a name is forked
#:   (named after its child or its type) instead of failing the fork. Expressions read a
#:   task's times, worker, type and seq (``${ref.endTime}``), as Conductor's.
BEHAVIOUR = 2


#: the key of a failed run's output that names the failure workflow's run it started
#: (Conductor's ``conductor.failure_workflow``)
FAILURE_WORKFLOW_OUTPUT = "conductor.failure_workflow"


def failure_run_id(workflow_id: str) -> str:
    """The workflow id of the failure workflow's run a run's failure starts."""
    return f"{workflow_id}-failure"


#: the key of a child run's input conductor-oss reserves for what it adds
SYSTEM_METADATA = "_systemMetadata"


def child_run_input(task_input: dict[str, Any], *, dynamic: bool = False) -> dict[str, Any]:
    """A SUB_WORKFLOW's child run's input: its task's ``workflowInput`` when the task
    carries the child it resolved (``subWorkflowName``: Conductor's SubWorkflowTaskMapper
    keeps the task's inputParameters there, and SubWorkflow.start starts the child with
    them), else the task's input. ``dynamic``: the child runs a definition given in the
    parent, which conductor-oss's SubWorkflow.start marks in the child's input
    (``_systemMetadata.dynamic``)."""
    given = task_input.get("workflowInput")
    found = given if isinstance(given, dict) and "subWorkflowName" in task_input else task_input
    if not dynamic:
        return found
    metadata = found.get(SYSTEM_METADATA)
    return {
        **found,
        SYSTEM_METADATA: {**(metadata if isinstance(metadata, dict) else {}), "dynamic": True},
    }


def child_run_id(task_id: str, attempt: int) -> str:
    """The workflow id of a SUB_WORKFLOW attempt's child run (``<taskId>-<attempt>``)."""
    return f"{task_id}-{attempt}"


class ReplayTask(BaseModel):
    """A task row a retried or rerun run keeps: when the run reaches the task instance
    ``ref`` again it adopts this row (a task that succeeded keeps its result, an inline
    or container task its id) or, for a scheduled task that did not succeed, makes a
    new attempt after it (Conductor's workflow retry); the task a rerun starts from
    (``rerun``) runs again under its id."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    ref: str
    task_id: str
    seq: int
    status: str
    attempt: int = 1
    input: dict[str, Any] = Field(default_factory=dict)
    #: the output, or ``{"outputRef": ref}`` for one kept in the payload store
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    worker_id: str | None = None
    scheduled_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    #: a SUB_WORKFLOW task whose child run is retried in place with it (Conductor's
    #: retry with ``resumeSubworkflowTasks``): the task goes IN_PROGRESS again under its
    #: id and attempt, and waits for that child's end (``protocol.events.child_end_event``)
    resume: bool = False
    #: the task a rerun starts from (``reRunFromTaskId``): scheduled again under its task
    #: id and seq, as Conductor's rerunWF resets it in place, at its next attempt (a queue
    #: message, a lease and a child run are named by task id and attempt)
    rerun: bool = False


class TaskMock(BaseModel):
    """A worker task's result in a workflow test (Conductor's WorkflowTestRequest
    ``taskRefToMockOutput``): the attempt completes with it instead of being queued."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    status: str = "COMPLETED"
    output: dict[str, Any] = Field(default_factory=dict)


class RunInput(BaseModel):
    """camelCase on the wire (``model_dump(mode="json", by_alias=True)``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    name: str
    version: int
    #: the workflow input, or ``{"inputRef": ref}`` for one kept in the payload store
    input: dict[str, Any] = Field(default_factory=dict)
    correlation_id: str | None = None
    priority: int = 0
    task_to_domain: dict[str, str] = Field(default_factory=dict)
    parent_workflow_id: str | None = None
    parent_task_id: str | None = None
    #: how many runs it is nested in: 0 for a top-level run, the parent's + 1 for a child
    depth: int = 0
    #: the definition snapshot the run executes (engine.runtime.snapshots); None: the
    #: current registration
    definition_ref: str | None = None
    #: part of every task id of the run; a restart, rerun or retry sets a new one
    generation: str = ""
    #: a retry or rerun: the rows the run keeps (see :class:`ReplayTask`), the highest
    #: ``seq`` of any row it keeps, and new inputs of tasks by instance ref (a rerun's
    #: ``taskInput``)
    replay: list[ReplayTask] = Field(default_factory=list)
    seq_base: int = 0
    task_inputs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: a workflow test: results of worker tasks by reference name, one per attempt
    task_mocks: dict[str, list[TaskMock]] = Field(default_factory=dict)
    #: the Decider state carried from the previous execution (continue_as_new)
    state: dict[str, Any] | None = None
    started_at_ms: int | None = None
    executions: int = 0
    #: the interpreter behaviour the run was started under (:data:`BEHAVIOUR`); an
    #: orchestration input without the field (a run started before it) reads as 0
    behaviour: int = BEHAVIOUR
    #: a child run retried in place while its parent waits for it again: its end is
    #: raised on the parent as ``child_end_event(parent_task_id)`` (the parent's new
    #: execution did not start it as its sub-orchestration)
    report_end: bool = False
    #: W3C trace context of the span that started the run: every span of the run is in
    #: its trace (engine/runtime/tracing.py). Kept in the input so replays see the same
    #: value; None when tracing is off.
    traceparent: str | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON input of the orchestration (no ``traceparent`` when there is none)."""
        left_out = ({"traceparent"} if not self.traceparent else set()) | (
            {"report_end"} if not self.report_end else set()
        )
        return self.model_dump(mode="json", by_alias=True, exclude=left_out or None)
