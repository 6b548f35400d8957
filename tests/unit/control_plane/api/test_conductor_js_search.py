"""``GET /workflow/search``'s ``sort`` as Conductor's official JavaScript client sends it
(``WorkflowExecutor.search(start, size, query, freeText, sort)`` of
``@io-orkes/conductor-javascript``: it always sends ``sort``, empty when none is given),
over real HTTP. The client is installed by ``.ci/run`` (``STEPWAY_TEST_CONDUCTOR_JS``
names its ``node_modules``); elsewhere the test is skipped. The Python client does not
send ``sort`` at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.ports.run_store import NewRun
from tests.unit.control_plane.conftest import Server

CLIENT = os.environ.get("STEPWAY_TEST_CONDUCTOR_JS")
SCRIPT = Path(__file__).parent / "conductor_js" / "search.cjs"

pytestmark = pytest.mark.skipif(
    not CLIENT or shutil.which("node") is None,
    reason="Conductor's JavaScript client not installed: set STEPWAY_TEST_CONDUCTOR_JS "
    "(.ci/run installs it)",
)


def test_the_javascript_client_sorts_runs_by_start_time(srv: Server) -> None:
    for i in range(3):
        srv.deps.run_store.create_run(
            NewRun(workflow_id=f"js-{i}", name="js_sorted", version=1, create_time=1_000 + i)
        )
    assert CLIENT is not None
    answer = subprocess.run(
        [
            "node",
            str(SCRIPT),
            f"{srv.url}/api",
            "js_sorted",
            "-",
            "startTime:ASC",
            "startTime:DESC",
            "startTime",
            "endTime:ASC",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NODE_PATH": CLIENT},
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    found = json.loads(answer.stdout.strip().splitlines()[-1])
    newest = ["js-2", "js-1", "js-0"]
    assert found["(none)"] == newest  # the client's empty sort: newest first
    assert found["startTime:DESC"] == newest
    assert found["startTime:ASC"] == newest[::-1]
    assert found["startTime"] == newest[::-1]  # Conductor: ASC when left out
    assert found["endTime:ASC"].startswith("error: ") and "sort" in found["endTime:ASC"]
