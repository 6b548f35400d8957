"""Outbound connections that acknowledge what they receive at once (Linux
``TCP_QUICKACK``), so that kept-alive connections do not stall.

A server that writes a response's headers and body in two segments (Python's
``http.server`` does, and so does any server that leaves Nagle's algorithm on and writes
twice) holds the body back until the headers are acknowledged; on a connection in use
for a while Linux delays that acknowledgement by about 40 ms. A fresh connection does not
(it starts in quick-ack mode), which is why plain http connections used to be closed
after each response. Quick-ack mode is not permanent: it is switched on before every
read here, as the kernel documentation (tcp(7), ``TCP_QUICKACK``) says it has to be.

:class:`QuickAckBackend` wraps an httpcore network backend (httpcore's public
``NetworkBackend``/``NetworkStream`` interface); :func:`quickack_transport` puts it under
an ``httpx.HTTPTransport``. Where the option does not exist (not Linux),
:data:`QUICKACK` is False and the caller keeps no plain http connection alive.
"""

from __future__ import annotations

import socket
import typing
from typing import Any

import httpcore
import httpx

_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)
#: whether this platform can switch quick-ack mode on (Linux)
QUICKACK = _TCP_QUICKACK is not None


def quickack(sock: Any) -> None:
    """Switch ``sock`` to quick-ack mode for what it receives next (no-op elsewhere)."""
    if _TCP_QUICKACK is None or sock is None:
        return
    try:  # noqa: SIM105 (every read calls this: a plain try costs nothing)
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
    except (OSError, AttributeError):
        pass  # not a TCP socket (a test double, a closed socket): nothing to do


class QuickAckStream(httpcore.NetworkStream):
    """A stream whose every read first switches its socket to quick-ack mode."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        quickack(self._inner.get_extra_info("socket"))
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return QuickAckStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class QuickAckBackend(httpcore.NetworkBackend):
    """Wraps ``inner``: the streams it opens are :class:`QuickAckStream`."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return QuickAckStream(
            self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        )

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return self._inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def quickack_transport(transport: httpx.HTTPTransport) -> httpx.HTTPTransport:
    """``transport`` with its connection pool opening :class:`QuickAckStream` streams.
    httpx 0.28 takes no network backend, so the pool's is wrapped in place (its
    ``_network_backend``; ``tests/unit/engine/runtime/builtins/test_outbound_clients.py``
    fails if that changes)."""
    pool: Any = transport._pool
    pool._network_backend = QuickAckBackend(pool._network_backend)
    return transport


__all__ = ["QUICKACK", "QuickAckBackend", "QuickAckStream", "quickack", "quickack_transport"]
