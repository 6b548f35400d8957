"""The console in a real browser: Playwright for Python driving Debian's Chromium.

* The invoice walk-through on the embedded platform with the example workers (the
  connector lodging with the dev sandbox): the run is started from the start form, found
  in the runs list, its graph shows every task with its status, the approval is completed
  through the HUMAN form, and the run turns COMPLETED.
* A reader (tokens mode) sees no action buttons, and a forged action request gets 403.
* The Entra ID sign-in through a fake provider on another site (``localhost`` against the
  console's ``127.0.0.1``), as a browser follows it.

Screenshots go to ``tests/artifacts/`` (ignored by git); the README shows copies in
``docs/images/``. Skipped, saying why, when Chromium is not installed.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from control_plane.console.config import ConsoleSettings
from control_plane.dev import DevPlatform
from tests.console.conftest import TOKENS, free_port
from tests.console.fake_oidc import FakeOidcProvider, User

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Debian's Chromium is not installed at /usr/bin/chromium (.ci/run installs it)",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page_of(browser: Any) -> Iterator[Any]:
    contexts: list[Any] = []

    def make() -> Any:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        return page

    yield make
    for context in contexts:
        context.close()


def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def dev_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``stepway dev --with-workers`` in this process: embedded platform, control plane on
    a free port, the example workers as child processes; no CONNECTOR_* variables, so the
    connector lodges with the dev sandbox."""
    for name in ("CONNECTOR_TAX_URL", "CONNECTOR_BANK_URL", "CONNECTOR_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    port = free_port()
    platform = DevPlatform(data_dir=tmp_path / "data", port=port, repo_root=REPO)
    app = platform.start()
    platform.register_examples()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    platform.start_workers()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        platform.stop()


def _statuses(page: Any) -> dict[str, str]:
    found: dict[str, str] = page.eval_on_selector_all(
        "svg.graph [data-ref]",
        "els => Object.fromEntries(els.map(e => [e.dataset.ref, e.dataset.status]))",
    )
    return found


def test_the_invoice_run_in_the_console(dev_platform: str, page_of: Any) -> None:
    base = dev_platform
    page = page_of()
    sample = json.loads((REPO / "docs" / "samples" / "invoice.json").read_text())

    # start it from the start form
    page.goto(f"{base}/start?name=invoice_intake")
    page.get_by_label("Input (a JSON object)").fill(json.dumps(sample, indent=2))
    page.get_by_label("Correlation id").fill("invoice-4711")
    page.get_by_role("button", name="Start").click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]+"))
    workflow_id = page.url.split("/runs/")[1].split("?")[0]

    # find it in the runs list, by its correlation id
    page.goto(f"{base}/")
    page.get_by_label("Correlation id").fill("invoice-4711")
    page.get_by_role("button", name="Search").click()
    row = page.locator(f'tr[data-run="{workflow_id}"]')
    assert row.count() == 1
    assert "invoice_intake" in row.inner_text()
    row.get_by_role("link").click()
    page.wait_for_url(f"{base}/runs/{workflow_id}")

    # the run page follows the run live until the approval waits (then it shows the form)
    page.wait_for_selector("section.waiting#human-approval", timeout=60_000)
    statuses = _statuses(page)
    assert statuses["parse"] == "COMPLETED" and statuses["classify"] == "COMPLETED"
    assert statuses["route"] == "COMPLETED" and statuses["approval"] == "SCHEDULED"
    assert statuses["lodge"] == "NOT_RUN"
    approval = page.locator("section.waiting#human-approval")
    assert approval.get_by_role("heading", name="Approve an invoice").is_visible()
    shot(page, "console-approval.png")

    page.get_by_label("Output (a JSON object)").fill('{"approved": true, "amount": 120.5}')
    approval.get_by_role("button", name="Complete").click()
    page.wait_for_selector('#live[data-status="COMPLETED"]', timeout=60_000)

    assert _statuses(page) == {
        "parse": "COMPLETED",
        "classify": "COMPLETED",
        "route": "COMPLETED",
        "approval": "COMPLETED",
        "decision": "COMPLETED",
        "lodge": "COMPLETED",
        "record_lodged": "COMPLETED",
        "record_rejected": "NOT_RUN",
        "record_not_an_invoice": "NOT_RUN",
    }
    assert page.locator("dl.facts .badge").first.inner_text() == "COMPLETED"
    page.get_by_text("Output", exact=True).click()
    output = page.locator("details[open] pre.json").inner_text()
    assert re.search(r'"lodgementId": "SANDBOX-[0-9A-F]+"', output), output
    shot(page, "console-run.png")

    # the lodge task's details: worker, attempts, output
    page.locator('svg.graph a[data-ref="lodge"]').click()
    details = page.locator("#task")
    details.wait_for()
    assert "Task lodge" in details.inner_text() and "SANDBOX-" in details.inner_text()

    page.goto(f"{base}/")
    assert page.locator(f'tr[data-run="{workflow_id}"] .badge').inner_text() == "COMPLETED"
    shot(page, "console-runs.png")
    page.goto(f"{base}/task-types")
    assert page.locator('tr[data-type="lodge_return"]').count() == 1
    shot(page, "console-task-types.png")


def test_a_reader_sees_no_actions_and_a_forged_action_gets_403(
    make_console: Any, page_of: Any
) -> None:
    console = make_console("tokens")
    workflow_id = console.invoice_run()
    page = page_of()
    page.goto(f"{console.url}/runs/{workflow_id}")
    page.wait_for_url(re.compile(r"/signin"))
    page.get_by_label("Access token").fill(TOKENS["reader"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/runs/{workflow_id}")
    assert page.get_by_text("reader-user").is_visible()
    for name in ("Pause", "Terminate", "Complete", "Fail", "Restart", "Retry"):
        assert page.get_by_role("button", name=name, exact=True).count() == 0, name
    assert page.locator('form[action*="/actions/"], form.human').count() == 0
    assert page.get_by_text("completing it needs the operator role").is_visible()
    shot(page, "console-reader.png")

    # the same requests an operator's buttons send, forged by the reader's browser
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
    pause = page.request.post(
        f"{console.url}/runs/{workflow_id}/actions/pause", form={"csrf": csrf or ""}
    )
    assert pause.status == 403
    complete = page.request.post(
        f"{console.url}/runs/{workflow_id}/tasks/approval/complete",
        form={"csrf": csrf or "", "output": "{}", "outcome": "COMPLETED"},
    )
    assert complete.status == 403
    assert console.signals.calls == []


def test_entra_sign_in_in_the_browser(make_console: Any, page_of: Any) -> None:
    with FakeOidcProvider("api://stepway-test", "console-client", host="localhost") as idp:
        idp.user = User(name="Olga Operator", roles=["operator"])
        console = make_console(
            "entra",
            entra_issuer=idp.issuer,
            entra_audience=["api://stepway-test"],
            entra_jwks=idp.jwks(),
            console=ConsoleSettings(client_id="console-client"),
        )
        workflow_id = console.invoice_run()
        page = page_of()
        page.goto(f"{console.url}/runs/{workflow_id}")
        page.get_by_role("link", name="Sign in with Microsoft Entra ID").click()
        page.wait_for_url(f"{console.url}/runs/{workflow_id}")
        assert page.get_by_text("Olga Operator").is_visible()
        assert page.get_by_role("button", name="Pause", exact=True).count() == 1
        assert len(idp.token_requests) == 1
