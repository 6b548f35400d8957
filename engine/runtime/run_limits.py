"""Limits of one run that keep a workflow from exhausting the engine.

* ``max_loop_iterations``: iterations of one DO_WHILE; the next one fails the loop and the
  run instead.
* ``max_workflow_depth``: nesting of SUB_WORKFLOW runs (a top-level run has depth 0); a
  child that would be deeper fails its SUB_WORKFLOW task instead of starting.
* ``max_message_bytes``: the largest orchestration message the interpreter sends (an
  activity's input, a child run's input, the state carried into continue-as-new). The
  Durable Task Scheduler refuses messages above 1 MiB, so that is the default; a run whose
  next message would be larger fails with a reason naming its size instead.

``docs/configuration.md`` lists the variables that set them (``engine/config.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunLimits"]


@dataclass(frozen=True)
class RunLimits:
    max_loop_iterations: int = 10_000
    max_workflow_depth: int = 16
    max_message_bytes: int = 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_loop_iterations < 1 or self.max_workflow_depth < 0:
            raise ValueError("loop and depth limits must be positive")
        if self.max_message_bytes < 64 * 1024:
            raise ValueError("max_message_bytes must be at least 64 KiB")
