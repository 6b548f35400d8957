"""The console over real HTTP: sign-in, what each role sees and may do, forged forms, the
HUMAN form, search and paging, the inbox, task types, definitions and the start form."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx

from control_plane.console.html import INLINE_JSON_LIMIT
from engine.language.definitions import RunStatus
from engine.ports.run_store import NewRun, RunUpdate, TaskRecord, TaskStatus
from engine.runtime.snapshots import publish_snapshot_of
from tests.unit.control_plane.console.conftest import TOKENS, csrf_of, now_ms


def _status_of(page: str, ref: str) -> str | None:
    found = re.search(rf'data-ref="{re.escape(ref)}" data-status="([A-Z_]+)"', page)
    return found.group(1) if found else None


# --- sign-in ------------------------------------------------------------------------------


def test_pages_need_a_sign_in_and_a_token_signs_in(make_console: Any) -> None:
    console = make_console("tokens")
    client = console.browser()
    r = client.get("/inbox")
    assert r.status_code == 303
    assert r.headers["location"].startswith("/signin?next=%2Finbox")

    page = client.get(r.headers["location"])
    assert page.status_code == 200 and 'type="password"' in page.text
    wrong = client.post(
        "/signin?next=/inbox", data={"token": "not-a-token-at-all", "csrf": csrf_of(page.text)}
    )
    assert wrong.status_code == 401 and "unknown bearer token" in wrong.text

    ok = client.post(
        "/signin?next=/inbox", data={"token": TOKENS["reader"], "csrf": csrf_of(page.text)}
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/inbox"
    cookie = next(h for h in ok.headers.get_list("set-cookie") if h.startswith("stepway_session="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKENS["reader"] in cookie
    inbox = client.get("/inbox")
    assert inbox.status_code == 200 and "reader-user" in inbox.text

    # signing out forgets the token
    out = client.post("/signout", data={"csrf": csrf_of(inbox.text)})
    assert out.status_code == 303
    assert client.get("/inbox").status_code == 303


def test_a_sign_in_goes_back_only_to_this_server(make_console: Any) -> None:
    console = make_console("tokens")
    client = console.browser()
    page = client.get("/signin")
    r = client.post(
        "/signin?next=//evil.example/x",
        data={"token": TOKENS["reader"], "csrf": csrf_of(page.text)},
    )
    assert r.status_code == 303 and r.headers["location"] == "/"


def test_a_worker_token_does_not_open_the_console(make_console: Any) -> None:
    console = make_console("tokens")
    client = console.browser()
    page = client.get("/signin")
    r = client.post("/signin", data={"token": TOKENS["worker"], "csrf": csrf_of(page.text)})
    assert r.status_code == 403 and "may not read" in r.text


def test_none_mode_needs_no_sign_in(make_console: Any) -> None:
    console = make_console("none")
    workflow_id = console.invoice_run()
    page = console.browser().get(f"/runs/{workflow_id}")
    assert page.status_code == 200
    assert "anonymous" in page.text and "/actions/pause" in page.text


# --- roles and forged forms ---------------------------------------------------------------


def test_a_reader_sees_no_actions_and_a_forged_action_gets_403(make_console: Any) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    reader = console.signed_in("reader")
    page = reader.get(f"/runs/{workflow_id}")
    assert page.status_code == 200
    assert "/actions/" not in page.text and 'value="COMPLETED"' not in page.text
    assert "completing it needs the operator role" in page.text
    # a reader who forges the requests with a valid CSRF token (from the sign-out form)
    csrf = csrf_of(page.text)
    for path, data in (
        (f"/runs/{workflow_id}/actions/pause", {}),
        (f"/runs/{workflow_id}/actions/terminate", {"reason": "x"}),
        (f"/runs/{workflow_id}/tasks/approval/complete", {"output": "{}", "outcome": "COMPLETED"}),
        ("/start", {"name": "invoice_intake", "input": "{}"}),
    ):
        r = reader.post(path, data={**data, "csrf": csrf})
        assert r.status_code == 403, (path, r.text)
        assert "lacks the &#39;operator&#39; role" in r.text
    assert console.signals.calls == []


def test_forms_without_the_csrf_cookie_token_or_from_elsewhere_get_403(make_console: Any) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    operator = console.signed_in("operator")
    page = operator.get(f"/runs/{workflow_id}")
    csrf = csrf_of(page.text)
    pause = f"/runs/{workflow_id}/actions/pause"
    assert operator.post(pause, data={}).status_code == 403
    assert operator.post(pause, data={"csrf": "x" * 43}).status_code == 403
    cross = operator.post(pause, data={"csrf": csrf}, headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403
    # a cross-site form carries the session cookie only with SameSite=Lax/None; without
    # the SameSite=Strict CSRF cookie the token cannot match
    bare = httpx.Client(base_url=console.url, cookies={"stepway_session": TOKENS["operator"]})
    try:
        assert bare.post(pause, data={"csrf": csrf}).status_code == 403
    finally:
        bare.close()
    assert console.signals.calls == []
    # the real form works
    ok = operator.post(pause, data={"csrf": csrf})
    assert ok.status_code == 303, ok.text
    assert [(c.kind, c.workflow_id) for c in console.signals.calls] == [("suspend", workflow_id)]
    assert console.deps.run_store.get_run(workflow_id).status.value == "PAUSED"  # type: ignore[union-attr]


def test_an_operator_terminates_with_a_reason(make_console: Any) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    operator = console.signed_in("operator")
    csrf = csrf_of(operator.get(f"/runs/{workflow_id}").text)
    r = operator.post(
        f"/runs/{workflow_id}/actions/terminate", data={"csrf": csrf, "reason": "duplicate"}
    )
    assert r.status_code == 303
    [event] = console.signals.events("stepway.terminate")
    assert event.workflow_id == workflow_id and event.data == {"reason": "duplicate"}
    assert "Terminate" in operator.get(r.headers["location"]).text


def test_an_operator_skips_a_task_not_scheduled_yet_and_reruns_a_finished_run(
    make_console: Any,
) -> None:
    console = make_console("tokens", settle_seconds=0.05)
    workflow_id = console.invoice_run()
    operator = console.signed_in("operator")
    page = operator.get(f"/runs/{workflow_id}").text
    # skip offers only what the run has not scheduled yet (Conductor's skip refuses the rest)
    skip_form = page[page.index('action="/runs/' + workflow_id + '/actions/skip"') :]
    skip_form = skip_form[: skip_form.index("</form>")]
    assert 'value="parse"' not in skip_form and 'value="approval"' not in skip_form
    refs = re.findall(r'<option value="([^"]+)"', skip_form)
    assert refs, skip_form
    r = operator.post(
        f"/runs/{workflow_id}/actions/skip", data={"csrf": csrf_of(page), "taskRef": refs[0]}
    )
    assert r.status_code == 303, r.text
    [event] = console.signals.events("stepway.skip")
    assert event.workflow_id == workflow_id
    assert event.data["taskReferenceName"] == refs[0]

    finished = console.invoice_run(approval_waiting=False)
    console.deps.run_store.update_run(finished, RunUpdate(status=RunStatus.FAILED), now_ms())
    page = operator.get(f"/runs/{finished}").text
    assert f'action="/runs/{finished}/actions/skip"' not in page  # only while running
    parse_id = f"{finished}-parse"
    r = operator.post(
        f"/runs/{finished}/actions/rerun", data={"csrf": csrf_of(page), "taskId": parse_id}
    )
    assert r.status_code == 303, r.text
    # the run goes again from parse: the rows from parse on are gone, the run is RUNNING
    assert console.deps.run_store.get_run(finished).status == RunStatus.RUNNING  # type: ignore[union-attr]
    assert console.deps.run_store.get_task(parse_id) is None


# --- the run page and the HUMAN form ----------------------------------------------------


def test_the_run_page_draws_every_task_with_its_status(make_console: Any) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    page = console.signed_in("reader").get(f"/runs/{workflow_id}").text
    statuses = {
        ref: _status_of(page, ref)
        for ref in (
            "parse",
            "classify",
            "route",
            "approval",
            "decision",
            "lodge",
            "record_lodged",
            "record_rejected",
            "record_not_an_invoice",
        )
    }
    assert statuses == {
        "parse": "COMPLETED",
        "classify": "COMPLETED",
        "route": "COMPLETED",
        "approval": "SCHEDULED",
        "decision": "NOT_RUN",
        "lodge": "NOT_RUN",
        "record_lodged": "NOT_RUN",
        "record_rejected": "NOT_RUN",
        "record_not_an_invoice": "NOT_RUN",
    }
    assert 'data-poll="/runs/' in page  # live while RUNNING
    live = console.signed_in("reader").get(f"/runs/{workflow_id}/live")
    assert live.status_code == 200 and live.text.startswith('<section id="live"')


def test_an_operator_completes_the_approval_through_the_form(make_console: Any) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    operator = console.signed_in("operator")
    page = operator.get(f"/runs/{workflow_id}").text
    # the instructions, rendered from markdown, and the task's input
    assert "<h1>Approve an invoice</h1>" in page
    assert "<code>approved</code>" in page
    assert "docs/samples/invoice.pdf" in page
    csrf = csrf_of(page)
    action = f"/runs/{workflow_id}/tasks/approval/complete"

    bad = operator.post(
        action, data={"csrf": csrf, "output": "{approved: yes", "outcome": "COMPLETED"}
    )
    assert bad.status_code == 400
    assert "output: not valid JSON" in bad.text and "{approved: yes" in bad.text
    assert console.signals.calls == []

    output = {"approved": True, "amount": 120.5}
    done = operator.post(
        action, data={"csrf": csrf, "output": json.dumps(output), "outcome": "COMPLETED"}
    )
    assert done.status_code == 303, done.text
    [event] = console.signals.events(f"{workflow_id}-approval")
    assert event.data["status"] == "COMPLETED" and event.data["output"] == output
    assert event.data["workerId"] == "operator-user"


def test_failing_a_human_task_sends_the_reason(make_console: Any) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    operator = console.signed_in("operator")
    csrf = csrf_of(operator.get(f"/runs/{workflow_id}").text)
    r = operator.post(
        f"/runs/{workflow_id}/tasks/approval/complete",
        data={"csrf": csrf, "output": "{}", "outcome": "FAILED", "reason": "not ours"},
    )
    assert r.status_code == 303
    [event] = console.signals.events(f"{workflow_id}-approval")
    assert event.data["status"] == "FAILED" and event.data["reason"] == "not ours"


def test_task_details_offloaded_and_large_values(make_console: Any) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    store = console.deps.run_store
    big = {"rows": ["x" * 100] * 400}
    ref = "payloads/test/big-output.json"
    console.deps.payloads.put(ref, json.dumps({"kept": "outside"}).encode())  # type: ignore[union-attr]
    t = now_ms()
    store.upsert_task(
        TaskRecord(
            task_id="big-task",
            workflow_id=workflow_id,
            reference_task_name="lodge",
            task_type="WORKER",
            status=TaskStatus.COMPLETED,
            input_data=big,
            output_ref=ref,
            scheduled_time=t,
            worker_id="w-9",
            queue_name="lodge_return",
            task_def_name="lodge_return",
        ),
        t,
    )
    store.append_task_log("big-task", "lodged <b>it</b>", t)
    reader = console.signed_in("reader")
    page = reader.get(f"/runs/{workflow_id}", params={"task": "big-task"}).text
    assert "Task lodge" in page and "w-9" in page
    assert "lodged &lt;b&gt;it&lt;/b&gt;" in page  # logs are shown, escaped
    assert f"Shown: the first {INLINE_JSON_LIMIT:,}" in page  # the large input is cut ...
    download = f"/runs/{workflow_id}/tasks/big-task/data/input?download=1"
    assert download.replace("&", "&amp;") in page or download in page  # ... with a download
    whole = reader.get(download)
    assert whole.status_code == 200 and whole.json() == big
    assert "attachment" in whole.headers["content-disposition"]
    # the offloaded output is fetched only on demand
    assert "Kept in the payload store" in page and ref in page and '"kept"' not in page
    shown = reader.get(f"/runs/{workflow_id}/tasks/big-task/data/output")
    assert shown.status_code == 200 and "outside" in shown.text


def test_values_are_escaped_and_instructions_are_safe_markdown(make_console: Any) -> None:
    console = make_console("none")
    store = console.deps.run_store
    store.put_instruction(
        "invoice_approval",
        2,
        "# Check\n<script>alert(1)</script>\n[click](javascript:alert(1))",
        now_ms(),
    )
    evil = console.invoice_run()
    with_script = "corr-<script>alert(2)</script>"
    store.create_run(
        NewRun(
            workflow_id="evil-run",
            name="invoice_intake",
            version=1,
            correlation_id=with_script,
            create_time=now_ms(),
        )
    )
    client = console.browser()
    runs = client.get("/").text
    assert "<script>alert(2)</script>" not in runs and "&lt;script&gt;alert(2)" in runs
    page = client.get(f"/runs/{evil}").text
    assert "<script>alert(1)</script>" not in page
    assert 'href="javascript:' not in page  # the link is shown as text, not made a link
    assert "<h1>Check</h1>" in page
    headers = client.get(f"/runs/{evil}").headers
    assert "script-src 'self'" in headers["content-security-policy"]


# --- runs list, inbox, task types, definitions, start -----------------------------------


def test_runs_search_filters_and_pages(make_console: Any) -> None:
    console = make_console("tokens")
    store = console.deps.run_store
    base = now_ms() - 3_600_000 * 48
    for i in range(30):
        store.create_run(
            NewRun(
                workflow_id=f"run-{i:02d}",
                name="invoice_intake" if i % 2 else "month_end_close",
                version=1,
                correlation_id=f"order-{i}",
                create_time=base + i * 60_000,
            )
        )
    store.create_run(
        NewRun(workflow_id="recent", name="month_end_close", version=1, create_time=now_ms())
    )
    reader = console.signed_in("reader")

    def ids(page: str) -> list[str]:
        return re.findall(r'<tr data-run="([^"]+)"', page)

    first = reader.get("/", params={"size": 25}).text
    assert ids(first)[:3] == ["recent", "run-29", "run-28"] and len(ids(first)) == 25
    assert "1 to 25 of 31" in first
    older = re.search(r'<a href="([^"]+)" rel="next">', first)
    assert older
    second = reader.get(older.group(1).replace("&amp;", "&")).text
    assert ids(second) == ["run-05", "run-04", "run-03", "run-02", "run-01", "run-00"]

    assert ids(reader.get("/", params={"correlation": "order-7"}).text) == ["run-07"]
    named = ids(reader.get("/", params={"name": "invoice_intake"}).text)
    assert len(named) == 15 and all(int(i[-2:]) % 2 for i in named)
    assert ids(reader.get("/", params={"within": "1h"}).text) == ["recent"]
    window = reader.get("/", params={"from": "2000-01-01T00:00", "to": "2000-01-02T00:00"})
    assert "No run matches" in window.text
    assert reader.get("/", params={"from": "yesterday"}).status_code == 400
    assert ids(reader.get("/", params={"status": "COMPLETED"}).text) == []
    # a run id opens the run
    found = reader.get("/", params={"run": "run-07"})
    assert found.status_code == 303 and found.headers["location"] == "/runs/run-07"
    # the table alone, for the live refresh
    table = reader.get("/", params={"fragment": "table"}).text
    assert table.startswith('<div id="runs-table"') and "<html" not in table


def test_the_inbox_lists_waiting_human_tasks_oldest_first(make_console: Any) -> None:
    console = make_console("tokens")
    t = now_ms()
    newer = console.invoice_run(created=t - 1_000)
    older = console.invoice_run(created=t - 90_000)
    console.invoice_run(created=t - 200_000, approval_waiting=False)
    page = console.signed_in("reader").get("/inbox").text
    assert re.findall(r'href="/runs/([^"#]+)#human-approval"', page) == [older, newer]
    assert "invoice_approval" in page


def test_task_types_show_queues_workers_and_the_no_worker_warning(make_console: Any) -> None:
    console = make_console("tokens")
    console.deps.queue.send("parse_pdf", {"taskId": "t", "attempt": 1}, message_id="t:1")
    console.deps.run_store.record_poll("classify_document", None, "worker-7", now_ms())
    page = console.signed_in("reader").get("/task-types").text

    def row(task_type: str) -> str:
        found = re.search(rf'<tr data-type="{task_type}">(.*?)</tr>', page, re.S)
        assert found, task_type
        return found.group(1)

    assert "<td>1</td>" in row("parse_pdf") and "no active worker" in row("parse_pdf")
    assert "never polled" in row("parse_pdf")
    assert "worker-7" in row("classify_document") and "no active worker" not in row(
        "classify_document"
    )


def test_definition_pages_show_json_versions_and_validation(make_console: Any) -> None:
    console = make_console("tokens")
    reader = console.signed_in("reader")
    listing = reader.get("/workflows").text
    assert 'href="/workflows/invoice_intake"' in listing
    one = reader.get("/workflows/invoice_intake").text
    assert "Valid." in one and 'data-ref="approval"' in one and "&#34;tasks&#34;" in one
    td = reader.get("/taskdefs/lodge_return").text
    assert "Used by: invoice_intake v1" in td and "Valid." in td
    assert reader.get("/workflows/nope").status_code == 404
    # a definition with a problem says what it is
    console.deps.run_store.put_definition(
        "broken",
        1,
        {"name": "broken", "version": 1, "tasks": [
            {"name": "nobody_serves_this", "taskReferenceName": "a", "type": "WORKER"}
        ]},
        now_ms(),
    )  # fmt: skip
    broken = reader.get("/workflows/broken").text
    # task definitions are optional (not strict): a type without one runs with the default
    assert "nobody_serves_this" in broken and 'class="issues"' in broken
    assert "Valid, with warnings." in broken and "runs with Conductor&#39;s default" in broken
    # an error is shown as one
    console.deps.run_store.put_definition(
        "typo",
        1,
        {"name": "typo", "version": 1, "tasks": [
            {"name": "w", "taskReferenceName": "w", "type": "WAIT",
             "inputParameters": {"x": "${nowhere.output}"}}
        ]},
        now_ms(),
    )  # fmt: skip
    typo = reader.get("/workflows/typo").text
    assert "Valid" not in typo.split("<h2>Graph</h2>")[0].split("<h2>Validation</h2>")[1]
    assert re.search(r"<li><code>\$\.tasks\[0\]\.inputParameters\.x</code>: references", typo)
    # what Conductor accepts but reads null is a warning, shown as one
    console.deps.run_store.put_definition(
        "loose",
        1,
        {"name": "loose", "version": 1, "outputParameters": {"x": "${gone.output}"}, "tasks": [
            {"name": "w", "taskReferenceName": "w", "type": "WAIT"}
        ]},
        now_ms(),
    )  # fmt: skip
    loose = reader.get("/workflows/loose").text
    assert "Valid, with warnings." in loose
    assert re.search(r'<li class="warning"><code>\$\.outputParameters\.x</code>: warning: ', loose)


def test_the_start_form_starts_a_run(make_console: Any) -> None:
    console = make_console("tokens")
    operator = console.signed_in("operator")
    form = operator.get("/start", params={"name": "invoice_intake"}).text
    assert "&#34;documentUrl&#34;: null" in form  # the input keys of the definition
    csrf = csrf_of(form)
    bad = operator.post("/start", data={"csrf": csrf, "name": "invoice_intake", "input": "[1]"})
    assert bad.status_code == 400 and "input: must be a JSON object" in bad.text
    r = operator.post(
        "/start",
        data={
            "csrf": csrf,
            "name": "invoice_intake",
            "input": json.dumps({"documentUrl": "d.pdf", "submittedBy": "me"}),
            "correlationId": "from-the-form",
            "priority": "3",
        },
    )
    assert r.status_code == 303, r.text
    workflow_id = r.headers["location"].split("/runs/")[1].split("?")[0]
    run = console.deps.run_store.get_run(workflow_id)
    assert run is not None and run.correlation_id == "from-the-form" and run.priority == 3
    assert [c.kind for c in console.signals.calls] == ["start"]
    assert operator.get(r.headers["location"]).status_code == 200


def test_the_console_can_be_turned_off(make_console: Any) -> None:
    from control_plane.console.config import ConsoleSettings

    console = make_console("none", console=ConsoleSettings(enabled=False))
    client = console.browser()
    assert client.get("/").status_code == 404
    assert client.get("/api/workflow/search").status_code == 200


def test_the_run_page_draws_the_definition_the_run_executes(make_console: Any) -> None:
    """A run draws the definition it started with (its snapshot), not the registration
    that overwrote it since."""
    console = make_console("tokens")
    store = console.deps.run_store
    assert console.deps.payloads is not None
    started_with = {
        "name": "invoice_intake",
        "version": 1,
        "tasks": [{"name": "hold", "taskReferenceName": "hold_then", "type": "WAIT"}],
    }
    workflow_id = str(uuid.uuid4())
    store.create_run(
        NewRun(
            workflow_id=workflow_id,
            name="invoice_intake",
            version=1,
            input={},
            definition_ref=publish_snapshot_of(store, console.deps.payloads, started_with),
            create_time=now_ms(),
        )
    )
    page = console.signed_in("reader").get(f"/runs/{workflow_id}").text
    assert _status_of(page, "hold_then") == "NOT_RUN"
    assert _status_of(page, "parse") is None  # a step of the registration only
