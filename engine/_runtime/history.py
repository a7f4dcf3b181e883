"""getFlowHistory: a run's events, oldest first, numbered 1, 2, ... within the run."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from engine._ids import to_datetime
from engine._limits import check_page_size
from engine._runtime.ports import Database
from engine._storage import reads
from engine._tokens import seal, unseal
from engine.errors import FlowNotFoundError, InvalidPageTokenError
from engine.results import HistoryEvent, HistoryPage


async def history_page(
    database: Database, flow_id: str, run_id: str | None, page_size: int, page_token: str
) -> HistoryPage:
    """Return a page of the run's history, oldest first; the token is bound to the run."""
    check_page_size(page_size)
    run = await reads.load_run(database, flow_id, run_id)
    if run is None:
        raise FlowNotFoundError(
            f"Flow {flow_id} was not found", flow_id=flow_id, operation="getFlowHistory"
        )
    after, seen = decode_token(page_token, run.run_id)
    rows = await reads.history(database, run.run_id, after, page_size + 1)
    more = len(rows) > page_size
    rows = rows[:page_size]
    # Events are numbered 1, 2, ... within their run, as Temporal and Dex users expect.
    events = [
        HistoryEvent(seen + n, kind, to_datetime(at) or datetime.now(UTC), json.loads(details))
        for n, (_row_id, kind, at, details) in enumerate(rows, start=1)
    ]
    token = encode_token(run.run_id, rows[-1][0], seen + len(rows)) if more else ""
    return HistoryPage(flow_id, run.run_id, events, token)


def encode_token(run_id: str, last_id: int, seen: int) -> str:
    """Return an opaque token for the history page after ``last_id``."""
    raw = json.dumps({"r": run_id, "a": last_id, "n": seen}, separators=(",", ":")).encode()
    return seal(raw)


def decode_token(token: str, run_id: str) -> tuple[int, int]:
    """Return (last event row, events seen) from a history token of ``run_id``."""
    if not token:
        return 0, 0
    try:
        data = json.loads(unseal(token))
        after, seen = data["a"], data["n"]
        if data["r"] != run_id or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (after, seen)
        ):
            raise ValueError
        return after, seen
    except (ValueError, KeyError, TypeError, RecursionError):
        raise InvalidPageTokenError(
            "pageToken is malformed or belongs to another run", field="pageToken"
        ) from None
