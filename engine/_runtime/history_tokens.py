"""Page tokens of getFlowHistory: opaque, bound to one run."""

from __future__ import annotations

import base64
import json

from engine.errors import InvalidPageTokenError


def encode_history_token(run_id: str, last_id: int, seen: int) -> str:
    """Return an opaque token for the history page after ``last_id``."""
    raw = json.dumps({"r": run_id, "a": last_id, "n": seen}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_history_token(token: str, run_id: str) -> tuple[int, int]:
    """Return (last event row, events seen) from a history token of ``run_id``."""
    if not token:
        return 0, 0
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        after, seen = data["a"], data["n"]
        if data["r"] != run_id or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (after, seen)
        ):
            raise ValueError
        return after, seen
    except (ValueError, KeyError, TypeError):
        raise InvalidPageTokenError(
            "pageToken is malformed or belongs to another run", field="pageToken"
        ) from None
