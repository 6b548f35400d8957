"""Worker settings: constructor arguments, then environment variables."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_SERVER_URL = "http://127.0.0.1:8080"
DEFAULT_PAYLOAD_THRESHOLD = 10 * 1024


def _float(env: Mapping[str, str], key: str) -> float | None:
    raw = env.get(key, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not a number") from None


def _int(env: Mapping[str, str], key: str) -> int | None:
    value = _float(env, key)
    if value is None:
        return None
    if value != int(value) or value < 0:
        raise ValueError(f"{key}={env[key]!r} is not a non-negative integer")
    return int(value)


def _bool(env: Mapping[str, str], key: str) -> bool | None:
    raw = env.get(key, "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{key}={env[key]!r} is not true or false")


def type_env_prefix(task_type: str) -> str:
    """``STEPWAY_TASK_<TYPE>_``: the type upper-cased, other characters as ``_``."""
    return "STEPWAY_TASK_" + re.sub(r"[^A-Za-z0-9]", "_", task_type).upper() + "_"


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class TypeSettings:
    """The settings one task type runs with."""

    task_type: str
    threads: int
    poll_interval: float
    domain: str | None
    payload_threshold: int


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker process runs with.

    ``from_env`` reads ``STEPWAY_SERVER_URL``, ``STEPWAY_WORKER_ID``,
    ``STEPWAY_THREADS``, ``STEPWAY_POLL_INTERVAL`` (seconds), ``STEPWAY_DOMAIN``,
    ``STEPWAY_LONG_POLL_MS``, ``STEPWAY_PAYLOAD_THRESHOLD`` (bytes),
    ``STEPWAY_SHUTDOWN_GRACE`` (seconds), ``STEPWAY_RETRY_MAX`` (seconds),
    ``STEPWAY_NEXT_TASK_WITH_RESULT`` (``true``/``false``), and per task type
    ``STEPWAY_TASK_<TYPE>_THREADS|_POLL_INTERVAL|_DOMAIN|_PAYLOAD_THRESHOLD``.
    """

    server_url: str = DEFAULT_SERVER_URL
    worker_id: str = field(default_factory=default_worker_id)
    #: handler threads per task type
    threads: int = 1
    #: longest wait between two empty polls, seconds (the wait starts at 1 ms and doubles)
    poll_interval: float = 1.0
    domain: str | None = None
    #: server-side long-poll timeout of a batch poll, milliseconds
    long_poll_ms: int = 5000
    #: an output whose JSON is larger than this many bytes is uploaded, not posted
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD
    #: on SIGTERM: how long in-flight handlers and queued results get, seconds
    shutdown_grace: float = 30.0
    #: first and longest delay between two tries of a result post, seconds
    retry_initial: float = 0.1
    retry_max: float = 10.0
    #: HTTP timeout of every call except the long poll (which adds its own wait)
    http_timeout: float = 30.0
    #: post a result through ``update-v2``, which answers with the next task of the type
    #: for the thread that posted it (one request per task for a busy worker); off: the
    #: plain ``POST /api/tasks``, and only the poller takes tasks
    next_task_with_result: bool = True
    #: per-type environment overrides (``STEPWAY_TASK_<TYPE>_*``) are read from here
    env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> WorkerSettings:
        """Settings from the environment; keyword arguments win over it."""
        env = dict(os.environ if env is None else env)
        values: dict[str, Any] = {"env": env}
        if env.get("STEPWAY_SERVER_URL", "").strip():
            values["server_url"] = env["STEPWAY_SERVER_URL"].strip()
        if env.get("STEPWAY_WORKER_ID", "").strip():
            values["worker_id"] = env["STEPWAY_WORKER_ID"].strip()
        if env.get("STEPWAY_DOMAIN", "").strip():
            values["domain"] = env["STEPWAY_DOMAIN"].strip()
        for key, name, parse in (
            ("STEPWAY_THREADS", "threads", _int),
            ("STEPWAY_POLL_INTERVAL", "poll_interval", _float),
            ("STEPWAY_LONG_POLL_MS", "long_poll_ms", _int),
            ("STEPWAY_PAYLOAD_THRESHOLD", "payload_threshold", _int),
            ("STEPWAY_SHUTDOWN_GRACE", "shutdown_grace", _float),
            ("STEPWAY_RETRY_MAX", "retry_max", _float),
        ):
            value = parse(env, key)
            if value is not None:
                values[name] = value
        flag = _bool(env, "STEPWAY_NEXT_TASK_WITH_RESULT")
        if flag is not None:
            values["next_task_with_result"] = flag
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values).checked()

    def checked(self) -> WorkerSettings:
        if self.threads < 1:
            raise ValueError("threads must be at least 1")
        if self.poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        if not self.server_url.startswith(("http://", "https://")):
            raise ValueError(f"server URL {self.server_url!r} must be http(s)")
        return self

    def with_(self, **changes: Any) -> WorkerSettings:
        return replace(self, **changes).checked()

    def for_type(
        self,
        task_type: str,
        *,
        threads: int | None = None,
        poll_interval: float | None = None,
        domain: str | None = None,
        payload_threshold: int | None = None,
    ) -> TypeSettings:
        """Per-type settings: ``STEPWAY_TASK_<TYPE>_*`` > the decorator's options > these
        settings."""
        prefix = type_env_prefix(task_type)
        env_threads = _int(self.env, prefix + "THREADS")
        env_interval = _float(self.env, prefix + "POLL_INTERVAL")
        env_threshold = _int(self.env, prefix + "PAYLOAD_THRESHOLD")
        env_domain = self.env.get(prefix + "DOMAIN")
        resolved_domain = (
            (env_domain.strip() or None) if env_domain is not None else (domain or self.domain)
        )
        resolved = TypeSettings(
            task_type=task_type,
            threads=env_threads or threads or self.threads,
            poll_interval=env_interval or poll_interval or self.poll_interval,
            domain=resolved_domain,
            payload_threshold=(
                env_threshold
                if env_threshold is not None
                else payload_threshold
                if payload_threshold is not None
                else self.payload_threshold
            ),
        )
        if resolved.threads < 1:
            raise ValueError(f"{task_type}: threads must be at least 1")
        return resolved
