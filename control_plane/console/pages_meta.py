"""Task types (queues and workers), workflow and task definitions, and the start form."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup

from control_plane.api.errors import ApiError, bad_request, not_found
from control_plane.auth import require_role
from control_plane.console.graph import render_graph
from control_plane.console.html import ago, csrf_field, html, join, json_block, page, url
from control_plane.console.routing import ConsoleRoute
from control_plane.console.services import Console
from control_plane.console.session import CurrentViewer, Form, Viewer
from control_plane.services.workflows import StartWorkflowRequest
from engine.language.definitions import TaskDef, WorkflowDef
from engine.language.validation import validate_task_def, validate_workflow
from engine.ports.queue import QueueError
from protocol.queues import HIGH_PRIORITY_SUFFIX, queue_names

router = APIRouter(route_class=ConsoleRoute)


def _page(
    viewer: Viewer,
    title: str,
    body: Markup,
    section: str,
    *,
    flash: str | None = None,
    flash_error: bool = False,
    status_code: int = 200,
) -> Response:
    text = page(
        title,
        body,
        who=viewer.principal,
        csrf=viewer.csrf,
        section=section,
        signed_in=viewer.signed_in,
        flash=flash,
        flash_error=flash_error,
    )
    return viewer.respond(text, status_code)


# --- task types -------------------------------------------------------------------------


@router.get("/task-types", include_in_schema=False)
def task_types(request: Request, viewer: CurrentViewer) -> Response:
    console = Console.of(request)
    store, queue = console.deps.run_store, console.deps.queue
    settings = console.workflows.settings
    now = console.deps.clock()
    polls = store.get_all_poll_data()
    types = sorted({r.name for r in store.list_task_defs()} | {p.task_type for p in polls})
    rows: list[Markup] = []
    for task_type in types:
        depths: dict[str, Any] = {}
        for name in queue_names(task_type, settings.task_domains.get(task_type, [])):
            try:
                depths[name] = queue.depth(name)
            except QueueError:
                depths[name] = None

        def pending(name: str, d: dict[str, Any] = depths) -> str:
            depth = d.get(name)
            return "—" if depth is None else str(depth.active + depth.scheduled)

        domains = [n for n in depths if n not in (task_type, task_type + HIGH_PRIORITY_SUFFIX)]
        domain_text = ", ".join(f"{n}: {pending(n)}" for n in domains) or "—"
        in_flight = sum(d.deferred for d in depths.values() if d is not None)
        dead = sum(d.dead_lettered for d in depths.values() if d is not None)
        mine = sorted((p for p in polls if p.task_type == task_type), key=lambda p: p.worker_id)
        workers = (
            join(
                html(
                    "<li><code>{}</code>{} · {}</li>",
                    p.worker_id,
                    f" ({p.domain})" if p.domain else "",
                    ago(now - p.last_poll_time),
                )
                for p in mine
            )
            if mine
            else Markup("")
        )
        last = max((p.last_poll_time for p in mine), default=None)
        active = last is not None and now - last <= settings.no_worker_after_ms
        warning = (
            Markup('<span class="badge s-completed">active</span>')
            if active
            else html(
                '<span class="badge s-failed" role="note">no active worker</span> '
                '<span class="muted">{}</span>',
                "never polled" if last is None else f"last poll {ago(now - last)}",
            )
        )
        rows.append(
            html(
                '<tr data-type="{t}"><th scope="row"><a href="/taskdefs/{t}">{t}</a></th>'
                "<td>{n}</td><td>{h}</td><td>{dom}</td><td>{fl}</td><td>{dl}</td>"
                "<td><ul class=plain>{w}</ul></td><td>{warn}</td></tr>",
                t=task_type,
                n=pending(task_type),
                h=pending(task_type + HIGH_PRIORITY_SUFFIX),
                dom=domain_text,
                fl=in_flight,
                dl=dead,
                w=workers,
                warn=warning,
            )
        )
    body = html(
        '<p class="lead">Pending messages per queue of each task type, the workers that '
        "polled it and when. A type nobody polled in the last {} s has no active worker: its "
        "tasks wait.</p>"
        '<table class="types"><thead><tr><th scope="col">Task type</th>'
        '<th scope="col">Pending</th><th scope="col">High priority</th>'
        '<th scope="col">Domains</th><th scope="col">Handed out</th>'
        '<th scope="col">Dead letters</th><th scope="col">Workers (last poll)</th>'
        '<th scope="col">Liveness</th></tr></thead><tbody>{}</tbody></table>',
        settings.no_worker_after_ms // 1000,
        join(rows),
    )
    return _page(viewer, "Task types", body, "types")


# --- workflow definitions -----------------------------------------------------------------


def _issues(issues: list[Any]) -> Markup:
    if not issues:
        return Markup('<p class="ok">Valid.</p>')
    warnings_only = not any(i.is_error for i in issues)
    return html(
        '{}<ul class="issues" role="list">{}</ul>',
        Markup('<p class="ok">Valid, with warnings.</p>') if warnings_only else "",
        join(
            html("<li><code>{}</code>: {}</li>", i.path, i.message)
            if i.is_error
            else html('<li class="warning"><code>{}</code>: warning: {}</li>', i.path, i.message)
            for i in issues
        ),
    )


@router.get("/workflows", include_in_schema=False)
def workflows(request: Request, viewer: CurrentViewer) -> Response:
    console = Console.of(request)
    by_name: dict[str, list[Any]] = {}
    for record in console.deps.run_store.list_definitions():
        by_name.setdefault(record.name, []).append(record)
    rows = join(
        html(
            '<tr><th scope="row"><a href="/workflows/{n}">{n}</a></th><td>{versions}</td>'
            '<td>{desc}</td><td><a href="{runs}">runs</a> · <a href="{start}">start</a></td>'
            "</tr>",
            n=name,
            versions=join(
                (
                    html(
                        '<a href="{}">v{}</a>',
                        url(f"/workflows/{name}", version=r.version),
                        r.version,
                    )
                    for r in records
                ),
                " ",
            ),
            desc=records[-1].definition.get("description") or "",
            runs=url("/", name=name),
            start=url("/start", name=name),
        )
        for name, records in sorted(by_name.items())
    )
    body = html(
        '<table class="defs"><thead><tr><th scope="col">Name</th><th scope="col">Versions</th>'
        '<th scope="col">Description</th><th scope="col"></th></tr></thead>'
        "<tbody>{}</tbody></table>",
        rows,
    )
    return _page(viewer, "Workflow definitions", body, "workflows")


@router.get("/workflows/{name}", include_in_schema=False)
def workflow(
    request: Request, viewer: CurrentViewer, name: str, version: int | None = None
) -> Response:
    console = Console.of(request)
    store = console.deps.run_store
    record = store.get_definition(name, version)
    if record is None:
        raise not_found(f"workflow definition {name!r} not found")
    versions = [r.version for r in store.list_definitions(name)]
    task_defs = {r.name: TaskDef.model_validate(r.definition) for r in store.list_task_defs()}
    issues = validate_workflow(
        record.definition,
        task_defs,
        require_task_defs=console.workflows.settings.strict_task_definitions,
    )
    definition = WorkflowDef.model_validate(record.definition)
    body = html(
        '<p>Versions: {versions}. <a href="{runs}">Runs of this version</a> · '
        '<a href="{start}">Start a run</a></p>'
        "<h2>Validation</h2>{issues}<h2>Graph</h2><div class=graph-wrap>{graph}</div>"
        "<h2>JSON</h2>{json}",
        versions=join(
            (
                html(
                    '<a href="{}"{}>v{}</a>',
                    url(f"/workflows/{name}", version=v),
                    Markup(' aria-current="page"') if v == record.version else "",
                    v,
                )
                for v in versions
            ),
            " ",
        ),
        runs=url("/", name=name),
        start=url("/start", name=name, version=record.version),
        issues=_issues(issues),
        graph=render_graph(definition, {}),
        json=json_block(record.definition, label=f"{name} v{record.version}"),
    )
    return _page(viewer, f"{name} v{record.version}", body, "workflows")


# --- task definitions -------------------------------------------------------------------


@router.get("/taskdefs", include_in_schema=False)
def taskdefs(request: Request, viewer: CurrentViewer) -> Response:
    console = Console.of(request)
    rows = join(
        html(
            '<tr><th scope="row"><a href="/taskdefs/{n}">{n}</a></th><td>{retries}</td>'
            "<td>{rto}</td><td>{to}</td><td>{limit}</td><td>{desc}</td></tr>",
            n=r.name,
            retries=(
                f"{r.definition.get('retryCount', 3)} ({r.definition.get('retryLogic', 'FIXED')})"
            ),
            rto=f"{r.definition.get('responseTimeoutSeconds', 3600)} s",
            to=f"{r.definition.get('timeoutSeconds', 0)} s",
            limit=r.definition.get("concurrentExecLimit") or "—",
            desc=r.definition.get("description") or "",
        )
        for r in console.deps.run_store.list_task_defs()
    )
    body = html(
        '<table class="defs"><thead><tr><th scope="col">Name</th><th scope="col">Retries</th>'
        '<th scope="col">Response timeout</th><th scope="col">Timeout</th>'
        '<th scope="col">Concurrency limit</th><th scope="col">Description</th></tr></thead>'
        "<tbody>{}</tbody></table>",
        rows,
    )
    return _page(viewer, "Task definitions", body, "taskdefs")


@router.get("/taskdefs/{name}", include_in_schema=False)
def taskdef(request: Request, viewer: CurrentViewer, name: str) -> Response:
    console = Console.of(request)
    record = console.deps.run_store.get_task_def(name)
    if record is None:
        raise not_found(f"task definition {name!r} not found")
    users = sorted(
        {
            f"{d.name} v{d.version}"
            for d in console.deps.run_store.list_definitions()
            if any(loc.task.name == name for loc in WorkflowDef.model_validate(d.definition).walk())
        }
    )
    body = html(
        "<p>Used by: {}.</p><h2>Validation</h2>{}<h2>JSON</h2>{}",
        ", ".join(users) or "no workflow definition",
        _issues(validate_task_def(record.definition)),
        json_block(record.definition, label=name),
    )
    return _page(viewer, f"Task definition {name}", body, "taskdefs")


# --- start a run ------------------------------------------------------------------------


def _input_template(definition: dict[str, Any] | None) -> str:
    if not definition:
        return "{}"
    keys = definition.get("inputParameters") or []
    return json.dumps({str(k): None for k in keys}, indent=2) if keys else "{}"


def _start_form(
    request: Request,
    viewer: Viewer,
    name: str | None,
    version: int | None,
    values: dict[str, str] | None = None,
    error: str | None = None,
) -> Response:
    console = Console.of(request)
    defs = console.deps.run_store.list_definitions()
    names = sorted({d.name for d in defs})
    chosen = name if name in names else (names[0] if names else None)
    current = console.deps.run_store.get_definition(chosen, version) if chosen else None
    values = values or {}
    if not viewer.can_operate:
        form = Markup('<p class="muted">Starting a run needs the operator role.</p>')
    else:
        form = html(
            '<form method="get" action="/start" class="filters" aria-label="Choose a definition">'
            '<label>Definition <select name="name">{options}</select></label> '
            '<button type="submit">Choose</button></form>'
            '<form method="post" action="/start" class="start">{csrf}'
            '<input type="hidden" name="name" value="{name}">'
            '<label for="start-version">Version</label>'
            '<input id="start-version" name="version" inputmode="numeric" value="{version}" '
            'placeholder="latest">'
            '<label for="start-input">Input (a JSON object)</label>'
            '<textarea id="start-input" name="input" rows="10" class="code" '
            'spellcheck="false">{input}</textarea>'
            '<label for="start-corr">Correlation id</label>'
            '<input id="start-corr" name="correlationId" value="{corr}">'
            '<label for="start-prio">Priority (0-99)</label>'
            '<input id="start-prio" name="priority" inputmode="numeric" value="{prio}">'
            '<div class="buttons"><button type="submit" class="primary">Start</button></div>'
            "</form>",
            options=join(
                html(
                    '<option value="{0}"{1}>{0}</option>',
                    n,
                    Markup(" selected") if n == chosen else "",
                )
                for n in names
            ),
            csrf=csrf_field(viewer.csrf),
            name=chosen or "",
            version=values.get("version", str(version) if version else ""),
            input=values.get("input", _input_template(current.definition if current else None)),
            corr=values.get("correlationId", ""),
            prio=values.get("priority", "0"),
        )
    description = (
        html("<p>{}</p>", current.definition.get("description"))
        if current and current.definition.get("description")
        else ""
    )
    body = html("{}{}", description, form)
    return _page(
        viewer,
        "Start a run",
        body,
        "start",
        flash=error,
        flash_error=error is not None,
        status_code=400 if error else 200,
    )


@router.get("/start", include_in_schema=False)
def start_form(
    request: Request, viewer: CurrentViewer, name: str | None = None, version: int | None = None
) -> Response:
    return _start_form(request, viewer, name, version)


@router.post("/start", include_in_schema=False)
def start_run(request: Request, viewer: CurrentViewer, fields: Form) -> Response:
    require_role(viewer.principal, "operator")
    name = fields.get("name", "")
    try:
        try:
            value = json.loads(fields.get("input") or "{}")
        except ValueError as exc:
            raise bad_request(f"input: not valid JSON: {exc}", "input") from None
        if not isinstance(value, dict):
            raise bad_request("input: must be a JSON object ({...})", "input")
        version_text = fields.get("version", "").strip()
        prio_text = fields.get("priority", "").strip() or "0"
        if version_text and not version_text.isdigit():
            raise bad_request("version: a whole number, or empty for the latest", "version")
        if not prio_text.isdigit() or int(prio_text) > 99:
            raise bad_request("priority: a whole number from 0 to 99", "priority")
        workflow_id = Console.of(request).workflows.start(
            StartWorkflowRequest(
                name=name,
                version=int(version_text) if version_text else None,
                input=value,
                correlation_id=fields.get("correlationId", "").strip() or None,
                priority=int(prio_text),
            )
        )
    except ApiError as exc:
        if exc.status not in (400, 404):
            raise
        return _start_form(request, viewer, name, None, fields, exc.message)
    return viewer.finish(RedirectResponse(url(f"/runs/{workflow_id}", done="Started"), 303))
