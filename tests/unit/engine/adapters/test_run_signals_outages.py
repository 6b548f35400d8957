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
from tests.grpc_peers import grpc_peer
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
