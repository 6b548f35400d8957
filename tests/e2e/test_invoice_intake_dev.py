"""Issue 5, "must show": the invoice example from a fresh checkout, through the real CLI.

``stepway dev --with-workers`` runs as a subprocess (embedded platform plus the three
code-area worker processes); ``stepway run invoice_intake --input
@docs/samples/invoice.json --wait`` runs as a second one; while it waits, the HUMAN
``approval`` task is completed with ``stepway complete``. The connector worker lodges
the invoice with a fake tax authority (a local ``http.server``) using a credential only
it holds. Then ``stepway dev`` is stopped with SIGINT, as Ctrl-C does.
"""

from __future__ import annotations

import http.server
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from control_plane.cli.main import app as cli_app

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "control_plane.cli"]
STARTUP_TIMEOUT = 45.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lodgement:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeTaxAuthority:
    url: str
    lodgements: list[Lodgement] = field(default_factory=list)


@pytest.fixture
def tax_authority() -> Iterator[FakeTaxAuthority]:
    """``POST /returns`` records the lodgement and answers ``{"lodgementId": "L-1"}``."""
    fake = FakeTaxAuthority(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"unreadable": raw.decode(errors="replace")}
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.lodgements.append(Lodgement(self.path, headers, body))
            if self.path != "/returns":
                self.send_error(404)
                return
            out = json.dumps({"lodgementId": "L-1", "status": "LODGED"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _wait_for(what: str, check: Any, timeout: float, dev: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert dev.poll() is None, f"stepway dev exited with {dev.returncode} while {what}"
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s {what}")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_invoice_intake_through_the_cli(tmp_path: Path, tax_authority: FakeTaxAuthority) -> None:
    api_key = "tax-key-" + secrets.token_hex(8)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWAY_")}
    env.update(
        CONNECTOR_TAX_URL=tax_authority.url,
        CONNECTOR_API_KEY=api_key,
        PYTHONUNBUFFERED="1",
        NO_COLOR="1",
    )
    data_dir = tmp_path / "data"
    dev_log = tmp_path / "dev.log"
    with dev_log.open("wb") as log:
        dev = subprocess.Popen(
            [*CLI, "dev", "--with-workers", "--port", str(port), "--data-dir", str(data_dir)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: cleaned up below if it hangs
        )
    cli_env = {**env, "STEPWAY_SERVER_URL": url}
    run: subprocess.Popen[str] | None = None
    try:
        with httpx.Client(base_url=url, timeout=10) as http:

            def answers() -> bool:
                try:
                    return http.get("/api/metadata/workflow/invoice_intake").status_code == 200
                except httpx.TransportError:
                    return False

            _wait_for("waiting for the control plane", answers, STARTUP_TIMEOUT, dev)
            workers = [p for p in _children(dev.pid) if "stepway_worker" in _cmdline(p)]
            assert len(workers) == 3, [_cmdline(p) for p in _children(dev.pid)]

            run = subprocess.Popen(
                [
                    *CLI,
                    "run",
                    "invoice_intake",
                    "--input",
                    "@docs/samples/invoice.json",
                    "--wait",
                ],
                cwd=REPO,
                env=cli_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

            # a person looks for the run that waits for them
            def waiting_run() -> str | None:
                found = http.get(
                    "/api/workflow/search",
                    params={"workflowType": "invoice_intake", "status": "RUNNING"},
                ).json()
                for r in found["results"]:
                    wf = http.get(f"/api/workflow/{r['workflowId']}").json()
                    if any(
                        t["referenceTaskName"] == "approval" and t["status"] == "SCHEDULED"
                        for t in wf["tasks"]
                    ):
                        return str(r["workflowId"])
                assert run is not None and run.poll() is None, run.communicate()
                return None

            workflow_id = _wait_for("waiting for the approval task", waiting_run, 40, dev)

            # what `stepway status` tells that person (in this process: same code, no
            # second interpreter start-up)
            shown = CliRunner().invoke(cli_app, ["status", workflow_id, "--server", url])
            assert shown.exit_code == 0, shown.output
            assert "waiting for a person: approval" in shown.output, shown.output
            assert "instructions: invoice_approval" in shown.output
            assert "definitions/instructions/invoice_approval.md" in shown.output
            assert f"stepway complete {workflow_id} approval" in shown.output

            completed = subprocess.run(
                [
                    *CLI,
                    "complete",
                    workflow_id,
                    "approval",
                    "--output",
                    '{"approved": true, "amount": 120.5}',
                ],
                cwd=REPO,
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert completed.returncode == 0, completed.stderr
            assert "approval COMPLETED" in completed.stdout

            out, err = run.communicate(timeout=40)
            assert run.returncode == 0, (out, err)
            first, _, rest = out.partition("\n")
            assert first.strip() == workflow_id
            result = json.loads(rest)
            assert result["status"] == "COMPLETED"
            assert result["output"] == {
                "documentClass": "invoice",
                "outcome": "lodged",
                "lodgementId": "L-1",
            }
            assert "waiting for HUMAN task approval" in err

            # the tax authority got one lodgement, with the credential ...
            assert len(tax_authority.lodgements) == 1
            lodged = tax_authority.lodgements[0]
            assert lodged.path == "/returns"
            assert lodged.headers["authorization"] == f"Bearer {api_key}"
            assert lodged.headers.get("idempotency-key")
            assert lodged.body == {
                "documentUrl": "docs/samples/invoice.pdf",
                "amount": 120.5,
                "reference": workflow_id,
            }
            # ... which never appears in task data, logs or anything the platform stored
            wf = http.get(f"/api/workflow/{workflow_id}").json()
            assert [t["status"] for t in wf["tasks"]] == ["COMPLETED"] * len(wf["tasks"])
            assert {t["referenceTaskName"] for t in wf["tasks"]} >= {
                "parse",
                "classify",
                "approval",
                "lodge",
                "record_lodged",
            }
            assert api_key not in json.dumps(wf)
            for t in wf["tasks"]:
                assert api_key not in http.get(f"/api/tasks/{t['taskId']}/log").text
            for stored in data_dir.rglob("*"):
                if stored.is_file():
                    assert api_key.encode() not in stored.read_bytes(), stored

        # Ctrl-C: stepway dev stops its workers and itself
        os.kill(dev.pid, signal.SIGINT)
        try:
            dev.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("stepway dev did not stop within 20 s of SIGINT")
        output = dev_log.read_text(errors="replace")
        assert "Stepway stopped." in output, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert dev.returncode in (0, 130, -signal.SIGINT), (dev.returncode, output[-3000:])
        orphans = [p for p in workers if _alive(p)]
        assert not orphans, [_cmdline(p) for p in orphans]
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.communicate()
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
