"""engine/adapters/run_signals_durable.py when the durable backend cannot be used: a
real durabletask client against a port nothing listens on, and against a gRPC server
that answers every call ``UNAVAILABLE`` or ``DEADLINE_EXCEEDED``. Each is an outage,
``RunSignalsUnavailable``, naming the status code and never the details the transport
gives (addresses, debug strings). Any other status is not an outage: a start answered
so is the server's error (tests/unit/control_plane/api/test_start_failures.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.ports.run_signals import RunSignalsUnavailable
from tests.grpc_peers import grpc_peer, grpc_silent_peer
from tests.unit.control_plane.conftest import free_port

#: what the server says beside its status code, as a proxy in front of the backend would
DETAILS = "upstream connect error: 10.20.30.40:4001 reset"

#: each call of the adapter that reaches the backend
CALLS: dict[str, Callable[[DurableRunSignals], Any]] = {
    "start_run": lambda s: s.start_run("wf-1", {"name": "wf"}),
    "start_new_run": lambda s: s.start_new_run("wf-1", {"name": "wf"}),
    "raise_event": lambda s: s.raise_event("wf-1", "go", {"n": 1}),
    "suspend": lambda s: s.suspend("wf-1", "paused"),
    "resume": lambda s: s.resume("wf-1", "resumed"),
    "ended_outside": lambda s: s.ended_outside("wf-1"),
}


def signals_at(address: str) -> DurableRunSignals:
    client = make_client(BackendConfig.from_env({"STEPWAY_BACKEND_ADDRESS": address}))
    return DurableRunSignals(client)


@pytest.mark.parametrize("call", CALLS)
def test_a_backend_nothing_listens_for_is_an_outage(call: str) -> None:
    port = free_port()
    with pytest.raises(RunSignalsUnavailable) as err:
        CALLS[call](signals_at(f"127.0.0.1:{port}"))
    assert str(err.value) == (
        "durable backend unavailable: the durable backend could not be reached (gRPC UNAVAILABLE)"
    )
    assert isinstance(err.value.__cause__, grpc.RpcError)
    assert "UNAVAILABLE" in err.value.detail and str(port) not in err.value.detail


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (grpc.StatusCode.UNAVAILABLE, "could not be reached (gRPC UNAVAILABLE)"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "did not answer in time (gRPC DEADLINE_EXCEEDED)"),
    ],
)
@pytest.mark.parametrize("call", CALLS)
def test_a_backend_answering_unavailable_or_deadline_exceeded_is_an_outage(
    call: str, code: grpc.StatusCode, says: str
) -> None:
    with grpc_peer(code, DETAILS) as address, pytest.raises(RunSignalsUnavailable) as err:
        CALLS[call](signals_at(address))
    assert str(err.value) == f"durable backend unavailable: the durable backend {says}"
    assert DETAILS not in str(err.value) and DETAILS not in err.value.detail


# gRPC sends a deadline as a timeout header rounded up, coarser the longer it is, and the
# peer reads it on its own clock: the time a held call is left can exceed the caller's
# (0.5005 s seen for 0.5 s, 3.0095 s for 3 s).
SLACK = 0.02
LONG_SLACK = 0.05


@pytest.mark.parametrize("call", CALLS)
def test_a_backend_that_never_answers_is_an_outage_after_the_call_timeout(call: str) -> None:
    """durabletask's client sets no deadline of its own: Stepway's clients give every
    call that has none ``STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS`` (engine/adapters/backend/
    deadlines.py), so a backend that accepts calls and hangs is an outage, not a caller
    held for as long as it hangs."""
    with grpc_silent_peer() as (address, held):
        env = {"STEPWAY_BACKEND_ADDRESS": address, "STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS": "0.5"}
        signals = DurableRunSignals(make_client(BackendConfig.from_env(env)))
        with pytest.raises(RunSignalsUnavailable) as err:
            CALLS[call](signals)
    assert "did not answer in time (gRPC DEADLINE_EXCEEDED)" in str(err.value)
    # each call the peer held had the deadline (a call may time out while it connects)
    assert all(given is not None and given <= 0.5 + SLACK for _, given in held), held


def test_waits_keep_the_timeout_their_caller_gives() -> None:
    """The deadline is for calls that set none: a wait for a run's end is given the
    time its caller asked for, longer than the other calls'."""
    env = {"STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS": "0.5"}
    with grpc_silent_peer() as (address, held):
        client = make_client(BackendConfig.from_env({**env, "STEPWAY_BACKEND_ADDRESS": address}))
        with pytest.raises(TimeoutError):  # durabletask's, for a wait that timed out
            client.wait_for_orchestration_completion("wf-1", timeout=3)
        with pytest.raises(RunSignalsUnavailable):
            DurableRunSignals(client).suspend("wf-1", "paused")
    [wait] = [given for method, given in held if method.endswith("/WaitForInstanceCompletion")]
    [suspend] = [given for method, given in held if method.endswith("/SuspendInstance")]
    assert wait is not None and 1.0 < wait <= 3 + LONG_SLACK, held
    assert suspend is not None and suspend <= 0.5 + SLACK, held


def test_the_call_timeout_is_checked() -> None:
    with pytest.raises(ValueError, match="call_timeout_seconds"):
        BackendConfig.from_env({"STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS": "0"})
