"""INLINE: evaluates ``inputParameters.expression`` (``evaluatorType`` javascript, the
default, with ``$`` = the resolved inputs; or ``value-param``) into ``{"result": value}``.

Scheduled: the evaluation runs in an activity, in the engine's evaluator processes under
their limits (``engine.runtime.builtins.evaluate``), so its result is recorded once and
a replay reads it instead of evaluating again.
"""

from __future__ import annotations

from engine.decider.tasks.base import ScheduledTask


class InlineTask(ScheduledTask):
    pass
