"""What a handler can return or raise besides a plain output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class TerminalError(Exception):
    """Raise from a handler to fail the task with FAILED_WITH_TERMINAL_ERROR: the
    engine does not retry it (bad input, a business rule that will not change)."""


@dataclass
class InProgress:
    """Return from a handler to post IN_PROGRESS: the Task API hands the task back
    after ``callback_after_seconds`` with ``output`` as the task's ``outputData``
    (read it from ``TaskContext.previous_output``), so a long job can work in
    chunks and resume from a cursor kept in ``output``.

    ``callback_after_seconds=0`` is a progress report only: the task stays with this
    worker and is not handed back (the Task API re-sends the message only for a delay
    above 0); ``extend_lease=True`` then also restarts the response timeout."""

    callback_after_seconds: int = 1
    output: dict[str, Any] = field(default_factory=dict)
    extend_lease: bool = False
