"""HTTP calls to the Conductor-compatible Task API."""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx

from stepway_worker.auth import NoToken, TokenProvider

log = logging.getLogger("stepway_worker")

RETRYABLE_STATUS = frozenset({408, 425, 429})


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


def _detail(response: httpx.Response) -> str:
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
        self._http = httpx.Client(
            base_url=self.server_url,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": "stepway-worker/0.1"},
        )
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    # --- plumbing ----------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        token = self.tokens.token()
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _request(
        self,
        method: str,
        url: str,
        *,
        timeout: float | None = None,
        extra_headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        for attempt in (1, 2):
            try:
                response = self._http.request(
                    method,
                    url,
                    headers={**self._headers(), **(extra_headers or {})},
                    timeout=timeout if timeout is not None else self.timeout,
                    **kwargs,
                )
            except httpx.TransportError as exc:
                raise TransientError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            if response.status_code == 401 and attempt == 1:
                self.tokens.invalidate()  # a refreshed token may be accepted
                continue
            break
        status = response.status_code
        if status < 400:
            return response
        message = f"{method} {url}: {status} {_detail(response)}"
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
        self._request("POST", "/api/tasks", json=result, extra_headers=headers)

    def update_v2(
        self, result: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        """Post a TaskResult and take the next task of the same type for this worker
        (``POST /api/tasks/update-v2``): the task, handed out (leased) to this worker,
        or None when there is none (204). A task returned here is the caller's to
        execute, as one a poll returned."""
        response = self._request("POST", "/api/tasks/update-v2", json=result, extra_headers=headers)
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
            "POST", f"/api/tasks/{quote(task_id, safe='')}/log", json=line, timeout=timeout
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
