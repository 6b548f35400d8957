"""The caller's W3C trace context (``traceparent`` header) as a route parameter."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

__all__ = ["CallerTrace"]


async def _caller_trace(http: Request) -> str | None:
    return http.headers.get("traceparent")


#: the caller's ``traceparent`` header, if any (engine/runtime/tracing.py)
CallerTrace = Annotated[str | None, Depends(_caller_trace)]
