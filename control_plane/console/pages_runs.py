"""The runs list (search, paging, live status) and the HUMAN inbox."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup

from control_plane.api.errors import bad_request
from control_plane.console.html import (
    duration,
    html,
    join,
    page,
    status_badge,
    url,
    when,
)
from control_plane.console.routing import ConsoleRoute
from control_plane.console.services import Console
from control_plane.console.session import CurrentViewer
from engine.language.definitions import RunStatus
from engine.ports.run_store import SearchResult

router = APIRouter(route_class=ConsoleRoute)

PAGE_SIZES = (25, 50, 100)
WITHIN = {
    "1h": ("the last hour", 3_600_000),
    "24h": ("the last 24 hours", 86_400_000),
    "7d": ("the last 7 days", 7 * 86_400_000),
    "30d": ("the last 30 days", 30 * 86_400_000),
}


def _parse_utc(value: str | None, field: str) -> int | None:
    """``YYYY-MM-DDTHH:MM`` (a datetime-local field, read as UTC) -> epoch ms."""
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        raise bad_request(
            f"{field}: expected a date and time such as 2026-01-31T13:45", field
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)


def _select(name: str, label: str, options: list[tuple[str, str]], chosen: str | None) -> Markup:
    return html(
        '<label>{label} <select name="{name}">{options}</select></label>',
        label=label,
        name=name,
        options=join(
            html(
                '<option value="{}"{}>{}</option>',
                value,
                Markup(" selected") if value == (chosen or "") else "",
                text,
            )
            for value, text in options
        ),
    )


def _table(found: SearchResult, now: int) -> Markup:
    if not found.results:
        return Markup('<p class="empty">No run matches.</p>')
    rows = join(
        html(
            '<tr data-run="{id}"><td><a href="/runs/{id}"><code>{short}</code></a></td>'
            "<td>{name} <span class=muted>v{version}</span></td><td>{status}</td>"
            "<td>{corr}</td><td>{started}</td><td>{took}</td><td class=reason>{reason}</td></tr>",
            id=r.workflow_id,
            short=r.workflow_id,
            name=r.name,
            version=r.version,
            status=status_badge(r.status.value),
            corr=r.correlation_id or "",
            started=when(r.create_time, now),
            took=duration((r.end_time or now) - r.create_time),
            reason=(r.reason_for_incompletion or "")[:160],
        )
        for r in found.results
    )
    return html(
        '<table class="runs"><caption class="sr-only">Runs, newest first</caption><thead><tr>'
        '<th scope="col">Run</th><th scope="col">Definition</th><th scope="col">Status</th>'
        '<th scope="col">Correlation id</th><th scope="col">Started</th>'
        '<th scope="col">Duration</th><th scope="col">Reason</th></tr></thead>'
        "<tbody>{}</tbody></table>",
        rows,
    )


@router.get("/", include_in_schema=False)
def runs(
    request: Request,
    viewer: CurrentViewer,
    name: str | None = None,
    status: str | None = None,
    correlation: str | None = None,
    within: str | None = None,
    start_from: Annotated[str | None, Query(alias="from")] = None,
    start_to: Annotated[str | None, Query(alias="to")] = None,
    run: str | None = None,
    start: Annotated[int, Query(ge=0)] = 0,
    size: Annotated[int, Query(ge=1, le=100)] = 25,
    fragment: str | None = None,
) -> Response:
    console = Console.of(request)
    if run and run.strip() and console.deps.run_store.get_run(run.strip()) is not None:
        return viewer.finish(RedirectResponse(f"/runs/{run.strip()}", 303))
    now = console.deps.clock()
    time_from = _parse_utc(start_from, "from")
    time_to = _parse_utc(start_to, "to")
    if within in WITHIN:
        time_from = max(time_from or 0, now - WITHIN[within][1])
    statuses = [status] if status else []
    found = console.workflows.find(
        query=None,
        free_text=None,
        workflow_type=name or None,
        status=statuses,
        correlation_id=correlation.strip() if correlation and correlation.strip() else None,
        start_time=time_from,
        end_time=time_to,
        start=start,
        size=size,
    )
    query = {
        "name": name,
        "status": status,
        "correlation": correlation,
        "within": within,
        "from": start_from,
        "to": start_to,
        "size": size if size != 25 else None,
    }
    total = found.total_hits
    shown_to = min(start + size, total)
    pager = html(
        '<nav class="pager" aria-label="Pages of runs"><span>{}</span> {} {}</nav>',
        f"{start + 1 if total else 0} to {shown_to} of {total}",
        html('<a href="{}" rel="prev">Newer</a>', url("/", **query, start=max(0, start - size)))
        if start > 0
        else "",
        html('<a href="{}" rel="next">Older</a>', url("/", **query, start=start + size))
        if start + size < total
        else "",
    )
    live = any(r.status in (RunStatus.RUNNING, RunStatus.PAUSED) for r in found.results)
    table = html(
        '<div id="runs-table"{}>{}{}</div>',
        html(' data-poll="{}"', url("/", **query, start=start or None, fragment="table"))
        if live
        else "",
        _table(found, now),
        pager,
    )
    if fragment == "table":
        return viewer.respond(str(table))
    names = sorted({d.name for d in console.deps.run_store.list_definitions()})
    if run and run.strip():
        flash: str | None = f"No run with id {run.strip()}."
    else:
        flash = None
    filters = html(
        '<form method="get" action="/" class="filters" role="search" aria-label="Search runs">'
        "{name}{status}"
        '<label>Correlation id <input name="correlation" value="{corr}"></label>'
        "{within}"
        '<label>From (UTC) <input type="datetime-local" name="from" value="{frm}"></label>'
        '<label>To (UTC) <input type="datetime-local" name="to" value="{to}"></label>'
        "{size}"
        '<button type="submit" class="primary">Search</button> <a href="/">Clear</a></form>'
        '<form method="get" action="/" class="filters" aria-label="Open a run by id">'
        '<label>Run id <input name="run" size="38"></label> <button type="submit">Open</button>'
        "</form>",
        name=_select("name", "Definition", [("", "any")] + [(n, n) for n in names], name),
        status=_select(
            "status", "Status", [("", "any")] + [(s.value, s.value) for s in RunStatus], status
        ),
        corr=correlation or "",
        within=_select(
            "within",
            "Started within",
            [("", "any time")] + [(k, v[0]) for k, v in WITHIN.items()],
            within,
        ),
        frm=start_from or "",
        to=start_to or "",
        size=_select("size", "Per page", [(str(n), str(n)) for n in PAGE_SIZES], str(size)),
    )
    body = html("{}{}", filters, table)
    return viewer.respond(
        page(
            "Runs",
            body,
            who=viewer.principal,
            csrf=viewer.csrf,
            section="runs",
            signed_in=viewer.signed_in,
            flash=flash,
            flash_error=flash is not None,
        )
    )


@router.get("/inbox", include_in_schema=False)
def inbox(
    request: Request,
    viewer: CurrentViewer,
    start: Annotated[int, Query(ge=0)] = 0,
    size: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Response:
    console = Console.of(request)
    now = console.deps.clock()
    rows = console.deps.run_store.list_open_tasks("HUMAN", start=start, size=size + 1)
    more = len(rows) > size
    rows = rows[:size]
    items: list[Markup] = []
    for row in rows:
        run = console.deps.run_store.get_run(row.workflow_id)
        data = row.input_data if isinstance(row.input_data, dict) else {}
        instructions = data.get("instructions")
        items.append(
            html(
                '<tr><td><a href="/runs/{wid}#human-{ref}">{ref}</a></td><td>{name}</td>'
                "<td>{instr}</td><td>{corr}</td><td>{since}</td><td>{waited}</td></tr>",
                wid=row.workflow_id,
                ref=row.reference_task_name,
                name=f"{run.name} v{run.version}" if run else row.workflow_id,
                instr=instructions if isinstance(instructions, str) else "",
                corr=(run.correlation_id or "") if run else "",
                since=when(row.scheduled_time, now),
                waited=duration(now - row.scheduled_time) if row.scheduled_time else "",
            )
        )
    if items:
        table = html(
            '<table class="inbox"><caption class="sr-only">Waiting HUMAN tasks, oldest first'
            '</caption><thead><tr><th scope="col">Task</th><th scope="col">Run of</th>'
            '<th scope="col">Instructions</th><th scope="col">Correlation id</th>'
            '<th scope="col">Waiting since</th><th scope="col">Waited</th></tr></thead>'
            "<tbody>{}</tbody></table>",
            join(items),
        )
    else:
        table = Markup('<p class="empty">Nothing waits for a person.</p>')
    pager = html(
        '<nav class="pager" aria-label="Pages of the inbox">{} {}</nav>',
        html('<a href="{}">Previous</a>', url("/inbox", start=max(0, start - size), size=size))
        if start
        else "",
        html('<a href="{}">Next</a>', url("/inbox", start=start + size, size=size)) if more else "",
    )
    body = html(
        '<p class="lead">Every HUMAN task that waits for a person, across all runs, oldest '
        "first.</p>{}{}",
        table,
        pager,
    )
    return viewer.respond(
        page(
            "Inbox",
            body,
            who=viewer.principal,
            csrf=viewer.csrf,
            section="inbox",
            signed_in=viewer.signed_in,
        )
    )
