"""Document worker handlers: extraction rules specific to the organisation, no API.

* ``parse_pdf``: text and page count of a PDF (``pypdf``).
* ``extract_excel``: rows of an XLSX by the rule sets in ``rules/excel.yaml``
  (``openpyxl``).
* ``classify_document``: rule-based class from extracted text, rules in
  ``rules/classes.yaml``.

A document is given as ``url`` (http(s), ``file://``, a ``data:`` URL or a local path)
or as ``content`` (base64). ``DOCUMENT_RULES_DIR`` overrides the rules folder.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import io
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import yaml
from stepway_worker import TaskContext, TerminalError, worker_task

RULES_DIR = Path(__file__).parent / "rules"
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024


def rules_dir() -> Path:
    return Path(os.environ.get("DOCUMENT_RULES_DIR") or RULES_DIR)


@lru_cache(maxsize=8)
def _load_yaml(path: str, mtime: float) -> dict[str, Any]:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise TerminalError(f"{path}: expected a mapping")
    return data


def load_rules(name: str) -> dict[str, Any]:
    path = rules_dir() / name
    if not path.is_file():
        raise TerminalError(f"rules file {path} not found")
    return _load_yaml(str(path), path.stat().st_mtime)


def load_document(url: str | None, content: str | None) -> bytes:
    """The bytes of a document given as a URL, a local path or base64 content."""
    if content:
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise TerminalError("content is not valid base64") from None
    if not url:
        raise TerminalError("give the document as url or content (base64)")
    parts = urlsplit(url)
    if parts.scheme == "data":
        header, _, payload = url.partition(",")
        try:
            if header.endswith(";base64"):
                return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise TerminalError("the data: URL is not valid base64") from None
        return unquote(payload).encode()
    if parts.scheme in ("http", "https"):
        try:
            response = httpx.get(url, timeout=60, follow_redirects=True)
        except httpx.TransportError as exc:
            raise RuntimeError(f"cannot fetch {parts.netloc}: {exc}") from exc  # retried
        if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
            raise TerminalError(f"fetching the document gave {response.status_code}")
        response.raise_for_status()
        if len(response.content) > MAX_DOCUMENT_BYTES:
            raise TerminalError("the document is larger than 50 MB")
        return response.content
    path = Path(unquote(parts.path) if parts.scheme == "file" else url)
    if not path.is_file():
        raise TerminalError(f"no file at {path}")
    return path.read_bytes()


# --- parse_pdf -----------------------------------------------------------------------


@worker_task("parse_pdf")
def parse_pdf(
    ctx: TaskContext, url: str | None = None, content: str | None = None
) -> dict[str, Any]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    data = load_document(url, content)
    try:
        reader = PdfReader(io.BytesIO(data))
        texts = [(page.extract_text() or "").strip() for page in reader.pages]
    except (PdfReadError, ValueError, KeyError) as exc:
        raise TerminalError(f"not a readable PDF: {exc}") from None
    ctx.log(f"parsed {len(texts)} pages, {sum(map(len, texts))} characters")
    return {"text": "\n\n".join(texts).strip(), "pages": len(texts), "pageTexts": texts}


# --- extract_excel -------------------------------------------------------------------


def _norm(header: Any) -> str:
    return re.sub(r"\s+", " ", str(header or "")).strip().casefold()


def _convert(value: Any, kind: str | None, field: str, row: int) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if kind == "date":
        if isinstance(value, dt.datetime):
            return value.date().isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
        try:
            return dt.date.fromisoformat(str(value).strip()).isoformat()
        except ValueError:
            raise ValueError(f"row {row}: {field} {value!r} is not a date") from None
    if kind in ("number", "integer"):
        try:
            number = float(str(value).replace(",", "")) if isinstance(value, str) else value
            return int(number) if kind == "integer" else float(number)
        except (TypeError, ValueError):
            raise ValueError(f"row {row}: {field} {value!r} is not a number") from None
    if kind == "string":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value).strip()
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value


@worker_task("extract_excel")
def extract_excel(
    ctx: TaskContext,
    url: str | None = None,
    content: str | None = None,
    sheet: str | None = None,
    rules: str | None = None,
) -> dict[str, Any]:
    from openpyxl import load_workbook

    config = load_rules("excel.yaml")
    name = rules or config.get("default")
    ruleset = (config.get("rulesets") or {}).get(name)
    if not isinstance(ruleset, dict):
        raise TerminalError(f"no extraction rule set {name!r} in excel.yaml")
    data = load_document(url, content)
    try:
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:
        raise TerminalError(f"not a readable XLSX workbook: {exc}") from None
    try:
        sheet_name = sheet or ruleset.get("sheet") or workbook.sheetnames[0]
        if sheet_name not in workbook.sheetnames:
            raise TerminalError(
                f"sheet {sheet_name!r} not found (sheets: {', '.join(workbook.sheetnames)})"
            )
        ws = workbook[sheet_name]
        header_row = int(ruleset.get("headerRow") or 1)
        columns = {_norm(k): v for k, v in (ruleset.get("columns") or {}).items()}
        types = ruleset.get("types") or {}
        required = list(ruleset.get("required") or [])
        rows_iter = ws.iter_rows(min_row=header_row, values_only=True)
        header = next(rows_iter, None) or ()
        index = {columns[_norm(h)]: i for i, h in enumerate(header) if _norm(h) in columns}
        missing = [f for f in required if f not in index]
        if missing:
            raise TerminalError(
                f"sheet {sheet_name!r} row {header_row} lacks the columns of {missing} "
                f"(rule set {name!r})"
            )
        rows: list[dict[str, Any]] = []
        skipped = 0
        for offset, values in enumerate(rows_iter, start=header_row + 1):
            if all(v is None or str(v).strip() == "" for v in values):
                if ruleset.get("stopAtBlankRow", True):
                    break
                continue
            try:
                record = {
                    field: _convert(
                        values[i] if i < len(values) else None, types.get(field), field, offset
                    )
                    for field, i in index.items()
                }
            except ValueError as exc:
                ctx.log(f"skipped: {exc}")
                skipped += 1
                continue
            if any(record.get(f) is None for f in required):
                skipped += 1
                continue
            rows.append(record)
    finally:
        workbook.close()
    ctx.log(f"{sheet_name}: {len(rows)} rows, {skipped} skipped (rule set {name})")
    return {"tables": [{"sheet": sheet_name, "ruleset": name, "rows": rows, "skipped": skipped}]}


# --- classify_document ---------------------------------------------------------------


def _count(text: str, keyword: str) -> int:
    return len(re.findall(r"(?<!\w)" + re.escape(keyword.casefold()) + r"(?!\w)", text))


@worker_task("classify_document")
def classify_document(text: str) -> dict[str, Any]:
    config = load_rules("classes.yaml")
    threshold = float(config.get("threshold", 1))
    cap = int(config.get("maxHitsPerKeyword", 3))
    folded = text.casefold()
    scores: dict[str, float] = {}
    matched: dict[str, list[str]] = {}
    for name, spec in (config.get("classes") or {}).items():
        score = 0.0
        for keyword, weight in ((spec or {}).get("keywords") or {}).items():
            hits = min(_count(folded, str(keyword)), cap)
            if hits:
                score += hits * float(weight)
                matched.setdefault(name, []).append(str(keyword))
        scores[name] = score
    best = max(scores, key=lambda k: scores[k], default=None)  # first listed wins a tie
    total = sum(scores.values())
    if best is None or scores[best] < threshold:
        return {"documentClass": "other", "confidence": 0.0, "scores": scores}
    return {
        "documentClass": best,
        "confidence": round(scores[best] / total, 3) if total else 0.0,
        "scores": scores,
        "matched": matched[best],
    }
