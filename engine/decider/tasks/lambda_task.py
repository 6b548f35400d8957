"""LAMBDA: ``inputParameters.scriptExpression`` is the body of a javascript function,
run with ``$`` = the resolved inputs into ``{"result": value}`` (Conductor's Lambda). An
empty script or an error fails the task, with the error in the output.

Scheduled, as INLINE: the evaluation runs in an activity, in the engine's evaluator
processes under their limits (``engine.runtime.builtins.evaluate``), so its result is
recorded once and a replay reads it instead of evaluating again.
"""

from __future__ import annotations

from engine.decider.tasks.base import ScheduledTask


class LambdaTask(ScheduledTask):
    pass
