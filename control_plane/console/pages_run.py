"""One run: its graph, timeline, tasks, a task's details, its actions and HUMAN forms."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup

from control_plane.api.errors import ApiError, bad_request
from control_plane.console.graph import GraphSummary, NodeState, node_states, render_graph
from control_plane.console.html import (
    csrf_field,
    duration,
    html,
    join,
    json_block,
    json_text,
    page,
    post_button,
    status_badge,
    status_class,
    url,
    when,
)
from control_plane.console.markdown import render_markdown
from control_plane.console.routing import ConsoleRoute
from control_plane.console.services import RUN_ACTIONS, Console
from control_plane.console.session import CurrentViewer, Form, Viewer
from control_plane.services.wire import task_type_name
from engine.ports.run_store import RunRecord, TaskRecord

router = APIRouter(route_class=ConsoleRoute)

TIMELINE_W = 640.0
TIMELINE_ROW = 22.0


def _now(console: Console) -> int:
    return console.deps.clock()


def _task_link(workflow_id: str, task_id: str) -> str:
    return url(f"/runs/{workflow_id}", task=task_id) + "#task"


def _summary(run: RunRecord, now: int) -> Markup:
    end = run.end_time or (now if not run.status.is_terminal else None)
    rows: list[tuple[str, Any]] = [
        ("Status", status_badge(run.status.value)),
        (
            "Definition",
            html(
                '<a href="{}">{} v{}</a>',
                url(f"/workflows/{run.name}", version=run.version),
                run.name,
                run.version,
            ),
        ),
        ("Run id", html("<code>{}</code>", run.workflow_id)),
        ("Correlation id", run.correlation_id or "—"),
        ("Started", when(run.create_time, now)),
        ("Ended", when(run.end_time, now)),
        ("Duration", duration(end - run.create_time) if end else ""),
        ("Priority", str(run.priority)),
    ]
    if run.parent_workflow_id:
        rows.append(
            (
                "Parent run",
                html('<a href="/runs/{0}">{0}</a>', run.parent_workflow_id),
            )
        )
    if run.reason_for_incompletion:
        rows.append(("Reason", html('<span class="reason">{}</span>', run.reason_for_incompletion)))
    if run.failed_reference_task_names:
        rows.append(("Failed tasks", ", ".join(run.failed_reference_task_names)))
    return html(
        '<dl class="facts" data-run-status="{}">{}</dl>',
        run.status.value,
        join(html("<div><dt>{}</dt><dd>{}</dd></div>", k, v) for k, v in rows),
    )


def _timeline(rows: list[TaskRecord], run: RunRecord, now: int, workflow_id: str) -> Markup:
    timed = [r for r in rows if r.scheduled_time or r.start_time]
    if not timed:
        return Markup('<p class="muted">No task has been scheduled yet.</p>')
    timed.sort(key=lambda r: (r.scheduled_time or r.start_time or 0, r.seq))
    t0 = min(r.scheduled_time or r.start_time or now for r in timed)
    t1 = max(
        [run.end_time or 0]
        + [r.end_time or (now if not r.status.is_terminal else 0) for r in timed]
        + [r.start_time or 0 for r in timed]
    )
    span = max(t1 - t0, 1)
    label_w = 170.0
    scale = (TIMELINE_W - label_w - 10) / span
    bars: list[Markup] = []
    for i, r in enumerate(timed):
        y = i * TIMELINE_ROW + 4
        queued = r.scheduled_time or r.start_time or t0
        started = r.start_time or queued
        ended = r.end_time or (now if not r.status.is_terminal else started)
        x_q = label_w + (queued - t0) * scale
        x_s = label_w + (started - t0) * scale
        x_e = label_w + (ended - t0) * scale
        css = status_class(r.status.value)
        label = (
            f"{r.reference_task_name}: {r.status.value}, queued "
            f"{duration(started - queued)}, ran {duration(ended - started)}"
        )
        bars.append(
            html(
                '<a href="{href}" aria-label="{label}"><g class="bar {css}"><title>{label}</title>'
                '<text x="0" y="{ty}">{ref}</text>'
                '<rect class="wait" x="{xq}" y="{y}" width="{wq}" height="14"/>'
                '<rect class="run" x="{xs}" y="{y}" width="{wr}" height="14"/></g></a>',
                href=_task_link(workflow_id, r.task_id),
                label=label,
                css=css,
                ty=f"{y + 12:.1f}",
                ref=r.reference_task_name[:24],
                xq=f"{x_q:.1f}",
                xs=f"{x_s:.1f}",
                y=f"{y:.1f}",
                wq=f"{max(x_s - x_q, 0):.1f}",
                wr=f"{max(x_e - x_s, 2):.1f}",
            )
        )
    height = len(timed) * TIMELINE_ROW + 8
    return html(
        '<svg class="timeline" role="group" aria-label="Timeline: when each task was queued '
        'and ran" width="{w}" height="{h}" viewBox="0 0 {w} {h}">{bars}</svg>'
        '<p class="note">Light: waiting in the queue; dark: running. {total} from the first '
        "task scheduled to the last change.</p>",
        w=f"{TIMELINE_W:.0f}",
        h=f"{height:.0f}",
        bars=join(bars),
        total=duration(span),
    )


def _task_table(rows: list[TaskRecord], workflow_id: str, now: int) -> Markup:
    if not rows:
        return Markup("")
    body = join(
        html(
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
            "<td>{}</td><td>{}</td><td class=reason>{}</td></tr>",
            _task_link(workflow_id, r.task_id),
            r.reference_task_name,
            task_type_name(r),
            status_badge(r.status.value),
            r.attempt,
            r.worker_id or "",
            when(r.scheduled_time, now),
            duration((r.end_time or now) - r.start_time) if r.start_time else "",
            r.reason_for_incompletion or "",
        )
        for r in sorted(rows, key=lambda r: (r.scheduled_time or 0, r.seq))
    )
    return html(
        '<table class="tasks"><caption>Tasks</caption><thead><tr><th scope="col">Task</th>'
        '<th scope="col">Type</th><th scope="col">Status</th><th scope="col">Attempt</th>'
        '<th scope="col">Worker</th><th scope="col">Scheduled</th><th scope="col">Ran</th>'
        '<th scope="col">Reason</th></tr></thead><tbody>{}</tbody></table>',
        body,
    )


def live_section(console: Console, run: RunRecord, rows: list[TaskRecord]) -> Markup:
    """The part of the run page that refreshes while the run is active."""
    now = _now(console)
    definition = console.definition(run)
    states = node_states(rows)
    if definition is not None:

        def link(state: NodeState) -> str | None:
            if state.child_run:
                return f"/runs/{state.child_run}"
            return _task_link(run.workflow_id, state.task_id) if state.task_id else None

        counts = GraphSummary.of(definition, states).counts
        legend = join(html("<li>{} {}</li>", status_badge(k), v) for k, v in sorted(counts.items()))
        graph = html(
            '<div class="graph-wrap">{}</div><ul class="legend" aria-label="Tasks by status">'
            "{}</ul>",
            render_graph(definition, states, link),
            legend,
        )
    else:
        graph = html(
            '<p class="muted">Definition {} v{} is no longer registered; the tasks below are '
            "what the run recorded.</p>",
            run.name,
            run.version,
        )
    active = not run.status.is_terminal
    return html(
        '<section id="live" aria-live="polite" data-status="{status}" data-waiting="{waiting}"'
        "{poll}><h2>Graph</h2>{graph}<h2>Timeline</h2>{timeline}{table}</section>",
        status=run.status.value,
        waiting=" ".join(
            r.reference_task_name for r in rows if not r.status.is_terminal and _completable(r)
        ),
        poll=html(' data-poll="/runs/{}/live"', run.workflow_id) if active else "",
        graph=graph,
        timeline=_timeline(rows, run, now, run.workflow_id),
        table=_task_table(rows, run.workflow_id, now),
    )


def _skippable(console: Console, run: RunRecord, rows: list[TaskRecord]) -> list[str]:
    """The tasks a skip may name: those of the definition not scheduled yet (Conductor's
    skip refuses a task that has already been processed)."""
    definition = console.definition(run)
    if definition is None:
        return []
    seen = {r.reference_task_name for r in rows}
    refs = (location.task.task_reference_name for location in definition.walk())
    return [ref for ref in refs if ref not in seen]


def _actions(console: Console, viewer: Viewer, run: RunRecord, rows: list[TaskRecord]) -> Markup:
    if not viewer.can_operate:
        return Markup("")
    skippable = _skippable(console, run, rows) if not run.status.is_terminal else []
    status = run.status.value
    allowed = {
        "pause": status == "RUNNING",
        "resume": status == "PAUSED",
        "terminate": status in ("RUNNING", "PAUSED"),
        "retry": status in ("FAILED", "TIMED_OUT", "TERMINATED"),
        "restart": run.status.is_terminal,
        "rerun": run.status.is_terminal and bool(rows),
        "skip": status == "RUNNING" and bool(skippable),
    }
    parts: list[Markup] = []
    base = f"/runs/{run.workflow_id}/actions"
    for action, (label, _what) in RUN_ACTIONS.items():
        if not allowed[action] or not console.supports(action):
            continue
        if action == "terminate":
            parts.append(
                html(
                    '<form method="post" action="{}/terminate" class="inline" data-confirm="'
                    'Terminate this run?">{}<label>Reason <input name="reason" '
                    'placeholder="{}"></label> <button type="submit" class="danger">'
                    "Terminate</button></form>",
                    base,
                    csrf_field(viewer.csrf),
                    "why it is ended (optional)",
                )
            )
        elif action in ("rerun", "skip"):
            field = "taskId" if action == "rerun" else "taskRef"
            choices = (
                [(r.task_id, r.reference_task_name) for r in rows]
                if action == "rerun"
                else [(ref, ref) for ref in skippable]
            )
            options = join(
                html('<option value="{}">{}</option>', value, text) for value, text in choices
            )
            parts.append(
                html(
                    '<form method="post" action="{}/{}" class="inline">{}<label>{} '
                    '<select name="{}">{}</select></label> <button type="submit">{}</button>'
                    "</form>",
                    base,
                    action,
                    csrf_field(viewer.csrf),
                    "from" if action == "rerun" else "task",
                    field,
                    options,
                    label,
                )
            )
        else:
            parts.append(
                post_button(
                    f"{base}/{action}",
                    label,
                    viewer.csrf,
                    confirm=f"{label} this run?" if action in ("restart", "retry") else None,
                )
            )
    if not parts:
        return Markup("")
    return html(
        '<section class="actions" aria-labelledby="actions-h"><h2 id="actions-h">Actions</h2>'
        "{}</section>",
        join(parts, " "),
    )


def _completable(row: TaskRecord) -> bool:
    """HUMAN tasks, and WAIT tasks without a duration or time, wait for a completion."""
    if row.task_type == "HUMAN":
        return True
    data = row.input_data if isinstance(row.input_data, dict) else {}
    return row.task_type == "WAIT" and not data.get("duration") and not data.get("until")


def _human_forms(
    console: Console,
    viewer: Viewer,
    run: RunRecord,
    rows: list[TaskRecord],
    drafts: dict[str, str],
) -> Markup:
    waiting = [r for r in rows if not r.status.is_terminal and _completable(r)]
    if not waiting:
        return Markup("")
    sections: list[Markup] = []
    for row in waiting:
        data: Any = console.load(row.input_data, row.input_ref) or {}
        data = data if isinstance(data, dict) else {"input": data}
        name = data.get("instructions")
        # the engine puts the text the run started with next to its name
        text = data.get("instructionsText")
        if not isinstance(text, str):
            text = console.instruction(name) if isinstance(name, str) and name else None
        if text is not None:
            instructions = html('<div class="instructions">{}</div>', render_markdown(text))
        elif isinstance(name, str) and name:
            instructions = html(
                '<p class="muted">No instruction text named {} is registered.</p>', name
            )
        else:
            instructions = Markup("")
        details = {k: v for k, v in data.items() if k not in ("instructions", "instructionsText")}
        ref = row.reference_task_name
        if viewer.can_operate:
            form = html(
                '<form method="post" action="/runs/{wid}/tasks/{ref}/complete" class="human">'
                "{csrf}"
                '<label for="out-{ref}">Output (a JSON object)</label>'
                '<textarea id="out-{ref}" name="output" rows="6" spellcheck="false" '
                'class="code">{draft}</textarea>'
                '<label for="why-{ref}">Reason (when failing it)</label>'
                '<input id="why-{ref}" name="reason">'
                '<div class="buttons"><button type="submit" name="outcome" value="COMPLETED" '
                'class="primary">Complete</button> <button type="submit" name="outcome" '
                'value="FAILED" class="danger">Fail</button></div></form>',
                wid=run.workflow_id,
                ref=ref,
                csrf=csrf_field(viewer.csrf),
                draft=drafts.get(ref, "{\n  \n}"),
            )
        else:
            form = Markup(
                '<p class="muted">You can read this task; completing it needs the operator '
                "role.</p>"
            )
        sections.append(
            html(
                '<section class="waiting" id="human-{ref}" aria-labelledby="human-h-{ref}">'
                '<h2 id="human-h-{ref}">Waiting for a person: {ref}</h2>'
                '<p class="muted">{type} task, waiting since {since}</p>{instructions}'
                "<h3>Input</h3>{input}{form}</section>",
                ref=ref,
                type=row.task_type,
                since=when(row.scheduled_time, _now(console)),
                instructions=instructions,
                input=json_block(details, label=f"Input of {ref}"),
                form=form,
            )
        )
    return join(sections)


def _value_block(console: Console, inline: Any, ref: str | None, href: str, label: str) -> Markup:
    if ref is not None:
        return html(
            '<p>Kept in the payload store (<code>{}</code>). <a href="{}">Show it</a> · '
            '<a href="{}" download>Download</a></p>',
            ref,
            href,
            url(href, download=1),
        )
    return json_block(inline if inline is not None else {}, url(href, download=1), label)


def _task_details(console: Console, run: RunRecord, task_id: str) -> Markup:
    row = console.task(run.workflow_id, task_id)
    now = _now(console)
    store = console.deps.run_store
    attempts: list[Markup] = []
    for attempt in range(1, row.attempt + 1):
        lease = store.get_lease(row.task_id, attempt)
        current = attempt == row.attempt
        attempts.append(
            html(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                attempt,
                status_badge(row.status.value) if current else "retried",
                lease.worker_id if lease else (row.worker_id if current else ""),
                when(lease.acquired_at, now) if lease else "",
            )
        )
    logs = store.list_task_logs(row.task_id)
    log_html = (
        html(
            '<table class="logs"><caption>Logs</caption><thead><tr><th scope="col">Time</th>'
            '<th scope="col">Line</th></tr></thead><tbody>{}</tbody></table>',
            join(
                html("<tr><td>{}</td><td><pre>{}</pre></td></tr>", when(e.created_time, now), e.log)
                for e in logs
            ),
        )
        if logs
        else Markup('<p class="muted">No log lines.</p>')
    )
    base = f"/runs/{run.workflow_id}/tasks/{row.task_id}/data"
    facts = [
        ("Status", status_badge(row.status.value)),
        ("Type", task_type_name(row)),
        ("Task id", html("<code>{}</code>", row.task_id)),
        ("Attempt", f"{row.attempt} (retries so far: {row.retry_count})"),
        ("Worker", row.worker_id or "—"),
        ("Queue", row.queue_name or "—"),
        ("Domain", row.domain or "—"),
        ("Scheduled", when(row.scheduled_time, now)),
        ("Started", when(row.start_time, now)),
        ("Ended", when(row.end_time, now)),
        ("Polls", str(row.poll_count)),
    ]
    if row.reason_for_incompletion:
        facts.append(
            ("Reason", html('<span class="reason">{}</span>', row.reason_for_incompletion))
        )
    if isinstance(row.output_data, dict) and row.output_data.get("subWorkflowId"):
        facts.append(
            ("Child run", html('<a href="/runs/{0}">{0}</a>', row.output_data["subWorkflowId"]))
        )
    return html(
        '<section id="task" class="task-details" aria-labelledby="task-h" tabindex="-1">'
        '<h2 id="task-h">Task {ref}</h2><dl class="facts">{facts}</dl>'
        '<table class="attempts"><caption>Attempts</caption><thead><tr><th scope="col">'
        'Attempt</th><th scope="col">Outcome</th><th scope="col">Worker</th>'
        '<th scope="col">Handed out</th></tr></thead><tbody>{attempts}</tbody></table>'
        "<h3>Input</h3>{input}<h3>Output</h3>{output}{logs}</section>",
        ref=row.reference_task_name,
        facts=join(html("<div><dt>{}</dt><dd>{}</dd></div>", k, v) for k, v in facts),
        attempts=join(attempts),
        input=_value_block(console, row.input_data, row.input_ref, f"{base}/input", "Task input"),
        output=_value_block(
            console, row.output_data, row.output_ref, f"{base}/output", "Task output"
        ),
        logs=log_html,
    )


def run_page(
    request: Request,
    viewer: Viewer,
    workflow_id: str,
    *,
    task: str | None = None,
    flash: str | None = None,
    flash_error: bool = False,
    drafts: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    console = Console.of(request)
    run = console.run(workflow_id)
    rows = console.tasks_of(workflow_id)
    data_base = f"/runs/{workflow_id}/data"
    body = html(
        "{summary}{actions}{human}{live}{task}"
        '<section aria-labelledby="data-h"><h2 id="data-h">Input, output and variables</h2>'
        "<details><summary>Input</summary>{input}</details>"
        "<details><summary>Output</summary>{output}</details>"
        "<details><summary>Variables</summary>{variables}</details></section>",
        summary=_summary(run, console.deps.clock()),
        actions=_actions(console, viewer, run, rows),
        human=_human_forms(console, viewer, run, rows, drafts or {}),
        live=live_section(console, run, rows),
        task=_task_details(console, run, task) if task else "",
        input=_value_block(console, run.input, run.input_ref, f"{data_base}/input", "Run input"),
        output=_value_block(
            console, run.output, run.output_ref, f"{data_base}/output", "Run output"
        ),
        variables=json_block(run.variables, label="Variables"),
    )
    text = page(
        f"Run of {run.name} v{run.version}",
        body,
        who=viewer.principal,
        csrf=viewer.csrf,
        section="runs",
        signed_in=viewer.signed_in,
        flash=flash,
        flash_error=flash_error,
    )
    return viewer.respond(text, status_code)


@router.get("/runs/{workflow_id}", include_in_schema=False)
def show_run(
    request: Request,
    viewer: CurrentViewer,
    workflow_id: str,
    task: str | None = None,
    done: str | None = None,
) -> Response:
    return run_page(request, viewer, workflow_id, task=task, flash=done)


@router.get("/runs/{workflow_id}/live", include_in_schema=False)
def live(request: Request, viewer: CurrentViewer, workflow_id: str) -> Response:
    console = Console.of(request)
    run = console.run(workflow_id)
    return viewer.respond(str(live_section(console, run, console.tasks_of(workflow_id))))


def _value_response(
    request: Request, viewer: Viewer, value: Any, title: str, href: str, download: bool
) -> Response:
    if download:
        name = title.replace(" ", "-").lower() + ".json"
        return viewer.finish(
            Response(
                json_text(value),
                media_type="application/json",
                headers={"Content-Disposition": f'attachment; filename="{name}"'},
            )
        )
    body = html(
        '<p><a href="{}" download>Download</a></p>{}',
        url(href, download=1),
        json_block(value, url(href, download=1), title),
    )
    return viewer.respond(
        page(
            title,
            body,
            who=viewer.principal,
            csrf=viewer.csrf,
            section="runs",
            signed_in=viewer.signed_in,
        )
    )


@router.get("/runs/{workflow_id}/data/{which}", include_in_schema=False)
def run_data(
    request: Request, viewer: CurrentViewer, workflow_id: str, which: str, download: int = 0
) -> Response:
    console = Console.of(request)
    run = console.run(workflow_id)
    if which == "input":
        value = console.load(run.input, run.input_ref)
    elif which == "output":
        value = console.load(run.output, run.output_ref)
    else:
        raise bad_request("which must be input or output", "which")
    return _value_response(
        request,
        viewer,
        value,
        f"{which.title()} of run {workflow_id}",
        f"/runs/{workflow_id}/data/{which}",
        bool(download),
    )


@router.get("/runs/{workflow_id}/tasks/{task_id}/data/{which}", include_in_schema=False)
def task_data(
    request: Request,
    viewer: CurrentViewer,
    workflow_id: str,
    task_id: str,
    which: str,
    download: int = 0,
) -> Response:
    console = Console.of(request)
    row = console.task(workflow_id, task_id)
    if which == "input":
        value = console.load(row.input_data, row.input_ref)
    elif which == "output":
        value = console.load(row.output_data, row.output_ref)
    else:
        raise bad_request("which must be input or output", "which")
    return _value_response(
        request,
        viewer,
        value,
        f"{which.title()} of task {row.reference_task_name}",
        f"/runs/{workflow_id}/tasks/{task_id}/data/{which}",
        bool(download),
    )


@router.post("/runs/{workflow_id}/actions/{action}", include_in_schema=False)
def run_action(
    request: Request, viewer: CurrentViewer, fields: Form, workflow_id: str, action: str
) -> Response:
    done = Console.of(request).act(viewer.principal, workflow_id, action, fields)
    return viewer.finish(RedirectResponse(url(f"/runs/{workflow_id}", done=done), 303))


@router.post("/runs/{workflow_id}/tasks/{ref}/complete", include_in_schema=False)
def complete_task(
    request: Request, viewer: CurrentViewer, fields: Form, workflow_id: str, ref: str
) -> Response:
    outcome = fields.get("outcome", "COMPLETED").upper()
    text = fields.get("output", "")
    try:
        Console.of(request).complete_human(
            viewer.principal, workflow_id, ref, outcome, text, fields.get("reason", "")
        )
    except ApiError as exc:
        if exc.status != 400:
            raise
        return run_page(
            request,
            viewer,
            workflow_id,
            flash=f"{ref}: {exc.message}",
            flash_error=True,
            drafts={ref: text},
            status_code=400,
        )
    verb = "completed" if outcome == "COMPLETED" else "failed"
    return viewer.finish(RedirectResponse(url(f"/runs/{workflow_id}", done=f"{ref} {verb}"), 303))
