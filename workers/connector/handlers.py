"""Connector worker handlers: calls to systems whose credential only this worker
holds (docs/architecture.md, "Worker code areas": the credential stays in its own
service).

* ``fetch_bank_feed``: ``GET {CONNECTOR_BANK_URL}/feeds?period=&accountId=``
* ``lodge_return``: ``POST {CONNECTOR_TAX_URL}/returns`` with an ``Idempotency-Key``
  (the task id, stable across retries) so that a retried lodgement is not lodged
  twice.

The credential is read from ``CONNECTOR_API_KEY`` (in Azure: the catalog's
``connector-api-key`` Key Vault secret, which only this app's identity can read,
mounted as that environment variable) and sent as a bearer token. It never appears in
task input or output, logs or errors. The URLs come from the catalog's ``env``.

A 4xx answer (except 408/429) is a terminal error; a connection error, 5xx, 408 or
429 fails the attempt so that the engine retries it.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
from pydantic import Field
from stepway_worker import TaskContext, TerminalError, worker_task


def _env(*names: str) -> str:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    raise TerminalError(f"the connector worker is not configured: set {names[0]}")


def _call(method: str, url: str, **kwargs: Any) -> Any:
    key = _env("CONNECTOR_API_KEY")
    headers = {"Authorization": f"Bearer {key}", **kwargs.pop("headers", {})}
    try:
        response = httpx.request(method, url, headers=headers, timeout=60, **kwargs)
    except httpx.TransportError as exc:
        raise RuntimeError(f"{method} {url}: {type(exc).__name__}") from None  # retried
    status = response.status_code
    if status >= 500 or status in (408, 429):
        raise RuntimeError(f"{method} {url}: {status}")
    if status >= 400:
        raise TerminalError(f"{method} {url}: {status} {response.text[:300]}")
    return response.json() if response.content else {}


@worker_task("fetch_bank_feed")
def fetch_bank_feed(
    ctx: TaskContext,
    period: str = Field(pattern=r"^\d{4}-\d{2}$"),
    account_id: str | None = None,
) -> dict[str, Any]:
    base = _env("CONNECTOR_BANK_URL").rstrip("/")
    params = {"period": period, **({"accountId": account_id} if account_id else {})}
    body = _call("GET", f"{base}/feeds", params=params)
    transactions = body.get("transactions", []) if isinstance(body, dict) else body
    if not isinstance(transactions, list):
        raise TerminalError("the bank feed has no transactions list")
    ctx.log(f"fetched {len(transactions)} transactions for {period}")
    return {"period": period, "accountId": account_id, "transactions": transactions}


@worker_task("lodge_return")
def lodge_return(
    ctx: TaskContext,
    document_url: str,
    amount: float | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    base = _env("CONNECTOR_TAX_URL").rstrip("/")
    body = _call(
        "POST",
        f"{base}/returns",
        json={"documentUrl": document_url, "amount": amount, "reference": reference},
        headers={"Idempotency-Key": ctx.task_id},
    )
    if not isinstance(body, dict) or not body.get("lodgementId"):
        raise RuntimeError("the tax authority's answer has no lodgementId")
    ctx.log(f"lodged {reference or document_url}: {body['lodgementId']}")
    return {"lodgementId": str(body["lodgementId"]), "status": str(body.get("status", "LODGED"))}
