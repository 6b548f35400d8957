"""Data platform handlers: reconciliation rules, chunked IN_PROGRESS callbacks over
HTTP, and the CSV export through the external storage location."""

from __future__ import annotations

import csv
import functools
import http.server
import io
import threading
import time
from pathlib import Path
from typing import Any

from stepway_worker import Worker, WorkerSettings, registry
from stepway_worker.context import TaskContext
from stepway_worker.testing import FakeTaskServer

import workers.data_platform  # noqa: F401  (registers the handlers)


def run(task_type: str, data: dict[str, Any], previous: dict[str, Any] | None = None) -> Any:
    handler = registry.get(task_type)
    assert handler is not None
    ctx = TaskContext(task_id="t", task_type=task_type, input=data, previous_output=previous or {})
    return handler.execute(ctx)


BANK = [
    {"id": "b1", "date": "2024-05-01", "amount": 100.0, "reference": "INV-001"},
    {"id": "b2", "date": "2024-05-03", "amount": 49.995, "reference": None},
    {"id": "b3", "date": "2024-05-10", "amount": 75.0, "reference": "X"},
    {"id": "b4", "date": "2024-05-20", "amount": 12.0, "reference": "INV-9"},
]
LEDGER = [
    {"id": "l1", "date": "2024-05-02", "amount": "100.00", "reference": "inv 001"},
    {"id": "l2", "date": "2024-05-05", "amount": 50.0, "reference": "misc"},
    {"id": "l3", "date": "2024-05-30", "amount": 75.0, "reference": "Y"},  # too late
    {"id": "l4", "date": "2024-05-20", "amount": 13.0, "reference": "INV-9"},  # amount off
]


def test_matches_by_reference_amount_and_date_within_tolerance() -> None:
    out = run("reconcile_ledger", {"period": "2024-05", "transactions": BANK, "ledger": LEDGER})
    assert out.status == "COMPLETED", out.reason
    result = out.output
    assert (result["matched"], result["unmatchedBank"], result["unmatchedLedger"]) == (2, 2, 2)
    assert result["unmatched"] == 4
    assert {(b["side"], b["id"]) for b in result["breaks"]} == {
        ("bank", "b3"),
        ("bank", "b4"),
        ("ledger", "l3"),
        ("ledger", "l4"),
    }
    # wider tolerances match the rest
    loose = run(
        "reconcile_ledger",
        {
            "period": "2024-05",
            "bankFeed": {"transactions": BANK},
            "ledger": LEDGER,
            "tolerance": {"amount": 1.0, "days": 30, "reference": "ignore"},
        },
    )
    assert (loose.output["matched"], loose.output["unmatched"]) == (4, 0)


def test_bad_input_is_terminal() -> None:
    out = run("reconcile_ledger", {"period": "2024-05", "transactions": [{"amount": 1}]})
    assert out.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "transactions.0.date" in out.reason
    assert run("reconcile_ledger", {"period": "2024-05"}).status == "FAILED_WITH_TERMINAL_ERROR"


def test_large_reconciliation_runs_in_chunks_with_callbacks_over_http() -> None:
    bank = [{"date": "2024-05-01", "amount": float(i), "reference": f"R{i}"} for i in range(25)]
    ledger = [{"date": "2024-05-02", "amount": float(i), "reference": f"r{i}"} for i in range(24)]
    with FakeTaskServer() as server:
        settings = WorkerSettings(
            server_url=server.url, worker_id="dp", long_poll_ms=100, poll_interval=0.05
        )
        with Worker(registry, settings=settings, task_types=["reconcile_ledger"]):
            task_id = server.enqueue(
                "reconcile_ledger",
                {
                    "period": "2024-05",
                    "transactions": bank,
                    "ledger": ledger,
                    "chunkSize": 10,
                    "callbackAfterSeconds": 1,
                },
            )
            final = server.wait_result(task_id, status="COMPLETED", timeout=15)
    results = server.results_for(task_id)
    assert [r["status"] for r in results] == ["IN_PROGRESS", "IN_PROGRESS", "COMPLETED"]
    assert [r["outputData"].get("progress") for r in results[:2]] == [
        {"done": 10, "total": 25},
        {"done": 20, "total": 25},
    ]
    assert all(r["callbackAfterSeconds"] == 1 for r in results[:2])
    out = final["outputData"]
    assert (out["matched"], out["unmatchedBank"], out["unmatchedLedger"]) == (24, 1, 0)
    assert server.logs(task_id) == [
        "reconciled 10 of 25",
        "resuming at 10 of 25",
        "reconciled 20 of 25",
        "resuming at 20 of 25",
    ]


def test_bulk_export_uploads_a_csv_that_reconcile_reads_back(tmp_path: Path) -> None:
    rows = [
        {"id": f"l{i}", "date": "2024-05-01", "amount": i, "reference": f"R{i}", "x": "dropped"}
        for i in range(3000)
    ]
    with FakeTaskServer() as server:
        settings = WorkerSettings(
            server_url=server.url, worker_id="dp", long_poll_ms=100, poll_interval=0.05
        )
        with Worker(registry, settings=settings, task_types=["bulk_export"]):
            task_id = server.enqueue("bulk_export", {"period": "2024-05", "rows": rows})
            out = server.wait_result(task_id)["outputData"]
        data = server.upload(out["exportPath"])
    assert out["rows"] == 3000 and out["bytes"] == len(data) > 10_000
    assert out["exportPath"].endswith("export-2024-05.csv")
    parsed = list(csv.DictReader(io.StringIO(data.decode())))
    assert parsed[2999] == {
        "id": "l2999",
        "date": "2024-05-01",
        "amount": "2999",
        "reference": "R2999",
        "description": "",
    }
    # the ledger side of a reconciliation can come from such an export
    (tmp_path / "export.csv").write_bytes(data)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        result = run(
            "reconcile_ledger",
            {
                "period": "2024-05",
                "transactions": [{"date": "2024-05-02", "amount": 7, "reference": "R7"}],
                "exportUrl": f"http://127.0.0.1:{files.server_address[1]}/export.csv",
            },
        )
        assert time.monotonic() - started < 10
    finally:
        files.shutdown()
        files.server_close()
    assert (result.output["matched"], result.output["unmatchedLedger"]) == (1, 2999)


def test_bulk_export_without_rows_or_source_is_terminal(monkeypatch: Any) -> None:
    monkeypatch.delenv("DATA_PLATFORM_URL", raising=False)
    out = run("bulk_export", {"period": "2024-05"})
    assert out.status == "FAILED_WITH_TERMINAL_ERROR"
    assert run("bulk_export", {"period": "May"}).status == "FAILED_WITH_TERMINAL_ERROR"
