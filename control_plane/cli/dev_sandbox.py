"""Sandbox stand-ins for the connector worker's outside systems, for ``stepway dev`` only.

The connector worker (``workers/connector``) lodges returns with a tax authority and
fetches bank feeds, at URLs and with a credential it reads from its environment. On a
fresh machine none is set, so ``stepway dev --with-workers`` serves these sandboxes under
``/dev-sandbox/`` of its own control plane and hands their URLs and a random credential
to the worker processes, unless any of ``CONNECTOR_TAX_URL``, ``CONNECTOR_BANK_URL`` or
``CONNECTOR_API_KEY`` is set (then the worker gets exactly what the caller set).

They are NOT a tax authority or a bank: every answer is made up, marked
``"sandbox": true``, and lodgement ids start with ``SANDBOX-``. ``stepway serve`` never
mounts them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from typing import Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Header, Query

from control_plane.api.errors import ApiError

PREFIX = "/dev-sandbox"
TAX_PATH = f"{PREFIX}/tax"
BANK_PATH = f"{PREFIX}/bank"


class Sandbox:
    """The sandbox endpoints and the credential the connector worker must present."""

    def __init__(self) -> None:
        self.api_key = "sandbox-" + secrets.token_hex(16)
        self._lodgements: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def worker_env(self, base_url: str, environ: dict[str, str]) -> dict[str, str]:
        """Variables to give the connector worker: the sandbox's URLs and key when none
        of ``CONNECTOR_TAX_URL``, ``CONNECTOR_BANK_URL`` and ``CONNECTOR_API_KEY`` is set.
        If any is set the caller configured real systems, and nothing is added: a real
        credential never reaches the sandbox, and the sandbox's key never a real system."""
        names = ("CONNECTOR_TAX_URL", "CONNECTOR_BANK_URL", "CONNECTOR_API_KEY")
        if any(environ.get(name, "").strip() for name in names):
            return {}
        base = base_url.rstrip("/")
        return {
            "CONNECTOR_TAX_URL": base + TAX_PATH,
            "CONNECTOR_BANK_URL": base + BANK_PATH,
            "CONNECTOR_API_KEY": self.api_key,
        }

    def _check(self, authorization: str | None) -> None:
        expected = f"Bearer {self.api_key}"
        if authorization is None or not hmac.compare_digest(authorization, expected):
            raise ApiError(401, "the sandbox expects the credential stepway dev gave the worker")

    def lodge(self, idempotency_key: str | None, body: dict[str, Any]) -> dict[str, Any]:
        key = idempotency_key or secrets.token_hex(8)
        with self._lock:
            found = self._lodgements.get(key)
            if found is None:
                digest = hashlib.sha256(key.encode()).hexdigest()[:10].upper()
                found = {
                    "lodgementId": f"SANDBOX-{digest}",
                    "status": "LODGED",
                    "sandbox": True,
                    "reference": body.get("reference"),
                    "amount": body.get("amount"),
                }
                self._lodgements[key] = found
        return found

    def router(self) -> APIRouter:
        router = APIRouter(prefix=PREFIX, tags=["dev sandbox"], include_in_schema=False)

        @router.post("/tax/returns", summary="SANDBOX tax authority: lodge a return")
        def lodge_return(
            body: Annotated[dict[str, Any], Body()],
            authorization: Annotated[str | None, Header()] = None,
            idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
        ) -> dict[str, Any]:
            self._check(authorization)
            return self.lodge(idempotency_key, body)

        @router.get("/bank/feeds", summary="SANDBOX bank: a made-up feed of a period")
        def bank_feed(
            period: Annotated[str, Query(pattern=r"^\d{4}-\d{2}$")],
            accountId: str | None = None,
            authorization: Annotated[str | None, Header()] = None,
        ) -> dict[str, Any]:
            self._check(authorization)
            return {
                "sandbox": True,
                "transactions": [
                    {"date": f"{period}-01", "amount": -120.5, "description": "SANDBOX supplier"},
                    {"date": f"{period}-15", "amount": 980.0, "description": "SANDBOX customer"},
                ],
            }

        return router

    def mount(self, app: FastAPI) -> None:
        app.include_router(self.router())
