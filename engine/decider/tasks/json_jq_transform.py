"""JSON_JQ_TRANSFORM: runs ``queryExpression`` over the resolved inputs into
``{"result": first, "resultList": all}``.

Scheduled: the program runs in an activity, in the engine's evaluator processes under
their limits (``engine.runtime.builtins.evaluate``), so its result is recorded once and
a replay reads it instead of running it again.
"""

from __future__ import annotations

from engine.decider.tasks.base import ScheduledTask


class JsonJqTransformTask(ScheduledTask):
    pass
