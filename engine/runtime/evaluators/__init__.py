"""Script and jq evaluation outside the engine's interpreter, in killable processes.

:class:`EvaluatorPool` (``pool.py``) runs each evaluation in a pre-started child process
(``child.py``) under the :class:`EvaluatorLimits` (``limits.py``); a breach raises
:class:`EvaluationError` naming the limit and its value. INLINE scripts and jq programs
run there, and so do the Deciders' SWITCH and DO_WHILE scripts
(:class:`ScriptsInProcesses`, the runner of the engine's script memo).
"""

from engine.runtime.evaluators.limits import EvaluationError, EvaluatorLimits
from engine.runtime.evaluators.pool import EvaluatorPool, Kind, PoolClosed, ScriptsInProcesses

__all__ = [
    "EvaluationError",
    "EvaluatorLimits",
    "EvaluatorPool",
    "Kind",
    "PoolClosed",
    "ScriptsInProcesses",
]
