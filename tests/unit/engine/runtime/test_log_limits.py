"""engine/runtime/log_limits.py: at most one process log line per key per window."""

from __future__ import annotations

from engine.runtime.log_limits import OncePerWindow


def test_the_first_line_of_a_window_is_written_and_counts_those_held_back() -> None:
    lines = OncePerWindow(10_000)
    assert lines.admit("t", 1_000) == 0
    assert lines.admit("t", 1_001) is None
    assert lines.admit("t", 10_999) is None
    # the window after the first line: written, with the two held back
    assert lines.admit("t", 11_000) == 2
    assert lines.admit("t", 11_500) is None
    assert lines.admit("t", 30_000) == 1


def test_keys_have_windows_of_their_own() -> None:
    lines = OncePerWindow(10_000)
    assert lines.admit("a", 0) == 0
    assert lines.admit("b", 1) == 0
    assert lines.admit("a", 2) is None
    assert lines.admit("b", 3) is None
