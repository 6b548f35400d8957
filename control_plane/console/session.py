"""Who is looking at a console page, and the forms' protection against forgery.

* The caller is authenticated by the API's own authenticator
  (``app.state.authenticator``) and checked with the API's own ``require_role``: in
  ``none`` mode everyone is the anonymous admin (``stepway dev`` on loopback); otherwise
  the bearer token comes from the ``stepway_session`` cookie (HttpOnly,
  SameSite=Strict, Secure over HTTPS) set by the sign-in page, or from an
  ``Authorization`` header.
* Every form POST carries a CSRF token that must equal the ``stepway_csrf`` cookie
  (SameSite=Strict, so a cross-site form never sends it), and a present ``Origin`` header
  must be this server's. A forged POST gets 403 before any service is called.
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, Response

from control_plane.api.errors import ApiError
from control_plane.auth import ANONYMOUS, Authenticator, Principal, require_role
from control_plane.console.config import ConsoleSettings
from control_plane.console.oidc import Pending
from control_plane.deps import Settings

SESSION_COOKIE = "stepway_session"
CSRF_COOKIE = "stepway_csrf"
SIGNIN_COOKIE = "stepway_signin"
SIGNIN_PATH = "/signin"


class SignInRequired(Exception):
    """Raised by a page whose caller is not signed in: the console answers with a
    redirect to the sign-in page."""

    def __init__(self, next_url: str, message: str | None = None) -> None:
        super().__init__(message or "sign in to continue")
        self.next_url = next_url
        self.message = message


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def console_settings(request: Request) -> ConsoleSettings:
    value = getattr(settings_of(request), "console", None)
    return value if isinstance(value, ConsoleSettings) else ConsoleSettings()


def secure(request: Request) -> bool:
    return (
        console_settings(request).secure_cookies
        or request.url.scheme == "https"
        or request.headers.get("x-forwarded-proto", "").lower() == "https"
    )


def safe_next(value: str | None) -> str:
    """Only a path on this server (never ``//host`` or a full URL) is a place to go back to."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


@dataclass
class Viewer:
    """The caller of a console page."""

    principal: Principal
    csrf: str
    #: signed in through the sign-in page (shows "Sign out")
    signed_in: bool
    #: the CSRF cookie is new and must be set on the response
    new_csrf: bool
    secure: bool

    @property
    def can_operate(self) -> bool:
        return self.principal.has_role("operator")

    @property
    def is_admin(self) -> bool:
        return self.principal.has_role("admin")

    def finish(self, response: Response) -> Response:
        if self.new_csrf:
            set_cookie(response, CSRF_COOKIE, self.csrf, secure=self.secure, max_age=None)
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    def respond(self, body: str, status: int = 200) -> Response:
        return self.finish(HTMLResponse(body, status_code=status))


def set_cookie(
    response: Response,
    name: str,
    value: str,
    *,
    secure: bool,
    max_age: int | None,
    same_site: str = "strict",
    path: str = "/",
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        secure=secure,
        httponly=True,
        samesite=same_site,  # type: ignore[arg-type]
    )


def _csrf(request: Request) -> tuple[str, bool]:
    current = request.cookies.get(CSRF_COOKIE, "")
    if len(current) >= 32:
        return current, False
    return secrets.token_urlsafe(32), True


def token_of(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    cookie = request.cookies.get(SESSION_COOKIE)
    return cookie or None


def authenticate(request: Request) -> tuple[Principal, bool]:
    """The caller and whether they came through the sign-in page; raises
    :class:`SignInRequired` when a sign-in is needed."""
    settings = settings_of(request)
    next_url = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if settings.auth_mode == "none":
        return ANONYMOUS, False
    token = token_of(request)
    if token is None:
        raise SignInRequired(next_url)
    authenticator: Authenticator = request.app.state.authenticator
    try:
        principal = authenticator.authenticate(f"Bearer {token}")
    except ApiError as exc:
        if exc.status == 401:
            raise SignInRequired(next_url, f"Please sign in again ({exc.message}).") from None
        raise
    return principal, SESSION_COOKIE in request.cookies


def viewer(request: Request) -> Viewer:
    """FastAPI dependency of every console page: an authenticated reader."""
    principal, signed_in = authenticate(request)
    require_role(principal, "reader")
    csrf, new = _csrf(request)
    return Viewer(principal, csrf, signed_in, new, secure(request))


CurrentViewer = Annotated[Viewer, Depends(viewer)]


async def form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body that passed the CSRF checks."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    origin = request.headers.get("origin")
    if origin and origin != "null":
        here = f"{request.url.scheme}://{request.url.netloc}"
        host = request.headers.get("host", "")
        if origin != here and urlsplit(origin).netloc != host:
            raise ApiError(403, f"a form from {origin} may not act on this console")
    fields: dict[str, str] = {}
    if kind == "application/x-www-form-urlencoded":  # anything else has no CSRF token
        body = (await request.body()).decode("utf-8", errors="replace")
        fields = dict(parse_qsl(body, keep_blank_values=True))
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = fields.pop("csrf", "")
    if not cookie or not sent or not hmac.compare_digest(cookie.encode(), sent.encode()):
        raise ApiError(403, "the form's CSRF token is missing or wrong: reload the page and retry")
    return fields


Form = Annotated[dict[str, str], Depends(form)]


def encode_pending(pending: Pending) -> str:
    raw = json.dumps(pending.__dict__, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_pending(value: str | None) -> Pending | None:
    if not value:
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        data = json.loads(raw)
        return Pending(
            state=str(data["state"]),
            nonce=str(data["nonce"]),
            verifier=str(data["verifier"]),
            next_url=safe_next(str(data["next_url"])),
        )
    except (ValueError, KeyError, TypeError):
        return None
