"""The console in a real browser (Playwright driving Debian's Chromium): a reader sees no
action buttons and a forged action request gets 403; the Entra ID sign-in through a fake
provider on another site (``localhost`` against the console's ``127.0.0.1``), as a browser
follows it. Skipped, saying why, when Chromium is not installed."""

from __future__ import annotations

import re
from typing import Any

from control_plane.console.config import ConsoleSettings
from tests.unit.control_plane.console.browser import BROWSER_TEST, browser, page_of, shot
from tests.unit.control_plane.console.conftest import TOKENS
from tests.unit.control_plane.console.fake_oidc import FakeOidcProvider, User

pytestmark = BROWSER_TEST
__all__ = ["browser", "page_of"]  # fixtures


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
