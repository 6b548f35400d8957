"""The gate of built-in steps done in orchestration work items
(engine/runtime/local_steps.py): slots, slow tasks, and what a failing step leaves."""

from __future__ import annotations

import threading
import time

import pytest

from engine.runtime import local_steps
from engine.runtime.local_steps import LocalSteps, NotHere

HTTP = ("HTTP", "call", "h")


def test_a_step_runs_only_while_a_slot_is_free() -> None:
    gate = LocalSteps(slots=1)
    inside, leave = threading.Event(), threading.Event()

    def held() -> str:
        inside.set()
        leave.wait(5)
        return "first"

    results: list[str | None] = []
    holder = threading.Thread(target=lambda: results.append(gate.run(HTTP, held)))
    holder.start()
    assert inside.wait(5)
    ran: list[int] = []

    assert gate.run(("INLINE", "other", "i"), lambda: ran.append(1) or "second") is None
    assert ran == []  # declined without running

    leave.set()
    holder.join(5)
    assert results == ["first"]
    assert gate.run(("INLINE", "other", "i"), lambda: "third") == "third"


def test_at_least_one_slot() -> None:
    assert LocalSteps(slots=0).run(HTTP, lambda: 1) == 1


def test_a_task_once_slow_is_declined_from_then_on_and_others_are_not() -> None:
    gate = LocalSteps(slots=2, within_seconds=0.01)

    assert gate.run(HTTP, lambda: time.sleep(0.03) or "slow") == "slow"

    ran: list[int] = []
    assert gate.run(HTTP, lambda: ran.append(1)) is None and ran == []
    assert gate.run(("HTTP", "call", "other"), lambda: "fast") == "fast"
    assert gate.run(("HTTP", "call", "other"), lambda: "fast") == "fast"


def test_a_step_that_raises_gives_its_slot_back_and_is_not_slow() -> None:
    gate = LocalSteps(slots=1)

    def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        gate.run(HTTP, boom)
    assert gate.run(HTTP, lambda: "again") == "again"


def test_a_step_that_cannot_be_done_here_is_declined_and_its_task_from_then_on() -> None:
    """A call cut short at the bound, or a method not safe to make again: None now, and
    the task is not tried here again (its slot given back)."""
    gate = LocalSteps(slots=1)

    def cut() -> None:
        raise NotHere("POST is not safe to make again")

    assert gate.run(HTTP, cut) is None
    ran: list[int] = []
    assert gate.run(HTTP, lambda: ran.append(1)) is None and ran == []
    assert gate.run(("INLINE", "other", "i"), lambda: "free") == "free"


def test_slow_tasks_are_remembered_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A definition with ever new task references cannot grow the memory: past the bound
    the slow task known longest is forgotten."""
    monkeypatch.setattr(local_steps, "_REMEMBERED", 3)
    gate = LocalSteps(slots=1, within_seconds=0.0)
    tasks = [("HTTP", "call", f"h{i}") for i in range(4)]
    for task in tasks:
        gate.run(task, lambda: time.sleep(0.001))

    assert not gate.is_slow(tasks[0])
    assert all(gate.is_slow(task) for task in tasks[1:])


def test_a_call_handed_over_answers_at_once_or_is_kept_for_the_activity() -> None:
    gate = LocalSteps(slots=1, within_seconds=0.05)

    assert gate.hand_over("quick", lambda: "now") == "now"
    assert gate.take("quick") is None

    release = threading.Event()

    def slow() -> str:
        release.wait(5)
        return "later"

    with pytest.raises(NotHere) as raised:
        gate.hand_over("slow", slow)
    assert raised.value.remember
    release.set()
    taken = gate.take("slow")
    assert taken is not None and taken.result(5) == "later"
    assert gate.take("slow") is None  # taken once
