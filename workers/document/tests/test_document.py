"""Document worker handlers on real files generated here, and over real HTTP."""

from __future__ import annotations

import base64
import datetime as dt
import functools
import http.server
import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openpyxl import Workbook
from pypdf import PdfWriter
from stepway_worker import Worker, WorkerSettings, registry
from stepway_worker.context import TaskContext
from stepway_worker.testing import FakeTaskServer

import workers.document  # noqa: F401  (registers the handlers)


def text_pdf(*pages: str) -> bytes:
    """A minimal PDF with one text line per page, written by hand."""
    objects: list[bytes] = []
    n = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    font = 3 + 2 * n
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {4 + 2 * i} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def blank_pdf(pages: int) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def ledger_xlsx() -> bytes:
    wb = Workbook()
    ws = wb.active
    ws.title = "Summary"
    ws["A1"] = "not this sheet"
    ledger = wb.create_sheet("Ledger")
    ledger.append([" date ", "AMOUNT", "Reference", "Description", "Ignored"])
    ledger.append([dt.date(2024, 5, 1), 120.5, "INV-1", "Rent", "x"])
    ledger.append(["2024-05-02", "1,000", "INV-2", None, "x"])
    ledger.append([None, 5, "NO-DATE", "skipped: date required", None])
    ledger.append(["yesterday", 5, "BAD", "skipped: not a date", None])
    ledger.append([None, None, None, None, None])
    ledger.append([dt.date(2024, 5, 9), 1, "AFTER-BLANK", "not read", None])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def run(task_type: str, data: dict[str, Any]) -> Any:
    handler = registry.get(task_type)
    assert handler is not None
    return handler.execute(TaskContext(task_id="t", task_type=task_type, input=data))


@pytest.fixture
def files(tmp_path: Path) -> Iterator[str]:
    """An http.server serving tmp_path; yields its base URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_parse_pdf_from_a_path_base64_and_a_url(tmp_path: Path, files: str) -> None:
    pdf = text_pdf("Invoice number 42", "Amount due 100 EUR")
    (tmp_path / "doc.pdf").write_bytes(pdf)
    by_path = run("parse_pdf", {"url": str(tmp_path / "doc.pdf")})
    assert by_path.status == "COMPLETED", by_path.reason
    assert by_path.output["pages"] == 2
    assert "Invoice number 42" in by_path.output["text"]
    assert by_path.output["pageTexts"][1] == "Amount due 100 EUR"
    by_content = run("parse_pdf", {"content": base64.b64encode(pdf).decode()})
    assert by_content.output["text"] == by_path.output["text"]
    by_url = run("parse_pdf", {"url": f"{files}/doc.pdf"})
    assert by_url.output["pages"] == 2
    (tmp_path / "b.pdf").write_bytes(blank_pdf(3))
    blank = run("parse_pdf", {"url": f"file://{tmp_path}/b.pdf"})
    assert blank.output == {"text": "", "pages": 3, "pageTexts": ["", "", ""]}


def test_parse_pdf_bad_inputs_are_terminal(tmp_path: Path, files: str) -> None:
    (tmp_path / "junk.pdf").write_bytes(b"not a pdf at all")
    assert run("parse_pdf", {"url": str(tmp_path / "junk.pdf")}).status == (
        "FAILED_WITH_TERMINAL_ERROR"
    )
    missing = run("parse_pdf", {"url": f"{files}/missing.pdf"})
    assert missing.status == "FAILED_WITH_TERMINAL_ERROR" and "404" in missing.reason
    assert run("parse_pdf", {}).status == "FAILED_WITH_TERMINAL_ERROR"


def test_extract_excel_by_the_ledger_rules(tmp_path: Path) -> None:
    (tmp_path / "l.xlsx").write_bytes(ledger_xlsx())
    out = run("extract_excel", {"url": str(tmp_path / "l.xlsx")})
    assert out.status == "COMPLETED", out.reason
    (table,) = out.output["tables"]
    assert (table["sheet"], table["ruleset"], table["skipped"]) == ("Ledger", "ledger", 2)
    assert table["rows"] == [
        {"date": "2024-05-01", "amount": 120.5, "reference": "INV-1", "description": "Rent"},
        {"date": "2024-05-02", "amount": 1000.0, "reference": "INV-2", "description": None},
    ]


def test_extract_excel_missing_columns_or_sheet_is_terminal(tmp_path: Path) -> None:
    (tmp_path / "l.xlsx").write_bytes(ledger_xlsx())
    wrong_sheet = run("extract_excel", {"url": str(tmp_path / "l.xlsx"), "sheet": "Nope"})
    assert wrong_sheet.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "Nope" in wrong_sheet.reason
    other_rules = run("extract_excel", {"url": str(tmp_path / "l.xlsx"), "rules": "clients"})
    assert other_rules.status == "FAILED_WITH_TERMINAL_ERROR"
    assert "clientId" in other_rules.reason
    assert run("extract_excel", {"url": "x", "rules": "nope"}).status == (
        "FAILED_WITH_TERMINAL_ERROR"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INVOICE\nInvoice number: 7\nAmount due: 100\nVAT 20%", "invoice"),
        ("Credit note for invoice 7. Amount credited: 10", "credit_note"),
        ("Account statement. Opening balance 10, closing balance 20", "statement"),
        ("Dear customer, thank you for your letter", "other"),
    ],
)
def test_classify_document(text: str, expected: str) -> None:
    out = run("classify_document", {"text": text})
    assert out.output["documentClass"] == expected
    assert 0 <= out.output["confidence"] <= 1


def test_document_worker_over_http(tmp_path: Path) -> None:
    (tmp_path / "doc.pdf").write_bytes(text_pdf("Statement period May. Opening balance 5"))
    with FakeTaskServer() as server:
        settings = WorkerSettings(
            server_url=server.url, worker_id="doc", long_poll_ms=100, poll_interval=0.05
        )
        with Worker(registry, settings=settings, task_types=["parse_pdf", "classify_document"]):
            parsed = server.enqueue("parse_pdf", {"url": str(tmp_path / "doc.pdf")})
            result = server.wait_result(parsed)
            assert result["status"] == "COMPLETED"
            classified = server.enqueue("classify_document", result["outputData"])
            out = server.wait_result(classified)["outputData"]
        assert out["documentClass"] == "statement"
        assert server.logs(parsed) == ["parsed 1 pages, 39 characters"]
