"""The orchestration input of a run (and of each continued execution).

The control plane starts a run's ``WorkflowInterpreter`` with it; the interpreter
starts child runs and failure workflows with it, and carries its own state into the
next execution in it (``continue_as_new``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = ["ORCHESTRATOR_NAME", "RunInput"]

#: The one orchestration that runs every run of every definition.
ORCHESTRATOR_NAME = "WorkflowInterpreter"


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
    #: the Decider state carried from the previous execution (continue_as_new)
    state: dict[str, Any] | None = None
    started_at_ms: int | None = None
    executions: int = 0
    #: W3C trace context of the span that started the run: every span of the run is in
    #: its trace (engine/runtime/tracing.py). Kept in the input so replays see the same
    #: value; None when tracing is off.
    traceparent: str | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON input of the orchestration (no ``traceparent`` when there is none)."""
        return self.model_dump(
            mode="json", by_alias=True, exclude=None if self.traceparent else {"traceparent"}
        )
