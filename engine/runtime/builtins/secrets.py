"""Secrets an HTTP task's request may carry, each bound to the hosts that may receive it.

A definition references a secret as ``${workflow.secrets.NAME}``; the reference stays its
text in the run's state and rows (engine/language/secret_refs.py). The HTTP activity
reveals it in the request's URI (path and query), headers and body, and only when the
request's host is one the secret is bound to: a run's input or a worker's output may set
the URI, and whoever sets it must not receive a secret meant for another service. A
secret that is not bound, or has no value, or is meant for another host fails the task
terminally, naming the secret and the host, never the value. Every value revealed in a
call is masked (``***``) in what the task records: its output and its reason.

Values come from the engine's environment (``STEPWAY_SECRET_<NAME>``, Key Vault
references on Azure), bindings from ``STEPWAY_SECRET_HOSTS`` (engine/app/config.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.runtime.builtins.destinations import host_may_receive

__all__ = ["MASK", "SecretRefused", "Secrets", "env_name", "mask"]

#: what a revealed value becomes in a task's recorded output and reason
MASK = "***"


def env_name(name: str) -> str:
    """The environment variable holding secret ``name``'s value."""
    return "STEPWAY_SECRET_" + "".join(c if c.isalnum() else "_" for c in name.upper())


class SecretRefused(ValueError):
    """A secret the request may not carry (not bound, no value, another host)."""


class Secrets:
    """The bound secrets of an engine process. Its ``repr`` names no value."""

    def __init__(
        self,
        values: Mapping[str, str] | None = None,
        hosts: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._values = dict(values or {})
        self._hosts = dict(hosts or {})

    def __repr__(self) -> str:
        return f"Secrets({sorted(self._hosts)})"

    def value_for(self, name: str, url: str) -> str:
        """``name``'s value for a request to ``url``, or :class:`SecretRefused`."""
        hosts = self._hosts.get(name)
        if hosts is None:
            raise SecretRefused(
                f"secret {name!r} is not bound to any host (STEPWAY_SECRET_HOSTS, "
                "docs/configuration.md)"
            )
        if not host_may_receive(hosts, url):
            raise SecretRefused(
                f"secret {name!r} may not be sent to this request's host: it is bound to "
                f"{', '.join(hosts)}"
            )
        value = self._values.get(name)
        if not value:
            raise SecretRefused(f"secret {name!r} has no value ({env_name(name)} is not set)")
        return value


def mask(value: Any, revealed: set[str]) -> Any:
    """A copy of a JSON value with every revealed secret value in its strings (and its
    keys) replaced by :data:`MASK`, longest first."""
    if not revealed:
        return value
    ordered = sorted(revealed, key=len, reverse=True)

    def text(item: str) -> str:
        for secret in ordered:
            if secret in item:
                item = item.replace(secret, MASK)
        return item

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return text(item)
        if isinstance(item, dict):
            return {text(k) if isinstance(k, str) else k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value)
