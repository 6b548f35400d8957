"""What one gRPC call costs, the transport under every step: ``uv run python -m
bench.grpc_unary [--calls 2000] [--rounds 3]``.

Every step of a workflow on a durabletask backend makes unary calls to it (an
activity's ``CompleteActivityTask``, an orchestrator work item's
``CompleteOrchestratorTask``, the Task API's ``RaiseEvent``, a client's waits) and receives
its work items on a stream. This times, in one process as in ``stepway dev``, back to
back on one thread, the median wall time and the process's CPU per call of:

* ``echo``: a gRPC server with one generic handler that returns the request bytes (no
  protobuf, no servicer): what the transport alone costs (grpcio's client, its server's
  polling thread and its handler pool);
* ``backend``: ``GetInstance`` of an unknown instance on Stepway's embedded backend
  (``bench.stepway_setup.embedded_backend``: Stepway's server and its options), with
  durabletask's generated stub: the transport plus protobuf and a lookup;
* ``direct``: the same servicer method called as a function (a request built and
  serialised and parsed, no transport): what the backend's own work costs.

The difference between the first two rows and the third is what a call pays for the
protocol's transport; docs/benchmarks.md ("Where the time goes") puts it next to a step.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import durabletask.internal.orchestrator_service_pb2 as pb
import durabletask.internal.orchestrator_service_pb2_grpc as stubs
import grpc

from bench.stepway_setup import embedded_backend


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _time(call: Callable[[], Any], calls: int, rounds: int) -> tuple[float, float]:
    """(median wall us of a call, median over rounds of the process's CPU us a call)."""
    for _ in range(min(300, calls)):
        call()
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(rounds):
        cpu0 = _cpu()
        for _ in range(calls):
            started = time.perf_counter()
            call()
            walls.append(time.perf_counter() - started)
        cpus.append((_cpu() - cpu0) / calls)
    return statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6


class _NoContext:
    """The servicer context of a direct call: GetInstance of an unknown id uses none."""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise RuntimeError(f"{code}: {details}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows: list[tuple[str, float, float]] = []

    echo_server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    echo_server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Echo",
                {"Echo": grpc.unary_unary_rpc_method_handler(lambda request, context: request)},
            ),
        )
    )
    port = echo_server.add_insecure_port("127.0.0.1:0")
    echo_server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        echo = channel.unary_unary("/bench.Echo/Echo")
        rows.append(("echo", *_time(lambda: echo(b"x"), args.calls, args.rounds)))
    echo_server.stop(0)

    backend = embedded_backend()
    address = backend.address
    request = pb.GetInstanceRequest(instanceId="bench-unknown")
    try:
        with grpc.insecure_channel(address) as channel:
            stub: Any = stubs.TaskHubSidecarServiceStub(channel)  # type: ignore[no-untyped-call]
            rows.append(
                ("backend", *_time(lambda: stub.GetInstance(request), args.calls, args.rounds))
            )
        servicer, context = backend.servicer, _NoContext()

        def direct() -> None:
            wire = request.SerializeToString()
            answer = servicer.GetInstance(pb.GetInstanceRequest.FromString(wire), context)
            pb.GetInstanceResponse.FromString(answer.SerializeToString())

        rows.append(("direct", *_time(direct, args.calls, args.rounds)))
    finally:
        backend.stop()

    print(f"{args.calls} calls x {args.rounds} rounds, one thread, one process")
    print(f"{'call':<8} {'wall us (median)':>17} {'CPU us a call':>14}")
    for name, wall, cpu in rows:
        print(f"{name:<8} {wall:>17.0f} {cpu:>14.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
