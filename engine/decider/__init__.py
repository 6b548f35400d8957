"""The Decider: the pure step function of the workflow language (see
:mod:`engine.decider.core`), with the data it works on (:mod:`engine.decider.state`)."""

from engine.decider.core import (
    MAX_INLINE_STEPS,
    Deadline,
    Decider,
    Decision,
    JqEvaluator,
    PayloadLoader,
    RunResult,
    RunState,
    ScheduleTask,
    TaskChange,
    TaskOutcome,
    TaskState,
    default_jq,
)

__all__ = [
    "MAX_INLINE_STEPS",
    "Deadline",
    "Decider",
    "Decision",
    "JqEvaluator",
    "PayloadLoader",
    "RunResult",
    "RunState",
    "ScheduleTask",
    "TaskChange",
    "TaskOutcome",
    "TaskState",
    "default_jq",
]
