"""Opaque next-page tokens for SearchFlows.

A token is URL-safe base64 of a small JSON object: a version, a digest of the query it belongs
to, and the sort-key values of the last run returned (keyset paging: the next page starts
strictly after that position, so runs started meanwhile cannot shift a page and paging returns
every match once). A token used with another query, or that does not decode to exactly the
values the query's order needs, is rejected with InvalidPageTokenError.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BindParameter, and_, bindparam, literal, or_, tuple_

from engine._storage.search.compiler import OrderKey
from engine._tokens import seal, unseal
from engine.errors import InvalidPageTokenError

MAX_TOKEN_LENGTH = 2048
_VERSION = 1
_INT64 = (-(2**63), 2**63 - 1)


def query_digest(text: str, scope: str | None = None) -> str:
    """Return a short digest identifying a query (and its Flow type scope, if any)."""
    raw = json.dumps([text, scope], separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(raw).hexdigest()[:24]


def encode_token(digest: str, position: Sequence[Any]) -> str:
    """Return the token for the page after the run whose sort-key values are ``position``."""
    raw = json.dumps({"v": _VERSION, "q": digest, "p": list(position)}, separators=(",", ":"))
    return seal(raw.encode())


def decode_token(token: str, digest: str, order: Sequence[OrderKey]) -> list[Any] | None:
    """Return the position a token encodes (None for an empty token), or raise."""
    if not token:
        return None
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
        raise _invalid("pageToken is malformed")
    try:
        data = json.loads(unseal(token))
    except (ValueError, UnicodeError, RecursionError):
        raise _invalid("pageToken is malformed") from None
    if not isinstance(data, dict) or data.get("v") != _VERSION:
        raise _invalid("pageToken is malformed")
    if data.get("q") != digest:
        raise _invalid("pageToken belongs to another query; keep the query unchanged across pages")
    position = data.get("p")
    if not isinstance(position, list) or len(position) != len(order):
        raise _invalid("pageToken is malformed")
    for value, key in zip(position, order, strict=True):
        if key.kind is int:
            ok = (
                isinstance(value, int)
                and not isinstance(value, bool)
                and (_INT64[0] <= value <= _INT64[1])
            )
        else:
            ok = isinstance(value, str) and len(value) <= 1024
        if not ok:
            raise _invalid("pageToken is malformed")
    return position


def after_parameters(order: Sequence[OrderKey]) -> Any:
    """:func:`after` with the position as bound parameters ``p0``, ``p1``, ... (each typed
    like its key), for a statement built once and run for any page."""
    params = [bindparam(f"p{i}", type_=key.expression.type) for i, key in enumerate(order)]
    return after(order, params)


def after(order: Sequence[OrderKey], position: Sequence[Any]) -> Any:
    """The condition "sorts strictly after ``position``" for a multi-column keyset."""
    if len({key.descending for key in order}) == 1:
        # One direction: a row-value comparison, which an index on the columns can serve.
        columns = tuple_(*[key.expression for key in order])
        # Each value is bound with its key's type: an untyped int would be a 32-bit INTEGER on
        # PostgreSQL, too small for microseconds.
        values = tuple_(
            *[
                v if isinstance(v, BindParameter) else literal(v, key.expression.type)
                for v, key in zip(position, order, strict=True)
            ]
        )
        return columns < values if order[0].descending else columns > values
    alternatives = []
    for i, key in enumerate(order):
        equal = [order[j].expression == position[j] for j in range(i)]
        beyond = key.expression < position[i] if key.descending else key.expression > position[i]
        alternatives.append(and_(*equal, beyond))
    return or_(*alternatives)


def _invalid(detail: str) -> InvalidPageTokenError:
    return InvalidPageTokenError(detail, field="pageToken")
