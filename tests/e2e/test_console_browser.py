"""The console in a real browser on the embedded platform with the example workers (the
connector lodging with the dev sandbox): the invoice run is started from the start form,
found in the runs list, its graph shows every task with its status, the approval is
completed through the HUMAN form and the run turns COMPLETED. Screenshots go to
``tests/artifacts/``; the README shows copies in ``docs/images/``. Skipped, saying why,
when Chromium is not installed."""

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

from control_plane.cli.dev import DevPlatform
from tests.unit.control_plane.console.browser import BROWSER_TEST, browser, page_of, shot
from tests.unit.control_plane.console.conftest import free_port

REPO = Path(__file__).resolve().parents[2]

pytestmark = BROWSER_TEST
__all__ = ["browser", "page_of"]  # fixtures


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
    assert statuses["route"] == "COMPLETED" and statuses["approval"] == "IN_PROGRESS"
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
