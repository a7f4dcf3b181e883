"""The page tokens of every listing, as the engine makes and reads them, for property tests.

Each entry of :data:`LISTINGS` is a strategy of positions, the token of a position, and the
position a token decodes to (or InvalidPageTokenError), bound to one query, run, queue or
Stream.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from engine import InvalidPageTokenError, Registry
from engine._runtime import channels, history
from engine._storage.search import paging
from engine._storage.search.compiler import compile_query
from engine._storage.search.parser import parse
from engine._streams import tokens as stream_tokens
from tests.engine.test_search_property import PropA, PropB

ORDER = compile_query(parse(""), Registry([PropA(), PropB()]).index_key_types()).order
TOKEN_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
RUN_ID = "01a23222-59df-7df6-a213-e67163183dfd"
DIGEST = paging.query_digest("FlowType = 'Paged'")
BINDING = stream_tokens.binding("Paged", "paged-0", "log")

Listing = tuple[st.SearchStrategy[Any], Callable[[Any], str], Callable[[str], Any]]
LISTINGS: dict[str, Listing] = {
    "search": (
        st.tuples(st.integers(10**15, 2 * 10**15), st.uuids().map(str)).map(list),
        lambda p: paging.encode_token(DIGEST, p),
        lambda token: paging.decode_token(token, DIGEST, ORDER),
    ),
    "history": (
        st.tuples(st.integers(1, 10**6), st.integers(1, 1000)),
        lambda p: history.encode_token(RUN_ID, *p),
        lambda token: history.decode_token(token, RUN_ID),
    ),
    "channel": (
        st.integers(1, 10**6),
        lambda p: channels._encode_token(RUN_ID, "inbox", p),
        lambda token: channels._decode_token(token, RUN_ID, "inbox"),
    ),
    "stream": (
        st.tuples(st.uuids().map(lambda u: u.hex[:12]), st.integers(1, 10**6)),
        lambda p: stream_tokens.encode_token(stream_tokens.PAGE, p[0], p[1], BINDING),
        lambda token: stream_tokens.decode_token(
            token, stream_tokens.PAGE, BINDING, InvalidPageTokenError, "beforePageToken"
        ),
    ),
}


def unpadded(raw: bytes) -> str:
    """Return URL-safe base64 without padding, as the tokens are written."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def refused_or_same(decode_token: Callable[[str], Any], token: str, edited: str) -> bool:
    """Return True when ``edited`` is refused with InvalidPageTokenError or decodes to what
    ``token`` decodes to; any other exception propagates."""
    try:
        found = decode_token(edited)
    except InvalidPageTokenError:
        return True
    return bool(found == decode_token(token))
