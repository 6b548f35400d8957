"""The engine worker's own calls to the Durable Task Scheduler have a deadline.

durabletask's worker completes each work item with a unary call that sets none
(``CompleteActivityTask``, ``CompleteOrchestratorTask``): against a Scheduler that takes
the work item's completion and never answers, the worker's thread would be held for as
long as it hangs. The sidecar here is a real gRPC server speaking the durabletask
protocol, reached by the Scheduler's worker (an ``http://`` endpoint, which it reaches
without TLS, and a fixed token, as Azure cannot be reached from here): it hands out one
activity work item, then holds its completion. (The embedded backend's worker sets no
such deadline: engine/adapters/backend/connect.py says why.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc
from azure.core.credentials import AccessToken
from durabletask.internal import orchestrator_service_pb2 as pb
from durabletask.internal import orchestrator_service_pb2_grpc as pb_grpc
from google.protobuf import empty_pb2, wrappers_pb2

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_worker, register, running

# gRPC sends a deadline as a timeout header rounded up, read on the peer's own clock
SLACK = 0.02


class _HangingSidecar(pb_grpc.TaskHubSidecarServiceServicer):  # type: ignore[misc]
    """Hands out one activity work item and holds every completion until its caller
    gives up, noting the time the caller gave it (None: no deadline)."""

    def __init__(self) -> None:
        self.completions: list[float | None] = []
        self.streams: list[float | None] = []
        self.completion_ended = threading.Event()
        self.stopped = threading.Event()
        self._handed = False

    def Hello(self, request: Any, context: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()

    def GetWorkItems(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self.streams.append(context.time_remaining())
        if not self._handed:
            self._handed = True
            yield pb.WorkItem(
                activityRequest=pb.ActivityRequest(
                    name="noop",
                    taskId=1,
                    orchestrationInstance=pb.OrchestrationInstance(instanceId="wf-1"),
                    input=wrappers_pb2.StringValue(value="null"),
                ),
                completionToken="token-1",
            )
        while context.is_active() and not self.stopped.wait(0.05):
            pass

    def CompleteActivityTask(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.completions.append(context.time_remaining())
        while context.is_active() and not self.stopped.wait(0.02):
            pass
        self.completion_ended.set()
        context.abort(grpc.StatusCode.UNAVAILABLE, "the sidecar stopped")


@contextmanager
def hanging_sidecar() -> Iterator[tuple[str, _HangingSidecar]]:
    sidecar = _HangingSidecar()
    server = grpc.server(ThreadPoolExecutor(8))
    pb_grpc.add_TaskHubSidecarServiceServicer_to_server(sidecar, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", sidecar
    finally:
        sidecar.stopped.set()
        server.stop(None)


def noop(ctx: Any, _: Any) -> None:
    return None


class _FixedToken:
    """A TokenCredential that always gives the same token (the sidecar checks none)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("token", int(time.time()) + 3600)


def test_a_work_item_completion_the_backend_never_answers_ends_at_the_call_timeout() -> None:
    with hanging_sidecar() as (address, sidecar):
        config = BackendConfig.from_env(
            {
                "STEPWAY_BACKEND_KIND": "azure",
                "STEPWAY_BACKEND_ENDPOINT": f"http://{address}",
                "STEPWAY_BACKEND_TASK_HUB": "hub",
                "STEPWAY_BACKEND_CALL_TIMEOUT_SECONDS": "0.5",
            }
        )
        worker = make_worker(config, credential=_FixedToken())
        register(worker, "activities", {}, {"noop": noop})
        with running(worker):
            # without a deadline the call is held until the sidecar stops (not in 5 s)
            ended = sidecar.completion_ended.wait(5)
            sidecar.stopped.set()  # (else the worker's stop waits for the held call)
            assert ended, "the completion was held past its deadline"
    [given] = sidecar.completions  # the configured timeout, not the default 10 s
    assert given is not None and 0.4 < given <= 0.5 + SLACK
    # the stream of work items lasts as long as the worker: no deadline
    # (gRPC's server reads "none" as None or as the largest time it can hold)
    assert sidecar.streams and all(given is None or given > 1e9 for given in sidecar.streams)
