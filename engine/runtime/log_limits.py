"""Process log lines that a burst would repeat: at most one per key per window.

A warning about something that holds for a while (no worker polls a task type) would
otherwise be written once per task: a burst of 10,000 starts while a type's workers
are down wrote 10,000 lines to the process log (on Azure, into Log Analytics). Each
task's own log still has its line; the process log says it once per window, with how
many lines it held back since the last one.
"""

from __future__ import annotations

import threading

__all__ = ["OncePerWindow"]


class OncePerWindow:
    """Whether a line for a key is written now: the first of each ``window_ms``."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._lock = threading.Lock()
        #: key -> (when its last line was written, lines held back since)
        self._last: dict[str, tuple[int, int]] = {}

    def admit(self, key: str, now_ms: int) -> int | None:
        """None when ``key`` had a line within the window (this one is held back);
        otherwise the number of lines held back since its last line (write this one)."""
        with self._lock:
            last = self._last.get(key)
            if last is not None and now_ms - last[0] < self.window_ms:
                self._last[key] = (last[0], last[1] + 1)
                return None
            self._last[key] = (now_ms, 0)
            return last[1] if last is not None else 0
