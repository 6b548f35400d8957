"""HTTP calls to the Conductor-compatible Task API.

The Task API calls go over :class:`~stepway_worker.keepalive.KeepAlivePool` (kept-alive
HTTP/1.1 connections: a worker makes one small request a task, and a general client's
per-call work was most of its CPU) when the connection to the server is direct; through
a proxy (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, as httpx reads them, ``NO_PROXY``
included), with a custom ``transport``, or with credentials in the URL they go through
httpx, as do uploads (:meth:`TaskClient.put`). Both ways verify TLS with the same
context (httpx's: certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import threading
import urllib.request
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

import httpx

from stepway_worker.auth import NoToken, TokenProvider
from stepway_worker.keepalive import KeepAlivePool, Reply

log = logging.getLogger("stepway_worker")

RETRYABLE_STATUS = frozenset({408, 425, 429})
USER_AGENT = "stepway-worker/0.1"


class TaskApiError(Exception):
    """A call to the Task API failed."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TransientError(TaskApiError):
    """Connection error, timeout, 5xx, 408 or 429: try again later."""


class ConflictError(TaskApiError):
    """409: the attempt is stale (another worker holds it, it timed out, it already
    has a different result). Never retried."""


class RejectedError(TaskApiError):
    """Any other 4xx: the request is wrong for good. Never retried as is."""


def _detail(response: Reply | httpx.Response) -> str:
    text = response.text[:500]
    try:
        body = response.json()
    except ValueError:
        return text
    if isinstance(body, dict):
        message = str(body.get("detail") or body.get("message") or body.get("title") or text)
        fields = [
            str(e.get("path"))
            for e in body.get("validationErrors") or []
            if isinstance(e, dict) and e.get("path") and str(e.get("path")) not in message
        ]
        return f"{message} (fields: {', '.join(fields)})" if fields else message
    return text


def _proxied(url: str) -> bool:
    """True when a proxy is configured for ``url``'s scheme (or for all schemes) in the
    environment (or, on Windows and macOS, the system settings), as httpx reads them;
    httpx then decides with ``NO_PROXY`` whether to use it."""
    proxies = urllib.request.getproxies()
    return bool(proxies.get(urlsplit(url).scheme) or proxies.get("all"))


