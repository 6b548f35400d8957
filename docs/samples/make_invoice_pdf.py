"""Write ``invoice.pdf`` next to this file: a one-page invoice with a text layer.

The PDF is written by hand (no PDF library needed) so that it stays small and its
text is exactly what ``parse_pdf`` extracts. Run it again after editing ``LINES``::

    uv run python docs/samples/make_invoice_pdf.py
"""

from __future__ import annotations

import io
from pathlib import Path

LINES = [
    "INVOICE",
    "Invoice number: INV-2024-0042",
    "Date: 2024-05-02    Due date: 2024-06-01",
    "From: Contoso Office Supplies Pty Ltd, 12 Market Street, Sydney",
    "Bill to: Fabrikam Finance, Accounts Payable, 1 George Street, Sydney",
    "",
    "Description                         Qty    Unit price    Total",
    "A4 copy paper, box of 5 reams         2         45.00    90.00",
    "Toner cartridge, black                1         19.55    19.55",
    "",
    "Subtotal: 109.55",
    "VAT (10%): 10.95",
    "Amount due: 120.50 AUD",
    "Please pay by the due date quoting the invoice number.",
]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def invoice_pdf(lines: list[str]) -> bytes:
    ops = ["BT", "/F1 11 Tf", "14 TL", "56 760 Td"]
    for line in lines:
        ops.append(f"({_escape(line)}) Tj T*")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


if __name__ == "__main__":
    target = Path(__file__).with_name("invoice.pdf")
    target.write_bytes(invoice_pdf(LINES))
    print(f"wrote {target}")
