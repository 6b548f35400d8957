"""A real gRPC peer for outage tests of the durable backend's clients: a server on a
free port of 127.0.0.1 that ends every call with one status code and ``details``, as a
backend (or a proxy in front of it) failing every call would."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc


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
