"""The limits of one script or jq evaluation, and how a breach is reported."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.limits import MAX_JSON_DEPTH

__all__ = ["EvaluationError", "EvaluatorLimits"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class EvaluatorLimits:
    """Bounds of one evaluation in an evaluator process (``docs/configuration.md``).

    * ``cpu_seconds``: CPU time (QuickJS's own time limit, and ``RLIMIT_CPU`` of the
      process as a backstop for jq and anything else running C code).
    * ``wall_seconds``: wall-clock time, after which the engine kills the process.
    * ``memory_bytes``: memory the evaluation may use on top of the idle process
      (QuickJS's heap limit, and ``RLIMIT_AS`` of the process).
    * ``max_output_bytes``: size of the result as compact JSON (UTF-8).
    * ``max_depth``: nesting of arrays and objects in the result.
    * ``processes``: evaluator processes kept started per engine process.
    """

    cpu_seconds: float = 2.0
    wall_seconds: float = 10.0
    memory_bytes: int = 256 * MiB
    max_output_bytes: int = 10 * MiB
    max_depth: int = MAX_JSON_DEPTH
    processes: int = 2

    def __post_init__(self) -> None:
        if self.cpu_seconds <= 0 or self.wall_seconds <= 0:
            raise ValueError("evaluator time limits must be positive")
        if self.memory_bytes < 16 * MiB:
            raise ValueError("the evaluator memory limit must be at least 16 MiB")
        if self.max_output_bytes < 1 or self.max_depth < 1 or self.processes < 1:
            raise ValueError("evaluator output, depth and process limits must be positive")


class EvaluationError(Exception):
    """An evaluation that gave no result. ``limit`` names the limit that was exceeded
    (``cpu``, ``wall``, ``memory``, ``output``, ``depth``), or is ``None`` for an error
    of the script or program itself (syntax, runtime error) or a crashed process;
    ``str()`` is the reason for the task."""

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.limit = limit

    @property
    def is_limit(self) -> bool:
        return self.limit is not None
