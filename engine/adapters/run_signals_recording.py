"""A :class:`~engine.ports.run_signals.RunSignals` that records what it was asked."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.ports.run_signals import RunSignalsUnavailable


@dataclass
class RecordedSignal:
    kind: Literal["event", "start", "suspend", "resume"]
    workflow_id: str
    name: str | None = None
    data: Any = None


@dataclass
class RecordingRunSignals:
    """A :class:`RunSignals` that only records what it was asked (tests, and a
    control plane running without an engine)."""

    calls: list[RecordedSignal] = field(default_factory=list)
    fail_next: Exception | None = None
    #: runs whose orchestration a test declares ended outside the interpreter
    ended: dict[str, str] = field(default_factory=dict)
    #: the runs ``ended_outside`` was asked about, in turn
    asked_outside: list[str] = field(default_factory=list)
    #: while set, starts fail as with a backend that cannot be reached (an outage)
    refuse_starts: bool = False
    #: the starts of these runs fail so too, whatever ``refuse_starts`` says
    refuse_runs: set[str] = field(default_factory=set)
    #: the runs whose start failed so, once per refused start
    refused: list[str] = field(default_factory=list)
    #: runs whose orchestration the backend holds without a start recorded here (a
    #: start whose answer was lost)
    held: set[str] = field(default_factory=set)
    #: answers at once (a test may set it to stand for a backend a round trip away)
    round_trips: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, signal: RecordedSignal) -> None:
        with self._lock:
            if self.fail_next is not None:
                exc, self.fail_next = self.fail_next, None
                raise exc
            self.calls.append(signal)

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None:
        self._add(RecordedSignal("event", workflow_id, event_name, data))

    def start_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        self._start(workflow_id, run_input)

    def start_new_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        self._start(workflow_id, run_input)

    def _start(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        if self.refuse_starts or workflow_id in self.refuse_runs:
            with self._lock:
                self.refused.append(workflow_id)
            raise RunSignalsUnavailable("the durable backend cannot be reached")
        self._add(RecordedSignal("start", workflow_id, None, run_input))

    def suspend(self, workflow_id: str, reason: str | None = None) -> None:
        self._add(RecordedSignal("suspend", workflow_id, None, reason))

    def resume(self, workflow_id: str, reason: str | None = None) -> None:
        self._add(RecordedSignal("resume", workflow_id, None, reason))

    def ended_outside(self, workflow_id: str) -> str | None:
        with self._lock:
            self.asked_outside.append(workflow_id)
        return self.ended.get(workflow_id)

    def has_orchestration(self, workflow_id: str) -> bool:
        """True once a start of the run was recorded, or the run is in ``held``; while
        ``refuse_starts`` is set the backend cannot be reached for this either."""
        if self.refuse_starts:
            raise RunSignalsUnavailable("the durable backend cannot be reached")
        with self._lock:
            if workflow_id in self.held:
                return True
            return any(c.kind == "start" and c.workflow_id == workflow_id for c in self.calls)

    def start_of(self, workflow_id: str, timeout: float = 10.0) -> RecordedSignal:
        """The last start of ``workflow_id``, once recorded (a start answered once
        stored is scheduled a moment later: control_plane/services/run_starts.py)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                starts = [
                    c for c in self.calls if c.kind == "start" and c.workflow_id == workflow_id
                ]
            if starts:
                return starts[-1]
            if time.monotonic() >= deadline:
                raise TimeoutError(f"run {workflow_id} was not started within {timeout} s")
            time.sleep(0.01)

    def events(self, name: str | None = None) -> list[RecordedSignal]:
        with self._lock:
            return [c for c in self.calls if c.kind == "event" and (name is None or c.name == name)]
