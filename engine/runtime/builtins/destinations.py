"""Which hosts may receive what the engine holds for a service: an identity token for a
scope (``ActivityDeps.token_hosts``) or a secret (engine/runtime/builtins/secrets.py).

A pattern is a host name (``api.example.com``) or ``*.`` and a domain (``*.example.com``:
any host under it, not the domain itself); matching is case-insensitive and ignores the
port. engine/app/config.py checks the patterns' form when it reads them.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx

__all__ = ["host_may_receive"]


def host_may_receive(patterns: Iterable[str], url: str) -> bool:
    """Whether ``url``'s host is one of ``patterns``."""
    try:
        host = httpx.URL(url).host.lower().rstrip(".")
    except (httpx.InvalidURL, TypeError):
        return False
    if not host:
        return False
    for pattern in patterns:
        wanted = pattern.strip().lower().rstrip(".")
        if wanted.startswith("*."):
            if host.endswith(wanted[1:]) and len(host) > len(wanted) - 1:
                return True
        elif wanted and host == wanted:
            return True
    return False
