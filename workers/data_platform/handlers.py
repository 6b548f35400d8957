"""Data platform worker handlers.

* ``reconcile_ledger``: match a bank feed against the ledger by amount, date and
  reference with tolerance rules and report the breaks. Large inputs are processed
  in chunks: after each chunk the handler returns ``InProgress`` with its cursor and
  state in the output, and resumes from ``TaskContext.previous_output`` when the Task
  API hands the task back.
* ``bulk_export``: write the ledger of a period as CSV, upload it through the
  external storage location, return its path.

Entries are objects ``{id?, date: YYYY-MM-DD, amount, reference?}``. The data comes
inline or from a URL (``exportUrl`` for a CSV made by ``bulk_export``;
``DATA_PLATFORM_URL`` for the platform's JSON API).
"""

from __future__ import annotations

import base64
import bisect
import csv
import datetime as dt
import io
import os
import re
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator
from stepway_worker import InProgress, TaskContext, TerminalError, worker_task


class Entry(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str | None = None
    date: dt.date
    amount: float
    reference: str | None = None

    @field_validator("amount", mode="before")
    @classmethod
    def _amount(cls, value: Any) -> Any:
        return value.replace(",", "") if isinstance(value, str) else value


def _fetch(url: str) -> httpx.Response:
    try:
        response = httpx.get(url, timeout=120, follow_redirects=True)
    except httpx.TransportError as exc:
        raise RuntimeError(f"cannot fetch {url}: {exc}") from exc  # retried by the engine
    if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
        raise TerminalError(f"{url} gave {response.status_code}")
    response.raise_for_status()
    return response


def _entries_from_csv(text: str) -> list[dict[str, Any]]:
    return [dict(row) for row in csv.DictReader(io.StringIO(text))]


def _norm_ref(value: str | None) -> str:
    return re.sub(r"[^0-9a-z]", "", (value or "").casefold())


def _bitmap(bits: bytearray) -> str:
    return base64.b64encode(bytes(bits)).decode()


def _unbitmap(text: str | None, n: int) -> bytearray:
    raw = bytearray(base64.b64decode(text)) if text else bytearray()
    size = (n + 7) // 8
    return raw[:size] + bytearray(size - len(raw[:size]))


def _get(bits: bytearray, i: int) -> bool:
    return bool(bits[i >> 3] & (1 << (i & 7)))


def _set(bits: bytearray, i: int) -> None:
    bits[i >> 3] |= 1 << (i & 7)


class Tolerance(BaseModel):
    amount: float = Field(default=0.01, ge=0)
    days: int = Field(default=3, ge=0)
    reference: Literal["exact", "normalized", "ignore"] = "normalized"


@worker_task("reconcile_ledger")
def reconcile_ledger(
    ctx: TaskContext,
    period: str,
    bank_feed: dict[str, Any] | None = None,
    transactions: list[Entry] | None = None,
    ledger: list[Entry] | None = None,
    export_url: str | None = None,
    tolerance: Tolerance | None = None,
    chunk_size: int = Field(default=5000, ge=1),
    callback_after_seconds: int = Field(default=1, ge=1),
    max_breaks: int = Field(default=1000, ge=0),
) -> Any:
    tol = tolerance or Tolerance()
    left = transactions
    if left is None and bank_feed is not None:
        left = [Entry.model_validate(t) for t in bank_feed.get("transactions") or []]
    if left is None:
        raise TerminalError("give the bank side as transactions or bankFeed.transactions")
    right = ledger
    if right is None and export_url:
        right = [Entry.model_validate(r) for r in _entries_from_csv(_fetch(export_url).text)]
    if right is None:
        raise TerminalError("give the ledger side as ledger or exportUrl")

    state = ctx.previous_output.get("state") or {}
    cursor = int(state.get("cursor", 0))
    matched = int(state.get("matched", 0))
    used = _unbitmap(state.get("usedLedger"), len(right))
    left_breaks = _unbitmap(state.get("unmatchedBank"), len(left))
    if cursor:
        ctx.log(f"resuming at {cursor} of {len(left)}")

    order = sorted(range(len(right)), key=lambda j: right[j].amount)
    amounts = [right[j].amount for j in order]
    by_ref: dict[str, list[int]] = {}
    if tol.reference != "ignore":
        for j, entry in enumerate(right):
            key = entry.reference or ""
            key = _norm_ref(key) if tol.reference == "normalized" else key
            if key:
                by_ref.setdefault(key, []).append(j)

    def fits(a: Entry, b: Entry) -> bool:
        return (
            abs(a.amount - b.amount) <= tol.amount + 1e-9
            and abs((a.date - b.date).days) <= tol.days
        )

    def find(a: Entry) -> int | None:
        if tol.reference != "ignore" and a.reference:
            key = _norm_ref(a.reference) if tol.reference == "normalized" else a.reference
            for j in by_ref.get(key, []):
                if not _get(used, j) and fits(a, right[j]):
                    return j
        lo = bisect.bisect_left(amounts, a.amount - tol.amount - 1e-9)
        hi = bisect.bisect_right(amounts, a.amount + tol.amount + 1e-9)
        best: int | None = None
        for k in range(lo, hi):
            j = order[k]
            if _get(used, j) or not fits(a, right[j]):
                continue
            # two different references never match on amount alone
            refs_differ = tol.reference != "ignore" and bool(a.reference and right[j].reference)
            gap = abs((right[j].date - a.date).days)
            if not refs_differ and (best is None or gap < abs((right[best].date - a.date).days)):
                best = j
        return best

    end = min(len(left), cursor + chunk_size)
    for i in range(cursor, end):
        j = find(left[i])
        if j is None:
            _set(left_breaks, i)
        else:
            _set(used, j)
            matched += 1
    cursor = end
    if cursor < len(left):
        ctx.log(f"reconciled {cursor} of {len(left)}")
        return InProgress(
            callback_after_seconds=callback_after_seconds,
            output={
                "period": period,
                "progress": {"done": cursor, "total": len(left)},
                "state": {
                    "cursor": cursor,
                    "matched": matched,
                    "usedLedger": _bitmap(used),
                    "unmatchedBank": _bitmap(left_breaks),
                },
            },
        )
    breaks: list[dict[str, Any]] = []
    unmatched_bank = [i for i in range(len(left)) if _get(left_breaks, i)]
    unmatched_ledger = [j for j in range(len(right)) if not _get(used, j)]
    for side, items, idx in (
        ("bank", left, unmatched_bank),
        ("ledger", right, unmatched_ledger),
    ):
        for i in idx:
            if len(breaks) >= max_breaks:
                break
            breaks.append({"side": side, "index": i, **items[i].model_dump(mode="json")})
    return {
        "period": period,
        "matched": matched,
        "unmatched": len(unmatched_bank) + len(unmatched_ledger),
        "unmatchedBank": len(unmatched_bank),
        "unmatchedLedger": len(unmatched_ledger),
        "breaks": breaks,
        "breaksTruncated": len(unmatched_bank) + len(unmatched_ledger) > len(breaks),
    }


DEFAULT_COLUMNS = ["id", "date", "amount", "reference", "description"]


@worker_task("bulk_export")
def bulk_export(
    ctx: TaskContext,
    period: str = Field(pattern=r"^\d{4}-\d{2}$"),
    rows: list[dict[str, Any]] | None = None,
    columns: list[str] | None = None,
) -> dict[str, Any]:
    if rows is None:
        base = os.environ.get("DATA_PLATFORM_URL", "").rstrip("/")
        if not base:
            raise TerminalError("no rows given and DATA_PLATFORM_URL is not set")
        body = _fetch(f"{base}/ledger?period={period}").json()
        rows = body if isinstance(body, list) else body.get("rows", [])
    header = columns or DEFAULT_COLUMNS
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    data = buf.getvalue().encode("utf-8")
    path, uri = ctx.upload(data, f"export-{period}.csv", "text/csv")
    ctx.log(f"exported {len(rows)} rows, {len(data)} bytes to {path}")
    return {
        "exportPath": path,
        "exportUrl": uri.split("?", 1)[0],
        "rows": len(rows),
        "bytes": len(data),
    }
