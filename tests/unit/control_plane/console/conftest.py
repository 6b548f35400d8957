"""Fixtures: the control plane (API and console) on SQLite adapters, served by uvicorn on
a free port, over real HTTP; the example definitions registered; no engine (the runs and
task rows a page shows are written as the engine writes them, and the signals the
console's actions send are recorded)."""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml

from control_plane.api.app import create_app
from control_plane.deps import Deps, Settings
from control_plane.services.metadata import MetadataService
from engine.adapters.payload_local import LocalPayloadStore
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.queue_sqlite import SqliteTaskQueue
from engine.adapters.run_signals_recording import RecordingRunSignals
from engine.adapters.run_store_sql import SqlRunStore
from engine.language.loading import load_paths
from engine.ports.payload_store import PayloadLimits
from engine.ports.run_store import NewRun, TaskRecord, TaskStatus

REPO = Path(__file__).resolve().parents[4]

TOKENS = {
    "admin": "admin-token-0123456789abcdef",
    "operator": "operator-token-0123456789abcdef",
    "reader": "reader-token-0123456789abcdef",
    "worker": "worker-token-0123456789abcdef",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def now_ms() -> int:
    return int(time.time() * 1000)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


@dataclass
class Console:
    url: str
    deps: Deps
    signals: RecordingRunSignals
    settings: Settings
    clients: list[httpx.Client] = field(default_factory=list)

    def browser(self) -> httpx.Client:
        """A client that keeps cookies, like a browser (redirects are not followed)."""
        client = httpx.Client(base_url=self.url, timeout=30)
        self.clients.append(client)
        return client

    def signed_in(self, role: str) -> httpx.Client:
        client = self.browser()
        page = client.get("/signin")
        assert page.status_code == 200, page.text
        r = client.post(
            "/signin?next=/",
            data={"token": TOKENS[role], "csrf": csrf_of(page.text)},
        )
        assert r.status_code == 303, r.text
        return client

    def invoice_run(self, *, approval_waiting: bool = True, created: int | None = None) -> str:
        """A run of invoice_intake whose parse, classify and route are done and whose
        HUMAN approval waits, as the interpreter records it."""
        workflow_id = str(uuid.uuid4())
        t = created or now_ms()
        store = self.deps.run_store
        store.create_run(
            NewRun(
                workflow_id=workflow_id,
                name="invoice_intake",
                version=1,
                input={"documentUrl": "docs/samples/invoice.pdf", "submittedBy": "me"},
                correlation_id=f"corr-{workflow_id[:8]}",
                create_time=t,
            )
        )
        rows = [
            ("parse", "WORKER", "parse_pdf", TaskStatus.COMPLETED, {"text": "INVOICE", "pages": 1}),
            ("classify", "WORKER", "classify_document", TaskStatus.COMPLETED,
             {"documentClass": "invoice", "confidence": 0.9}),
            ("route", "SWITCH", None, TaskStatus.COMPLETED,
             {"evaluationResult": ["invoice"], "selectedCase": "invoice"}),
        ]  # fmt: skip
        for i, (ref, kind, queue, status, output) in enumerate(rows):
            store.upsert_task(
                TaskRecord(
                    task_id=f"{workflow_id}-{ref}",
                    workflow_id=workflow_id,
                    reference_task_name=ref,
                    task_type=kind,
                    status=status,
                    seq=t + i,
                    input_data={},
                    output_data=output,
                    scheduled_time=t + i,
                    start_time=t + i,
                    end_time=t + i + 1,
                    worker_id="w-1" if kind == "WORKER" else None,
                    queue_name=queue,
                    task_def_name=queue,
                ),
                t,
            )
        if approval_waiting:
            store.upsert_task(
                TaskRecord(
                    task_id=f"{workflow_id}-approval",
                    workflow_id=workflow_id,
                    reference_task_name="approval",
                    task_type="HUMAN",
                    status=TaskStatus.SCHEDULED,
                    seq=t + 5,
                    input_data={
                        "instructions": "invoice_approval",
                        "documentUrl": "docs/samples/invoice.pdf",
                    },
                    scheduled_time=t + 5,
                ),
                t,
            )
        return workflow_id


def _tokens_file(folder: Path) -> Path:
    path = folder / "tokens.yaml"
    entries = [
        {"token": TOKENS[role], "name": f"{role}-user", "roles": [role]}
        for role in ("admin", "operator", "reader")
    ]
    entries.append(
        {"token": TOKENS["worker"], "name": "a-worker", "roles": ["worker"], "taskTypes": ["x"]}
    )
    path.write_text(yaml.safe_dump({"tokens": entries}))
    return path


@pytest.fixture
def make_console(tmp_path: Path) -> Iterator[Any]:
    started: list[tuple[uvicorn.Server, threading.Thread, Console]] = []

    def make(auth_mode: str = "tokens", **overrides: Any) -> Console:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        n = len(started)
        if auth_mode == "tokens":
            overrides.setdefault("tokens_file", _tokens_file(tmp_path))
        settings = Settings(auth_mode=auth_mode, **overrides)
        signals = RecordingRunSignals()
        deps = Deps(
            run_store=SqlRunStore(f"sqlite:///{tmp_path}/runs{n}.db"),
            queue=SqliteTaskQueue(tmp_path / f"queues{n}.db"),
            provisioner=SqliteQueueProvisioner(tmp_path / f"queues{n}.db"),
            payloads=LocalPayloadStore(
                tmp_path / f"payloads{n}",
                secret="test-secret-0123456789",
                base_url=url,
                limits=PayloadLimits(task_output_threshold=1024, max_size=200_000),
            ),
            signals=signals,
        )
        loaded = load_paths([REPO / "workers", REPO / "definitions"])
        metadata = MetadataService(settings, deps)
        metadata.register_task_defs([i.data for i in loaded.items if i.kind == "taskdef"])
        metadata.register_workflows(
            [i.data for i in loaded.items if i.kind == "workflow"], single=False, create_only=False
        )
        text = (REPO / "definitions" / "instructions" / "invoice_approval.md").read_text()
        deps.run_store.put_instruction("invoice_approval", 1, text, now_ms())
        app = create_app(settings, deps)
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.time() + 10
        while not server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.01)
        console = Console(url, deps, signals, settings)
        started.append((server, thread, console))
        return console

    yield make
    for server, thread, console in started:
        for client in console.clients:
            client.close()
        server.should_exit = True
        thread.join(timeout=10)
        console.deps.run_store.close()
        console.deps.queue.close()
