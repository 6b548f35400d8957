"""How the CLI shows things to a person: local times (relative when recent), durations,
tables, and ``--output json`` for scripts."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer

OutputFormat = Annotated[
    str,
    typer.Option(
        "--output",
        "-o",
        help="text (for people) or json (the API's JSON, for scripts).",
        case_sensitive=False,
    ),
]


def wants_json(output: str) -> bool:
    value = output.lower()
    if value not in ("text", "json"):
        typer.echo(f"--output must be text or json, not {output!r}", err=True)
        raise typer.Exit(code=2)
    return value == "json"


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def human_time(ms: int | None, now_ms: int) -> str:
    """Epoch milliseconds as this machine's local time; relative when recent:
    ``12 s ago``, ``5 min ago``, ``14:03:12 (3 h ago)``, else ``2026-01-31 14:03``."""
    if not ms:
        return "-"
    delta = (now_ms - ms) // 1000
    stamp = datetime.fromtimestamp(ms / 1000).astimezone()
    if 0 <= delta < 60:
        return f"{delta} s ago"
    if 0 <= delta < 3600:
        return f"{delta // 60} min ago"
    if 0 <= delta < 86_400:
        return f"{stamp:%H:%M:%S} ({delta // 3600} h ago)"
    return f"{stamp:%Y-%m-%d %H:%M}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns as wide as their widest cell (the last one is not padded)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def short(text: str | None, limit: int = 60) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
