"""Settings of the web console's sign-in (part of the control plane ``Settings``).

The console authenticates with the API's own mode (``Settings.auth_mode``): nothing in
``none``, a bearer token typed into the sign-in page in ``tokens``, and an Entra ID sign-in
(OpenID Connect authorization code flow with PKCE) in ``entra``. For ``entra`` the console
is an app registration of its own (``client_id``) that asks for an access token to the
API (``scope``, by default ``<first audience>/.default``); that token is then checked by
the API's own Entra validation on every request, so roles come from the same app roles.
"""

from __future__ import annotations

from pydantic import BaseModel

from engine.app.config import EnvReader


class ConsoleSettings(BaseModel):
    #: serve the console at all (the API is unaffected)
    enabled: bool = True
    #: entra: the console's app registration (client id)
    client_id: str | None = None
    #: entra: client secret of a confidential "Web" registration; without one the console
    #: redeems the code as a public client (redirect URI registered as "Mobile and desktop")
    client_secret: str | None = None
    #: entra: the OIDC authority whose ``/.well-known/openid-configuration`` names the
    #: authorize and token endpoints (default: the API's token issuer)
    authority: str | None = None
    #: entra: scope(s) to ask for (default ``<first audience>/.default``)
    scope: str | None = None
    #: entra: the redirect URI registered for the console (default
    #: ``<base URL of the request>/signin/callback``)
    redirect_url: str | None = None
    #: how long a console sign-in lasts (tokens mode; entra: until the token expires)
    session_seconds: int = 12 * 3600
    #: mark cookies Secure even when the request arrives over plain HTTP (behind a TLS
    #: terminating ingress that does not send X-Forwarded-Proto)
    secure_cookies: bool = False


def console_settings_from_env(env: EnvReader) -> ConsoleSettings:
    """``STEPWAY_CONSOLE*`` variables (docs/configuration.md); problems are reported on
    ``env`` with every other bad variable."""
    values: dict[str, object] = {"enabled": env.flag("STEPWAY_CONSOLE", True)}
    for var, key in (
        ("STEPWAY_CONSOLE_CLIENT_ID", "client_id"),
        ("STEPWAY_CONSOLE_CLIENT_SECRET", "client_secret"),
        ("STEPWAY_CONSOLE_SCOPE", "scope"),
    ):
        if env.has(var):
            values[key] = env.text(var)
    for var, key in (
        ("STEPWAY_CONSOLE_AUTHORITY", "authority"),
        ("STEPWAY_CONSOLE_REDIRECT_URL", "redirect_url"),
    ):
        url = env.https_url(var, allow_loopback_http=True)
        if url:
            values[key] = url
    if env.has("STEPWAY_CONSOLE_SESSION_SECONDS"):
        values["session_seconds"] = env.integer("STEPWAY_CONSOLE_SESSION_SECONDS", 1, minimum=60)
    values["secure_cookies"] = env.flag("STEPWAY_CONSOLE_SECURE_COOKIES", False)
    return ConsoleSettings.model_validate(values)
