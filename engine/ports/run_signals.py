"""The run-signals port: what the control plane asks of the durable backend.

Adapters: :class:`~engine.adapters.run_signals_durable.DurableRunSignals` (over a
durabletask client: the embedded backend or the Durable Task Scheduler) and
:class:`~engine.adapters.run_signals_recording.RecordingRunSignals` (records the calls:
tests, and a control plane running without an engine).

A backend that cannot be used right now (unreachable, or not answering within the
call's deadline) raises :class:`RunSignalsUnavailable`; any other failure raises as
the adapter met it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


class RunSignalsUnavailable(Exception):
    """The durable backend cannot be used right now: it could not be reached, did not
    answer within the call's deadline, or (a start of a run again) still runs the
    run's previous execution. The same call may succeed when tried again
    (for a start whose answer was lost to a deadline: the run was perhaps started).

    ``reason`` says what went wrong in words safe to show a caller (no address, no
    details of the transport); ``detail`` names the underlying error (its class and
    status code) for the server's log. Raised chained to that error."""

    def __init__(self, reason: str, detail: str = "", *, maybe_done: bool = False) -> None:
        super().__init__(f"durable backend unavailable: {reason}")
        self.reason = reason
        self.detail = detail
        #: the call may have been carried out (its answer was lost to its deadline)
        self.maybe_done = maybe_done


@runtime_checkable
class RunSignals(Protocol):
    """What the control plane asks of the durable backend."""

    #: whether a call waits on another process (a gRPC round trip to the durable
    #: backend, milliseconds when it is busy): an event loop makes such calls from a
    #: thread (control_plane/api/tasks.py); False for an adapter that answers at once
    round_trips: bool

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None: ...

    def start_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        """Start (or, for a finished instance, start again) the interpreter for
        ``workflow_id`` with ``run_input`` (a ``RunInput`` in camelCase)."""
        ...

    def start_new_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        """Start the interpreter for the new run ``workflow_id``; an orchestration of
        that id that exists already (this start was made before) counts as started and
        is left as it is, finished or not."""
        ...

    def suspend(self, workflow_id: str, reason: str | None = None) -> None: ...

    def resume(self, workflow_id: str, reason: str | None = None) -> None: ...

    def ended_outside(self, workflow_id: str) -> str | None:
        """If the run's orchestration has ended (failed or terminated by the backend,
        not by the interpreter, which records its own end) the reason, else None."""
        ...

    def has_orchestration(self, workflow_id: str) -> bool:
        """Whether the backend holds an orchestration of ``workflow_id``, running or
        ended (a start whose answer was lost may have created it)."""
        ...
