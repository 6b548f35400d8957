"""The Decider: the pure step function of the workflow language (see
:mod:`engine.decider.core`), with the data it works on (:mod:`engine.decider.state`)."""

from engine.decider.core import (
    MAX_INLINE_STEPS,
    MAX_LOOP_ITERATIONS,
    Deadline,
    Decider,
    Decision,
    PayloadLoader,
    RunResult,
    RunState,
    ScheduleTask,
    TaskChange,
    TaskOutcome,
    TaskState,
)

__all__ = [
    "MAX_INLINE_STEPS",
    "MAX_LOOP_ITERATIONS",
    "Deadline",
    "Decider",
    "Decision",
    "PayloadLoader",
    "RunResult",
    "RunState",
    "ScheduleTask",
    "TaskChange",
    "TaskOutcome",
    "TaskState",
]
