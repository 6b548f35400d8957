"""How the control plane's HTTP server runs: the uvicorn settings ``stepway serve`` and
``stepway dev`` share.

**Kept-alive connections stay open for 10 minutes when idle** (uvicorn's default is
5 s). A client that sends a request on a kept-alive connection at the moment the server
closes it gets the connection reset: the request fails with no answer, and nothing says
whether it was carried out. Clients keep idle connections for a time of their own and
reuse them: httpx for 5 s, uvicorn's own 5 s, so a client idle for about 5 s raced the
server's close (``bench/`` saw a reset on the first read after a 5 s drain);
``requests``/urllib3 (Conductor's Python SDK) and this project's worker SDK
(``workers/sdk/stepway_worker/keepalive.py``) until the server closes; a proxy in front
of the control plane for as long as it likes. A server that closes idle connections
long after them leaves the closing to the client or the proxy, which do not race their
own next request. An idle connection costs the server a file descriptor and a few KB.
``stepway serve`` reads another value from ``STEPWAY_HTTP_KEEP_ALIVE_SECONDS``
(docs/configuration.md).
"""

from __future__ import annotations

from typing import Any, Literal

import uvicorn

__all__ = ["KEEP_ALIVE_SECONDS", "uvicorn_config"]

#: how long an idle kept-alive connection stays open (module docstring)
KEEP_ALIVE_SECONDS = 600

LogLevel = Literal["critical", "debug", "info", "warning", "error"]


def uvicorn_config(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: LogLevel,
    keep_alive_seconds: int = KEEP_ALIVE_SECONDS,
    **options: Any,
) -> uvicorn.Config:
    """uvicorn's configuration for the control plane's ``app`` (``options``: more of
    uvicorn's settings)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_keep_alive=keep_alive_seconds,
        **options,
    )