def encode_json(value: Any) -> bytes:
    """A JSON request body, encoded as httpx encodes ``json=``."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class TaskClient:
    """One client per worker process (thread safe)."""

    def __init__(
        self,
        server_url: str,
        *,
        tokens: TokenProvider | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.server_url = server_url.rstrip("/")
        self.tokens = tokens or NoToken()
        self.timeout = timeout
        parts = urlsplit(self.server_url)
        # one TLS context for both ways, the one httpx would make
        context: ssl.SSLContext | None = (
            httpx.create_ssl_context() if parts.scheme == "https" else None
        )
        self._http = httpx.Client(
            base_url=self.server_url,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
            verify=context if context is not None else True,
        )
        direct = (
            transport is None
            and parts.scheme in ("http", "https")
            and not parts.username
            and not parts.password
            and not _proxied(self.server_url)
        )
        #: the kept-alive connections of the Task API calls; None: they go through httpx
        self._pool = KeepAlivePool(self.server_url, ssl_context=context) if direct else None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self._http.close()

    # --- plumbing ----------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        token = self.tokens.token()
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _send(
        self,
        method: str,
        path: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float,
    ) -> Reply:
        if self._pool is not None:
            headers["User-Agent"] = USER_AGENT
            try:
                return self._pool.request(
                    method, target, body=body, headers=headers, timeout=timeout
                )
            except (OSError, http.client.HTTPException, ValueError) as exc:
                # ValueError: a header that would split the request, which httpx reports
                # as a transport error (LocalProtocolError) too
                raise TransientError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        try:
            response = self._http.request(
                method, target, content=body, headers=headers, timeout=timeout
            )
        except httpx.TransportError as exc:
            raise TransientError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        return Reply(response.status_code, response.content)

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        timeout: float | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> Reply:
        """One Task API call (``path`` below the server URL); a 401 is retried once with
        a fresh token. Raises :class:`TransientError` (connection error, timeout, 5xx,
        408, 425, 429), :class:`ConflictError` (409), :class:`RejectedError` (other 4xx)."""
        url = f"{path}?{urlencode(params)}" if params else path
        body = None if json_body is None else encode_json(json_body)
        wait = self.timeout if timeout is None else timeout
        for attempt in (1, 2):
            headers = self._headers()
            if body is not None:
                headers["Content-Type"] = "application/json"
            if extra_headers:
                headers.update(extra_headers)
            response = self._send(method, path, url, body, headers, wait)
            if response.status_code == 401 and attempt == 1:
                self.tokens.invalidate()  # a refreshed token may be accepted
                continue
            break
        status = response.status_code
        if status < 400:
            return response
        message = f"{method} {path}: {status} {_detail(response)}"
        if status >= 500 or status in RETRYABLE_STATUS:
            raise TransientError(message, status)
        if status == 409:
            raise ConflictError(message, status)
        raise RejectedError(message, status)

    # --- the Task API --------------------------------------------------------------------

    def poll(
        self,
        task_type: str,
        *,
        worker_id: str,
        count: int,
        timeout_ms: int,
        domain: str | None = None,
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"workerid": worker_id, "count": count, "timeout": timeout_ms}
        if domain:
            params["domain"] = domain
        response = self._request(
            "GET",
            f"/api/tasks/poll/batch/{quote(task_type, safe='')}",
            params=params,
            timeout=self.timeout + timeout_ms / 1000.0,
        )
        if response.status_code == 204 or not response.content:
            return []
        body = response.json()
        if not isinstance(body, list):
            raise RejectedError(f"poll of {task_type}: expected a list, got {type(body).__name__}")
        return [t for t in body if isinstance(t, dict)]

    def update(self, result: dict[str, Any], *, headers: dict[str, str] | None = None) -> None:
        """Post a TaskResult (``headers``: e.g. the ``traceparent`` of the post)."""
        self._request("POST", "/api/tasks", json_body=result, extra_headers=headers)

    def update_v2(
        self, result: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        """Post a TaskResult and take the next task of the same type for this worker
        (``POST /api/tasks/update-v2``): the task, handed out (leased) to this worker,
        or None when there is none (204). A task returned here is the caller's to
        execute, as one a poll returned."""
        response = self._request(
            "POST", "/api/tasks/update-v2", json_body=result, extra_headers=headers
        )
        if response.status_code == 204 or not response.content:
            return None
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "taskId" not in body:
            # the result was accepted (2xx): only the next task is unreadable
            log.error("update-v2 answered no task but %r", response.text[:200])
            return None
        return body

    def log(self, task_id: str, line: str, *, timeout: float = 5.0) -> None:
        self._request(
            "POST", f"/api/tasks/{quote(task_id, safe='')}/log", json_body=line, timeout=timeout
        )

    def get_task(self, task_id: str) -> dict[str, Any]:
        body = self._request("GET", f"/api/tasks/{quote(task_id, safe='')}").json()
        if not isinstance(body, dict):
            raise RejectedError(f"task {task_id}: expected an object")
        return body

    def storage_location(
        self,
        path: str,
        *,
        operation: str = "WRITE",
        payload_type: str = "TASK_OUTPUT",
        task_type: str | None = None,
    ) -> tuple[str, str]:
        """``(uri, path)`` to upload a payload to (the server may choose the path)."""
        params = {"path": path, "operation": operation, "payloadType": payload_type}
        if task_type:
            params["taskType"] = task_type
        body = self._request("GET", "/api/tasks/external-storage-location", params=params).json()
        if not isinstance(body, dict) or not body.get("uri") or not body.get("path"):
            raise RejectedError(f"external-storage-location gave no uri and path: {body!r}")
        return str(body["uri"]), str(body["path"])

    def put(self, uri: str, data: bytes, content_type: str) -> None:
        """PUT ``data`` to an upload URI (a signed Blob URL, or a URL of the control
        plane). The bearer token goes only to the control plane's own origin."""
        absolute = urljoin(self.server_url + "/", uri)
        same_origin = urlsplit(absolute)[:2] == urlsplit(self.server_url)[:2]
        headers = {"Content-Type": content_type, "x-ms-blob-type": "BlockBlob"}
        if same_origin:
            headers.update(self._headers())
        try:
            response = self._http.put(absolute, content=data, headers=headers)
        except httpx.TransportError as exc:
            raise TransientError(f"PUT upload: {type(exc).__name__}: {exc}") from exc
        status = response.status_code
        if status < 400:
            return
        message = f"PUT upload: {status} {_detail(response)[:300]}"
        if status >= 500 or status in RETRYABLE_STATUS:
            raise TransientError(message, status)
        raise RejectedError(message, status)
