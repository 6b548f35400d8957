"""START_WORKFLOW: starts another run from ``inputParameters.startWorkflow`` (a
StartWorkflowRequest: ``name``, ``version``, ``input``, ``correlationId`` and
``taskToDomain``, by default the starter's, or an inline ``workflowDef``) and completes
with ``{"workflowId": id}`` without waiting for it (Conductor's StartWorkflow). The start
is an activity of the engine (``engine.runtime.activities``)."""

from __future__ import annotations

from engine.decider.tasks.base import ScheduledTask


class StartWorkflowTask(ScheduledTask):
    pass
