"""The console's HTML: the page layout and small helpers, all escaping through markupsafe.

Every value goes into markup through :func:`html` (``Markup.format`` escapes what is not
already ``Markup``), so a run's input, a reason or a task name can never inject markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup, escape

from control_plane.auth import Principal
from control_plane.durations import human_duration

#: JSON shown inline is cut here; the full value is a download away
INLINE_JSON_LIMIT = 20_000

RUN_STATUS_CLASS = {
    "RUNNING": "s-running",
    "PAUSED": "s-paused",
    "COMPLETED": "s-completed",
    "FAILED": "s-failed",
    "TIMED_OUT": "s-timedout",
    "TERMINATED": "s-terminated",
}
TASK_STATUS_CLASS = {
    "SCHEDULED": "s-scheduled",
    "IN_PROGRESS": "s-running",
    "COMPLETED": "s-completed",
    "COMPLETED_WITH_ERRORS": "s-witherrors",
    "FAILED": "s-failed",
    "FAILED_WITH_TERMINAL_ERROR": "s-failed",
    "TIMED_OUT": "s-timedout",
    "CANCELED": "s-terminated",
    "SKIPPED": "s-skipped",
}


def html(template: str, *args: Any, **kwargs: Any) -> Markup:
    """``template`` is trusted markup; every argument is escaped unless it is Markup."""
    return Markup(template).format(*args, **kwargs)


def join(parts: Iterable[Markup | str], sep: str = "") -> Markup:
    return Markup(sep).join(escape(p) for p in parts)


def url(path: str, **query: Any) -> str:
    params = {k: v for k, v in query.items() if v not in (None, "", [])}
    return path + ("?" + urlencode(params, doseq=True) if params else "")


def status_class(status: str) -> str:
    return RUN_STATUS_CLASS.get(status) or TASK_STATUS_CLASS.get(status, "s-none")


def status_badge(status: str) -> Markup:
    return html('<span class="badge {}">{}</span>', status_class(status), status)


def iso(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def when(ms: int | None, now_ms: int) -> Markup:
    """A time as ``<time>``: UTC text with how long ago; the page script shows it in the
    reader's local time."""
    if not ms:
        return Markup("<span class=muted>—</span>")
    stamp = datetime.fromtimestamp(ms / 1000, UTC)
    text = stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
    return html(
        '<time datetime="{}" title="{}">{}</time>',
        stamp.isoformat(timespec="milliseconds"),
        text,
        f"{text} ({ago(now_ms - ms)})" if now_ms - ms < 86_400_000 else text,
    )


def ago(delta_ms: int) -> str:
    seconds = max(0, delta_ms) // 1000
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min ago"


def duration(ms: int | None) -> str:
    return human_duration(ms, missing="")


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False, default=str)


def json_block(value: Any, download: str | None = None, label: str = "JSON") -> Markup:
    """Pretty JSON in a <pre>; above :data:`INLINE_JSON_LIMIT` characters it is cut and
    ``download`` links to the whole value."""
    text = json_text(value)
    if len(text) <= INLINE_JSON_LIMIT:
        return html('<pre class="json" aria-label="{}">{}</pre>', label, text)
    cut = text[:INLINE_JSON_LIMIT]
    link = html(' <a href="{}" download>Download the whole value</a>', download) if download else ""
    return html(
        '<pre class="json" aria-label="{}">{}</pre><p class="note">Shown: the first {} of '
        "{} characters.{}</p>",
        label,
        cut + "\n…",
        f"{INLINE_JSON_LIMIT:,}",
        f"{len(text):,}",
        link,
    )


def csrf_field(token: str) -> Markup:
    return html('<input type="hidden" name="csrf" value="{}">', token)


def post_button(
    action: str,
    label: str,
    csrf: str,
    *,
    fields: dict[str, str] | None = None,
    css: str = "",
    confirm: str | None = None,
) -> Markup:
    hidden = join(
        html('<input type="hidden" name="{}" value="{}">', k, v) for k, v in (fields or {}).items()
    )
    data = html(' data-confirm="{}"', confirm) if confirm else ""
    return html(
        '<form method="post" action="{}" class="inline"{}>{}{}<button type="submit" class="{}">'
        "{}</button></form>",
        action,
        data,
        csrf_field(csrf),
        hidden,
        css,
        label,
    )


NAV = (
    ("/", "Runs", "runs"),
    ("/inbox", "Inbox", "inbox"),
    ("/task-types", "Task types", "types"),
    ("/workflows", "Workflows", "workflows"),
    ("/taskdefs", "Task definitions", "taskdefs"),
    ("/start", "Start a run", "start"),
)


def page(
    title: str,
    body: Markup,
    *,
    who: Principal | None,
    csrf: str,
    section: str = "",
    signed_in: bool = False,
    flash: str | None = None,
    flash_error: bool = False,
    refresh: str | None = None,
) -> str:
    nav = join(
        html(
            '<a href="{}"{}>{}</a>',
            href,
            Markup(' aria-current="page"') if key == section else "",
            label,
        )
        for href, label, key in NAV
    )
    account: Markup = Markup("")
    if who is not None:
        roles = ", ".join(sorted(who.roles - {"worker"})) or "no console role"
        sign_out = (
            html(
                '<form method="post" action="/signout" class="inline">{}'
                '<button type="submit" class="link">Sign out</button></form>',
                csrf_field(csrf),
            )
            if signed_in
            else ""
        )
        account = html(
            '<div class="who"><span>{}</span> <span class="muted">({})</span> {}</div>',
            who.name,
            roles,
            sign_out,
        )
    notice = (
        html(
            '<div class="flash{}" role="{}">{}</div>',
            " error" if flash_error else "",
            "alert" if flash_error else "status",
            flash,
        )
        if flash
        else ""
    )
    return str(
        html(
            """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · Stepway</title>{refresh}
<link rel="stylesheet" href="/static/console.css">
<script src="/static/console.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
<header class="top">
<a class="brand" href="/">Stepway</a>
<nav aria-label="Console">{nav}</nav>
{account}
</header>
<main id="main" tabindex="-1">
{notice}
<h1>{title}</h1>
{body}
</main>
</body>
</html>
""",
            title=title,
            refresh=html('\n<meta http-equiv="refresh" content="0;url={}">', refresh)
            if refresh
            else "",
            nav=nav,
            account=account,
            notice=notice,
            body=body,
        )
    )
