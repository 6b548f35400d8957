"""The Decider: the pure step function of the workflow language (see
:mod:`engine.decider.core`), with the data it works on (:mod:`engine.decider.state`)."""

from engine.decider.core import (
    INPUT_REF,
    MAX_INLINE_STEPS,
    OUTPUT_REF,
    Action,
    Deadline,
    Decider,
    Decision,
    JqEvaluator,
    PayloadLoader,
    RunResult,
    RunState,
    ScheduleTask,
    TaskOutcome,
    TaskRecord,
    TaskState,
    default_jq,
)

__all__ = [
    "INPUT_REF",
    "MAX_INLINE_STEPS",
    "OUTPUT_REF",
    "Action",
    "Deadline",
    "Decider",
    "Decision",
    "JqEvaluator",
    "PayloadLoader",
    "RunResult",
    "RunState",
    "ScheduleTask",
    "TaskOutcome",
    "TaskRecord",
    "TaskState",
    "default_jq",
]
