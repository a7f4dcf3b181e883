"""Resume and page tokens of Streams: opaque, bound to one (Flow type, Flow ID, Stream).

Tokens carry the store's epoch: after a restart the old contents are gone, so an old resume
token starts at the retained head and an old page token yields an empty page.
"""

from __future__ import annotations

import hashlib

from engine._tokens import seal, unseal
from engine.errors import InvalidArgumentError

RESUME, PAGE = "r", "p"


def binding(flow_type: str, flow_id: str, name: str) -> str:
    """Return the short digest that binds a token to one Stream of one Flow ID."""
    digest = hashlib.sha256(f"{flow_type}\0{flow_id}\0{name}".encode()).hexdigest()
    return digest[:16]


def encode_token(kind: str, epoch: str, seq: int, binding: str) -> str:
    """Return an opaque token of ``kind`` for sequence ``seq``."""
    raw = f"{kind}.{epoch}.{seq}.{binding}".encode()
    return seal(raw)


def decode_token(
    token: str, kind: str, binding: str, error: type[InvalidArgumentError], field: str
) -> tuple[str, int]:
    """Return (epoch, sequence) of a token issued for this Flow type, Flow ID and Stream."""
    try:
        raw = unseal(token).decode()
        found_kind, epoch, seq_text, found_binding = raw.split(".")
        seq = int(seq_text)
        if found_kind != kind or seq < 0 or not seq_text.isdigit():
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        raise error(f"{field} is malformed", field=field) from None
    if found_binding != binding:
        raise error(f"{field} was issued for another Flow type, Flow ID or Stream", field=field)
    return epoch, seq
