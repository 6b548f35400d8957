"""Script and jq evaluation outside the engine's interpreter, in killable processes.

:class:`EvaluatorPool` (``pool.py``) runs each evaluation in a pre-started child process
(``child.py``) under the :class:`EvaluatorLimits` (``limits.py``); a breach raises
:class:`EvaluationError` naming the limit and its value.
"""

from engine.runtime.evaluators.limits import EvaluationError, EvaluatorLimits
from engine.runtime.evaluators.pool import EvaluatorPool, Kind

__all__ = ["EvaluationError", "EvaluatorLimits", "EvaluatorPool", "Kind"]
