"""How the client commands print: aligned tables for people, the raw JSON for programs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

#: What a cell shows for a null or a missing value.
NONE = "-"
GAP = "  "


def compact(value: Any) -> str:
    """Return ``value`` as one line of JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def text(value: Any) -> str:
    """Return ``value`` for a cell: a string as it is, null as ``-``, anything else as JSON."""
    if value is None:
        return NONE
    if isinstance(value, str):
        return value
    return compact(value)


def when(value: datetime | str | None) -> str:
    """Return a time (or an API timestamp) in UTC to the millisecond
    (``2026-01-31T09:30:00.123Z``)."""
    if not value:
        return NONE
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Return ``rows`` under ``headers`` in left-aligned columns, one line each."""
    lines = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        GAP.join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def pairs(rows: Iterable[tuple[str, str]]) -> str:
    """Return ``label  value`` rows with the values aligned (a record, such as describe's)."""
    listed = list(rows)
    width = max((len(label) for label, _ in listed), default=0)
    return "\n".join(f"{label.ljust(width)}{GAP}{value}".rstrip() for label, value in listed)


def emit(block: str) -> None:
    """Print a block of human output to stdout."""
    print(block, flush=True)


def emit_json(body: Any) -> None:
    """Print a response body as indented JSON to stdout."""
    print(json.dumps(body, indent=2, ensure_ascii=False), flush=True)


def emit_json_line(body: Any) -> None:
    """Print one JSON value on one line to stdout (a followed Stream is JSON Lines)."""
    print(compact(body), flush=True)


def note(message: str) -> None:
    """Print a remark for the person at the terminal to stderr (kept out of piped output)."""
    print(message, file=sys.stderr, flush=True)


def error(code: str, detail: str) -> None:
    """Print ``error: CODE: detail`` to stderr."""
    print(f"error: {code}: {detail}", file=sys.stderr, flush=True)
