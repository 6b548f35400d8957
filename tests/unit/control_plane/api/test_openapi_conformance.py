"""The running control plane against its own OpenAPI document, with schemathesis.

schemathesis (pinned in pyproject.toml) generates requests from ``/openapi.json`` -
valid ones, boundary values and invalid ones - and sends them over real HTTP to the
control plane served by uvicorn. Its conformance checks must all pass: no 5xx, every
status code and content type documented, every response body matching its documented
schema (the error body included). The run is bounded in examples per operation; the
seed is fixed so that CI is reproducible (``STEPWAY_SCHEMATHESIS_SEED`` picks another,
``STEPWAY_SCHEMATHESIS_EXAMPLES`` another budget).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.control_plane.conftest import Server, taskdef

# Not allow_header_conformance: as in Conductor's API, POST /api/workflow/{name} and
# GET|DELETE /api/workflow/{workflowId} are one path to the server (Allow lists all three
# methods) but two path items in the document, so the check reads each item alone.
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "unsupported_method",
        "missing_required_header",
    ]
)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_api_conforms_to_its_openapi_document(make_server: Any, tmp_path: Path) -> None:
    srv: Server = make_server()
    srv.register(taskdef("st_task"))
    workflow = {
        "name": "st_flow",
        "version": 1,
        "tasks": [{"name": "st_task", "taskReferenceName": "t1", "type": "SIMPLE"}],
    }
    assert srv.client.post("/api/metadata/workflow", json=workflow).status_code == 200
    srv.dispatch("st_task")
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{srv.url}/openapi.json",
        "--checks",
        CHECKS,
        "--max-examples",
        os.environ.get("STEPWAY_SCHEMATHESIS_EXAMPLES", "25"),
        "--seed",
        os.environ.get("STEPWAY_SCHEMATHESIS_SEED", "20251111"),
        # one worker: CPython 3.11's ast.parse is not safe in concurrent threads, and
        # hypothesis parses lambdas' source to describe them
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--no-color",
        "--continue-on-failure",
    ]
    # in tmp_path: schemathesis keeps a cache of the failures it found in its cwd
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=360, check=False, cwd=tmp_path
    )
    report = done.stdout[-20000:] + done.stderr[-5000:]
    assert done.returncode == 0, report
