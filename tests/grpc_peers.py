"""Real gRPC peers for outage tests of the durable backend's clients: servers on a free
port of 127.0.0.1 that end every call with one status code and ``details``, as a
backend (or a proxy in front of it) failing every call would, or that answer no call,
as a backend that hangs; and the address of a backend that is not there."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc

#: the sockets that keep the ports of :func:`unreachable_address` taken while tests run
_HELD: list[socket.socket] = []


def unreachable_address() -> str:
    """``127.0.0.1:<port>`` where nothing listens, for as long as the tests run. The
    port stays bound (not listening), so no later peer of this module gets it: gRPC
    shares a connection to an address between a process's channels with the same
    options, and one a client left backing off after "connection refused" would fail a
    later client's calls to a peer that took the port, as UNAVAILABLE, without trying."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    _HELD.append(held)
    return f"127.0.0.1:{held.getsockname()[1]}"


class _Answer(grpc.GenericRpcHandler):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        self.details = details

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            context.abort(self.code, self.details)
            raise AssertionError("abort returns no answer")

        return grpc.unary_unary_rpc_method_handler(answer)


@contextmanager
def grpc_peer(code: grpc.StatusCode, details: str) -> Iterator[str]:
    """The address (``127.0.0.1:<port>``) of a server that ends every call with
    ``code`` and ``details``."""
    server = grpc.server(ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((_Answer(code, details),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


class _Hold(grpc.GenericRpcHandler):
    """Answers no call: holds each until its caller gives up (its deadline), noting the
    method and the time the caller gave it (``time_remaining``, None for none)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float | None]] = []
        self.stopped = threading.Event()

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        method = str(handler_call_details.method)

        def hold(request: bytes, context: grpc.ServicerContext) -> bytes:
            self.calls.append((method, context.time_remaining()))
            while context.is_active() and not self.stopped.wait(0.02):
                pass
            context.abort(grpc.StatusCode.UNAVAILABLE, "the peer stopped")
            raise AssertionError("abort returns no answer")

        return grpc.unary_unary_rpc_method_handler(hold)


@contextmanager
def grpc_silent_peer() -> Iterator[tuple[str, list[tuple[str, float | None]]]]:
    """The address of a server that accepts every call and never answers (a backend
    that hangs), and the list of the calls it held: (method, seconds the caller gave
    it or None)."""
    handler = _Hold()
    server = grpc.server(ThreadPoolExecutor(8))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", handler.calls
    finally:
        handler.stopped.set()
        server.stop(None)
