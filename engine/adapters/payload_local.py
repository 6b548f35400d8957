"""Local-directory adapter of the payload store (embedded mode, tests).

Payloads are files under ``root``; a reference is their relative path. Signed
URLs point at the control plane (``{base_url}/api/payloads/{reference}``) with
``?exp=<epoch seconds>&sig=<HMAC-SHA256>``; the signature covers the operation
(``read`` for GET, ``write`` for PUT), the reference and the expiry, keyed with a
secret from configuration. The control plane checks a request with
``verify_signature`` (or ``verify_url``) before serving it; that route is not here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from engine.ports.payload_store import (
    PayloadLimits,
    PayloadNotFound,
    SignedOperation,
    validate_reference,
)

ROUTE_PREFIX = "/api/payloads"


def _seconds(expires_in: timedelta | int) -> int:
    seconds = int(expires_in.total_seconds()) if isinstance(expires_in, timedelta) else expires_in
    if seconds <= 0:
        raise ValueError("expires_in must be positive")
    return seconds


class LocalPayloadStore:
    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        secret: str | bytes,
        base_url: str = "http://127.0.0.1:8080",
        limits: PayloadLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        key = secret.encode("utf-8") if isinstance(secret, str) else secret
        if len(key) < 16:
            raise ValueError("the payload URL signing secret must be at least 16 bytes")
        self._key = key
        self._root = Path(root).resolve()
        self._root.mkdir(parents=True, exist_ok=True)
        self._base_url = base_url.rstrip("/")
        self._limits = limits or PayloadLimits()
        self._clock = clock

    @property
    def limits(self) -> PayloadLimits:
        return self._limits

    @property
    def root(self) -> Path:
        return self._root

    def _path(self, reference: str) -> Path:
        return self._root.joinpath(*validate_reference(reference).split("/"))

    def put(self, key: str, data: bytes, content_type: str = "application/json") -> str:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename: a reader never sees a partial payload.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return key

    def get(self, reference: str) -> bytes:
        try:
            return self._path(reference).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            raise PayloadNotFound(reference) from None

    def exists(self, reference: str) -> bool:
        return self._path(reference).is_file()

    def delete(self, reference: str) -> bool:
        try:
            self._path(reference).unlink()
        except FileNotFoundError:
            return False
        return True

    # --- signed URLs ----------------------------------------------------------

    def _sign(self, reference: str, operation: SignedOperation, exp: int) -> str:
        message = f"{operation}\n{reference}\n{exp}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def signed_url(
        self, reference: str, operation: SignedOperation, expires_in: timedelta | int
    ) -> str:
        validate_reference(reference)
        if operation not in ("read", "write"):
            raise ValueError(f"unknown operation {operation!r}")
        exp = math.ceil(self._clock()) + _seconds(expires_in)
        sig = self._sign(reference, operation, exp)
        return f"{self._base_url}{ROUTE_PREFIX}/{quote(reference)}?exp={exp}&sig={sig}"

    def verify_signature(
        self,
        reference: str,
        operation: SignedOperation,
        exp: int | str,
        sig: str,
        *,
        now: float | None = None,
    ) -> bool:
        """True iff ``sig`` was made by this store's secret for exactly this
        reference, operation and expiry, and the expiry (epoch seconds) is still
        in the future."""
        try:
            expiry = int(exp)
            validate_reference(reference)
        except ValueError:
            return False
        current = self._clock() if now is None else now
        if expiry <= current:
            return False
        expected = self._sign(reference, operation, expiry)
        return hmac.compare_digest(expected.encode("ascii"), sig.encode("ascii", "replace"))

    def verify_url(
        self, url: str, operation: SignedOperation, *, now: float | None = None
    ) -> str | None:
        """The reference a signed URL (or its path + query) grants ``operation``
        on, or None when the URL is not valid for it."""
        parts = urlsplit(url)
        if not parts.path.startswith(ROUTE_PREFIX + "/"):
            return None
        reference = unquote(parts.path[len(ROUTE_PREFIX) + 1 :])
        query = parse_qs(parts.query)
        exp, sig = query.get("exp", [""])[0], query.get("sig", [""])[0]
        if not self.verify_signature(reference, operation, exp, sig, now=now):
            return None
        return reference
