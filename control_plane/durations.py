"""How long something took, for people: the CLI and the console write durations alike."""

from __future__ import annotations

__all__ = ["human_duration"]


def human_duration(ms: int | None, missing: str = "-") -> str:
    """``ms`` milliseconds as ``850 ms``, ``1.5 s``, ``3 min 2 s``, ``5 h 1 min`` or
    ``3 d 2 h``; ``missing`` when there is none (None or negative)."""
    if ms is None or ms < 0:
        return missing
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"
