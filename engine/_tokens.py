"""Opaque tokens with an integrity check: a page or resume token a client edited is refused.

A token is URL-safe base64 (no padding) of its payload followed by an 8-byte BLAKE2b digest
of it. The digest is not a secret: a token only ever names a position within a listing the
caller may read anyway, so the check is there so that a mistyped or tampered token is an
error, not a silently different page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

_DIGEST_BYTES = 8
_PERSON = b"dexlite-token"
#: Longer tokens are refused before any decoding.
MAX_TOKEN_LENGTH = 2048


def _digest(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=_DIGEST_BYTES, person=_PERSON).digest()


def seal(payload: bytes) -> str:
    """Return the token of ``payload``."""
    return base64.urlsafe_b64encode(payload + _digest(payload)).decode("ascii").rstrip("=")


def unseal(token: str) -> bytes:
    """Return the payload of a token made by :func:`seal`; raise ValueError for anything else
    (malformed, too long, or edited)."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
        raise ValueError("token is malformed")
    try:
        raw = base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode("ascii"))
    except (binascii.Error, UnicodeError):
        raise ValueError("token is malformed") from None
    payload = raw[:-_DIGEST_BYTES]
    # Resealing checks the digest and the spelling at once: another base64 spelling of the
    # same bytes is an edit too. (No secret is involved, so a plain comparison will do.)
    if len(raw) <= _DIGEST_BYTES or seal(payload) != token:
        raise ValueError("token is malformed")
    return payload
