"""Local-directory adapter of the payload store (embedded mode, tests).

Payloads are files under ``root``; a reference is their relative path. Signed
URLs point at the control plane (``{base_url}/api/payloads/{reference}``) with
``?exp=<epoch seconds>&sig=<HMAC-SHA256>``; the signature covers the operation
(``read`` for GET, ``write`` for PUT), the reference and the expiry, keyed with a
secret from configuration. The control plane checks a request with
``verify_signature`` (or ``verify_url``) before serving it; that route is not here.

A file system error that can pass with no change to data or code (a disk full or
failed, over quota, read-only after an error, out of file handles, a network share
gone stale) raises ``PayloadStoreUnavailable`` naming the directory and the errno,
chained to the ``OSError``; a missing file ``PayloadNotFound``; any other error (no
permission, a path that is not a directory) as the file system raised it.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import hmac
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from engine.ports.payload_store import (
    PayloadLimits,
    PayloadNotFound,
    PayloadStoreUnavailable,
    SignedOperation,
    validate_reference,
)

ROUTE_PREFIX = "/api/payloads"

#: errno values that mean "the file system cannot be used right now"
_OUTAGE_ERRNOS = frozenset(
    code
    for code in (
        errno.ENOSPC,  # no space left
        getattr(errno, "EDQUOT", None),  # over quota
        errno.EIO,  # I/O error
        errno.EROFS,  # read-only (a file system remounted after errors)
        errno.EAGAIN,
        errno.EBUSY,
        errno.EINTR,
        errno.ENOMEM,
        errno.EMFILE,  # out of file handles: the process
        errno.ENFILE,  # out of file handles: the system
        errno.ETIMEDOUT,
        getattr(errno, "ESTALE", None),  # a network share gone stale
    )
    if code is not None
)


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

    @contextlib.contextmanager
    def _calling(self, operation: str) -> Iterator[None]:
        """An outage of the file system during ``operation`` as the port's error."""
        try:
            yield
        except OSError as exc:
            code = exc.errno
            if code is None or code not in _OUTAGE_ERRNOS:
                raise
            name = errno.errorcode.get(code, str(code))
            raise PayloadStoreUnavailable(
                f"the payload directory {str(self._root)!r} cannot be used to {operation}: "
                f"{os.strerror(code)} ({name})",
                f"{type(exc).__name__} {name}",
            ) from exc

    def put(self, key: str, data: bytes, content_type: str = "application/json") -> str:
        path = self._path(key)
        with self._calling(f"write {key}"):
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
        path = self._path(reference)
        with self._calling(f"read {reference}"):
            try:
                return path.read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                raise PayloadNotFound(reference) from None

    def exists(self, reference: str) -> bool:
        path = self._path(reference)
        with self._calling(f"look up {reference}"):
            return path.is_file()

    def delete(self, reference: str) -> bool:
        path = self._path(reference)
        with self._calling(f"delete {reference}"):
            try:
                path.unlink()
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
