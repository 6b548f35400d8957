"""Signing in to the console: a token form (``tokens``) or Entra ID (``entra``).

``tokens``: the token typed in is checked by the API's authenticator and kept in the
``stepway_session`` cookie (HttpOnly, SameSite=Strict, Secure over HTTPS).

``entra``: ``/signin/entra`` sends the browser to the authority's authorize endpoint with
a PKCE challenge, state and nonce (kept meanwhile in a short-lived HttpOnly cookie that
is SameSite=Lax, because the way back is a cross-site navigation); ``/signin/callback``
checks the state, redeems the code with the verifier, checks the access token with the
API's Entra validation and keeps it in the session cookie until it expires. The callback
answers with a page that moves on to the console itself, because a SameSite=Strict
cookie set at the end of a cross-site redirect chain is not sent back until a same-site
navigation.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from control_plane.api.errors import ApiError
from control_plane.auth import Authenticator, require_role
from control_plane.console.config import ConsoleSettings
from control_plane.console.html import csrf_field, html, page, url
from control_plane.console.oidc import OidcClient
from control_plane.console.routing import ConsoleRoute
from control_plane.console.session import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    SIGNIN_PATH,
    Form,
    _csrf,
    console_settings,
    decode_pending,
    encode_pending,
    safe_next,
    secure,
    set_cookie,
    settings_of,
)

router = APIRouter(route_class=ConsoleRoute)


def _oidc(request: Request) -> tuple[OidcClient, ConsoleSettings]:
    settings = settings_of(request)
    console = console_settings(request)
    if settings.auth_mode != "entra":
        raise ApiError(404, "Entra ID sign-in is only used with auth mode 'entra'")
    if not console.client_id:
        raise ApiError(
            501,
            "the console has no Entra ID app registration: set STEPWAY_CONSOLE_CLIENT_ID",
        )
    client: OidcClient | None = getattr(request.app.state, "console_oidc", None)
    if client is None:
        authority = (
            console.authority
            or settings.entra_issuer
            or (f"https://login.microsoftonline.com/{settings.entra_tenant_id}/v2.0")
        )
        scope = console.scope or (
            f"{settings.entra_audience[0].rstrip('/')}/.default" if settings.entra_audience else ""
        )
        client = OidcClient(authority, console.client_id, scope, console.client_secret)
        request.app.state.console_oidc = client
    return client, console


def _redirect_uri(request: Request, console: ConsoleSettings) -> str:
    return console.redirect_url or f"{str(request.base_url).rstrip('/')}{SIGNIN_PATH}/callback"


def _signin_page(request: Request, next_url: str, message: str | None, status: int) -> Response:
    mode = settings_of(request).auth_mode
    csrf, new = _csrf(request)
    if mode == "entra":
        body = html(
            '<p><a class="button primary" href="{}">Sign in with Microsoft Entra ID</a></p>',
            url(f"{SIGNIN_PATH}/entra", next=next_url),
        )
    else:
        body = html(
            '<form method="post" action="{action}" class="signin">{csrf}'
            '<label for="token">Access token</label>'
            '<input id="token" name="token" type="password" autocomplete="current-password" '
            "required>"
            '<p class="note">A token from the control plane\'s tokens file. It is kept in an '
            "HttpOnly cookie of this site until you sign out.</p>"
            '<div class="buttons"><button type="submit" class="primary">Sign in</button></div>'
            "</form>",
            action=url(SIGNIN_PATH, next=next_url),
            csrf=csrf_field(csrf),
        )
    response = HTMLResponse(
        page("Sign in", body, who=None, csrf=csrf, flash=message, flash_error=bool(message)),
        status_code=status,
    )
    if new:
        set_cookie(response, CSRF_COOKIE, csrf, secure=secure(request), max_age=None)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get(SIGNIN_PATH, include_in_schema=False)
def signin(request: Request, next: str | None = None, why: str | None = None) -> Response:
    if settings_of(request).auth_mode == "none":
        return RedirectResponse(safe_next(next), 303)
    return _signin_page(request, safe_next(next), why, 200)


@router.post(SIGNIN_PATH, include_in_schema=False)
def signin_with_token(request: Request, fields: Form, next: str | None = None) -> Response:
    if settings_of(request).auth_mode != "tokens":
        raise ApiError(404, "token sign-in is only used with auth mode 'tokens'")
    token = fields.get("token", "").strip()
    authenticator: Authenticator = request.app.state.authenticator
    try:
        principal = authenticator.authenticate(f"Bearer {token}")
        require_role(principal, "reader")
    except ApiError as exc:
        return _signin_page(request, safe_next(next), f"Not signed in: {exc.message}", exc.status)
    response = RedirectResponse(safe_next(next), 303)
    set_cookie(
        response,
        SESSION_COOKIE,
        token,
        secure=secure(request),
        max_age=console_settings(request).session_seconds,
    )
    return response


@router.get(f"{SIGNIN_PATH}/entra", include_in_schema=False)
def signin_entra(request: Request, next: str | None = None) -> Response:
    client, console = _oidc(request)
    target, pending = client.begin(_redirect_uri(request, console), safe_next(next))
    response = RedirectResponse(target, 302)
    set_cookie(
        response,
        SIGNIN_COOKIE,
        encode_pending(pending),
        secure=secure(request),
        max_age=600,
        same_site="lax",
        path=SIGNIN_PATH,
    )
    return response


@router.get(f"{SIGNIN_PATH}/callback", include_in_schema=False)
def signin_callback(
    request: Request,
    code: str | None = None,
    state: str | None = None,
    error: str | None = None,
    error_description: str | None = None,
) -> Response:
    client, console = _oidc(request)
    pending = decode_pending(request.cookies.get(SIGNIN_COOKIE))
    if error:
        return _signin_page(request, "/", f"Sign-in failed: {error_description or error}", 401)
    if pending is None or not state or state != pending.state or not code:
        return _signin_page(
            request, "/", "This sign-in answer does not match a sign-in started here.", 400
        )
    try:
        tokens: dict[str, Any] = client.redeem(code, _redirect_uri(request, console), pending)
        access = str(tokens["access_token"])
        authenticator: Authenticator = request.app.state.authenticator
        principal = authenticator.authenticate(f"Bearer {access}")
        require_role(principal, "reader")
    except ApiError as exc:
        return _signin_page(request, pending.next_url, f"Not signed in: {exc.message}", exc.status)
    lifetime = int(tokens.get("expires_in") or 3600)
    target = pending.next_url
    response = HTMLResponse(
        page(
            "Signed in",
            html('<p>Signed in as {1}. <a href="{0}">Continue</a></p>', target, principal.name),
            who=None,
            csrf="",
            refresh=target,
        )
    )
    set_cookie(
        response,
        SESSION_COOKIE,
        access,
        secure=secure(request),
        max_age=max(60, min(lifetime, console.session_seconds)),
    )
    response.delete_cookie(SIGNIN_COOKIE, path=SIGNIN_PATH)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/signout", include_in_schema=False)
def signout(request: Request, fields: Form) -> Response:
    response = RedirectResponse(SIGNIN_PATH, 303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
