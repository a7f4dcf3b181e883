"""Properties of SearchFlows query text and of page tokens, without a database.

No text crashes or stalls the parser: it either parses or raises InvalidQueryError with a
position inside the query, within a deadline per example (hypothesis fails an example that
takes longer). Valid queries from the model of ``tests/support/search_model`` compile against
the registry of ``tests/engine/test_search_property`` for both SQL dialects. Page tokens of
every listing decode to the position they were made from, refuse tokens of another query or
listing, and refuse garbage with InvalidPageTokenError only. The tokens of real pages are
tampered with in ``tests/engine/test_page_token_properties``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from engine import InvalidArgumentError, InvalidPageTokenError, InvalidQueryError, Registry
from engine._runtime import channels, history
from engine._storage import tables as t
from engine._storage.search import paging
from engine._storage.search.compiler import compile_query
from engine._storage.search.parser import MAX_DEPTH, MAX_QUERY_LENGTH, Query, parse
from engine._storage.search.queries import prepare
from engine._streams import tokens as stream_tokens
from tests.engine.test_search_property import PropA, PropB
from tests.support.page_tokens import LISTINGS, TOKEN_ALPHABET, refused_or_same
from tests.support.search_model import queries, worlds

KEY_TYPES = Registry([PropA(), PropB()]).index_key_types()
# A generous bound for one parse on a shared, loaded machine; a parse takes milliseconds.
PARSE_DEADLINE = timedelta(milliseconds=500)

# -- any text parses or fails cleanly -------------------------------------------------------------

KEYWORDS = [
    "AND",
    "or",
    "Not",
    "IN",
    "not in",
    "BETWEEN",
    "STARTS_WITH",
    "IS",
    "NULL",
    "IS NOT NULL",
    "ORDER BY",
    "order",
    "BY",
    "ASC",
    "desc",
    "TRUE",
    "false",
]
FIELDS = [
    "keyword1",
    "int1",
    "double1",
    "text1",
    "FlowType",
    "StartTime",
    "RunId",
    "`primitive-attribute-status`",
    "`unterminated",
    "``",
    "notes",
    "order1",
    "_x",
    "é",
    "1abc",
]
OPERATORS = ["=", "!=", "<>", "<", "<=", ">", ">=", "==", "=<", "!", "<=>"]
LITERALS = [
    "'a'",
    "'it''s'",
    "'it\\'s'",
    '"dq"',
    '"a""b"',
    "'\\n\\t\\r\\\\'",
    "'\\q'",
    "'unterminated",
    '"unterminated',
    "'",
    "''",
    "1",
    "-1",
    "+7",
    "1.5",
    ".5",
    "5.",
    "-1.5e3",
    "1e999",
    "-1e999",
    "1e",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999999",
    "0x10",
    "1_000",
    "'2025-01-01T00:00:00Z'",
]
PUNCTUATION = ["(", ")", ",", "(", ")", " ", "\t", "\n", "\r", ";", "*", "`", "\\", "\x00", "\x7f"]
TOKENS = st.sampled_from(KEYWORDS + FIELDS + OPERATORS + LITERALS + PUNCTUATION)
GLUE = st.sampled_from([" ", " ", "", "  ", "\n"])


@st.composite
def token_soup(draw: st.DrawFn) -> str:
    """Keywords, fields, operators, literals and punctuation in any order."""
    parts = draw(st.lists(st.tuples(TOKENS, GLUE), max_size=30))
    return "".join(token + glue for token, glue in parts)


@st.composite
def nested(draw: st.DrawFn) -> str:
    """A predicate inside many parentheses or NOTs (balanced or not), or a long chain."""
    inner = draw(st.sampled_from(["a = 1", "keyword1 = 'x'", "", "a IN (1, 2)", "NOT a = 1"]))
    kind = draw(st.sampled_from(["parens", "nots", "mixed", "chain", "list", "long"]))
    n = draw(st.integers(0, 3 * MAX_DEPTH) | st.integers(0, 2000))
    if kind == "parens":
        return "(" * n + inner + ")" * draw(st.sampled_from([n, n - 1, n + 1, 0]))
    if kind == "nots":
        return "NOT " * n + inner
    if kind == "mixed":
        return "(NOT " * n + inner + ")" * n
    if kind == "chain":
        return f" {draw(st.sampled_from(['AND', 'OR']))} ".join([inner or "a = 1"] * (n + 1))
    if kind == "list":
        return "a IN (" + ", ".join(["1"] * (n + 1)) + ")"
    return "keyword1 = '" + "x" * (MAX_QUERY_LENGTH - 20 + n % 40) + "'"


QUERY_TEXTS = st.one_of(
    st.text(max_size=80),
    st.text(st.sampled_from("()'\"`,=<>!. \\aAnNdDoOrRtT01e-+_\n\x00é"), max_size=60),
    token_soup(),
    nested(),
)


@pytest.fixture(scope="module", autouse=True)
def _warm_parser() -> None:
    """Build the LALR tables before the deadlines start counting."""
    parse("a = 1")


def assert_parses_or_fails_at_a_position(text: str) -> Query | None:
    """Parse ``text``; on failure assert an InvalidQueryError inside the text, return None."""
    try:
        return parse(text)
    except InvalidQueryError as exc:
        assert exc.position is not None, exc
        assert 0 <= exc.position <= len(text), (exc.position, len(text), exc)
        assert exc.field == "query", exc
        return None


@settings(max_examples=400, deadline=PARSE_DEADLINE)
@given(QUERY_TEXTS)
def test_any_text_parses_or_is_an_invalid_query_with_a_position_inside_it(text: str) -> None:
    """No text makes the parser raise anything but InvalidQueryError, point outside the query
    or run past the deadline."""
    assert_parses_or_fails_at_a_position(text)


@settings(max_examples=100, deadline=PARSE_DEADLINE)
@given(QUERY_TEXTS)
def test_any_text_compiles_or_is_an_invalid_query_with_a_position_inside_it(text: str) -> None:
    """What parses, the compiler types against the registry's keys, failing only with
    InvalidQueryError inside the query (unknown fields, mismatched values)."""
    query = assert_parses_or_fails_at_a_position(text)
    if query is not None:
        try:
            compile_query(query, KEY_TYPES)
        except InvalidQueryError as exc:
            assert exc.position is not None and 0 <= exc.position <= len(text), exc


@settings(max_examples=100, deadline=PARSE_DEADLINE, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_valid_queries_of_the_search_model_compile_to_sql_for_both_databases(
    data: st.DataObject,
) -> None:
    """Every query the search model generates parses, compiles against the registry (alone and
    scoped to a Flow type) and renders as SQL for SQLite and PostgreSQL."""
    world = data.draw(worlds())
    case = data.draw(queries(world))
    for flow_type in (None, "PropA"):
        compiled = prepare(case.text, KEY_TYPES, flow_type)
        statement = select(t.runs.c.run_id).where(compiled.where)
        for dialect in (sqlite.dialect(), postgresql.dialect()):
            assert "SELECT" in str(statement.compile(dialect=dialect))
    assert [(k.field, k.descending) for k in compiled.order][: len(case.order)] == list(case.order)


# -- page tokens --------------------------------------------------------------------------------

RUN_IDS = st.uuids().map(str) | st.text(min_size=1, max_size=40)
SEARCH_ORDER = compile_query(parse(""), KEY_TYPES).order  # StartTime, RunId
NAMED_ORDER = compile_query(parse("ORDER BY FlowId ASC, CloseTime"), KEY_TYPES).order


@st.composite
def search_positions(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    """An order of a search and a position in it (sort-key values of a run)."""
    order = draw(st.sampled_from([SEARCH_ORDER, NAMED_ORDER]))
    values = [
        draw(st.integers(0, 2**62) if key.kind is int else st.text(max_size=30)) for key in order
    ]
    return order, values


@settings(max_examples=100, deadline=None)
@given(search_positions(), st.text(max_size=20), st.text(max_size=20))
def test_a_search_token_decodes_to_its_position_for_its_query_only(
    position: tuple[Any, list[Any]], query: str, other: str
) -> None:
    """A search token gives back its position with its own query, and is refused with another
    query or another Flow type scope."""
    order, values = position
    token = paging.encode_token(paging.query_digest(query), values)
    assert paging.decode_token(token, paging.query_digest(query), order) == values
    for digest in (paging.query_digest(other), paging.query_digest(query, "PropA")):
        if digest != paging.query_digest(query):
            with pytest.raises(InvalidPageTokenError, match="another query"):
                paging.decode_token(token, digest, order)


@settings(max_examples=100, deadline=None)
@given(RUN_IDS, RUN_IDS, st.integers(0, 2**62), st.integers(0, 2**31))
def test_a_history_token_decodes_to_its_position_for_its_run_only(
    run_id: str, other: str, last: int, seen: int
) -> None:
    """A history token gives back (last event row, events seen) for its run only."""
    token = history.encode_token(run_id, last, seen)
    assert history.decode_token(token, run_id) == (last, seen)
    if other != run_id:
        with pytest.raises(InvalidPageTokenError):
            history.decode_token(token, other)


@settings(max_examples=100, deadline=None)
@given(RUN_IDS, st.text(min_size=1, max_size=20), st.text(max_size=20), st.integers(0, 2**62))
def test_a_channel_token_decodes_to_its_position_for_its_queue_only(
    run_id: str, queue: str, other: str, seq: int
) -> None:
    """A Channel page token gives back its sequence for its run and queue only."""
    token = channels._encode_token(run_id, queue, seq)
    assert channels._decode_token(token, run_id, queue) == seq
    if other != queue:
        with pytest.raises(InvalidPageTokenError):
            channels._decode_token(token, run_id, other)


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([stream_tokens.PAGE, stream_tokens.RESUME]),
    st.uuids().map(lambda u: u.hex[:12]),
    st.integers(0, 2**62),
    st.tuples(st.text(max_size=8), st.text(max_size=8)),
)
def test_a_stream_token_decodes_to_its_position_for_its_stream_and_kind_only(
    kind: str, epoch: str, seq: int, names: tuple[str, str]
) -> None:
    """A Stream token gives back (epoch, sequence) for its Stream and kind; a page token is no
    resume token, and a token of another Flow ID is refused."""
    mine = stream_tokens.binding("F", names[0], "s")
    token = stream_tokens.encode_token(kind, epoch, seq, mine)
    assert stream_tokens.decode_token(token, kind, mine, InvalidPageTokenError, "t") == (
        epoch,
        seq,
    )
    other_kind = stream_tokens.RESUME if kind == stream_tokens.PAGE else stream_tokens.PAGE
    with pytest.raises(InvalidPageTokenError):
        stream_tokens.decode_token(token, other_kind, mine, InvalidPageTokenError, "t")
    theirs = stream_tokens.binding("F", names[1], "s")
    if theirs != mine:
        with pytest.raises(InvalidPageTokenError):
            stream_tokens.decode_token(token, kind, theirs, InvalidPageTokenError, "t")


def _decoders() -> dict[str, Callable[[str], Any]]:
    """Each listing's token decoder, bound to one query, run, queue or Stream."""
    digest = paging.query_digest("")
    binding = stream_tokens.binding("F", "f", "s")
    return {
        "search": lambda token: paging.decode_token(token, digest, SEARCH_ORDER),
        "history": lambda token: history.decode_token(token, "run"),
        "channel": lambda token: channels._decode_token(token, "run", "queue"),
        "stream": lambda token: stream_tokens.decode_token(
            token, stream_tokens.PAGE, binding, InvalidPageTokenError, "beforePageToken"
        ),
    }


def b64(raw: bytes) -> str:
    """Return URL-safe base64 without padding, as the tokens are written."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# Short JSON that is no position (nesting deep enough to hit the recursion limit is in the
# found file).
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("vqpransx"), inner),
    max_leaves=5,
).map(lambda v: repr(v).replace("'", '"').replace("None", "null").encode())
GARBAGE = st.one_of(
    st.text(max_size=40),
    st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")),
    st.binary(max_size=60).map(b64),
    JSONISH.map(b64),
    st.text(st.sampled_from("r.p0123456789abcdef"), max_size=40).map(lambda s: b64(s.encode())),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_decoders())), GARBAGE)
def test_garbage_tokens_raise_nothing_but_invalid_page_token(listing: str, token: str) -> None:
    """Text, base64 of bytes, of JSON or of dotted fields: a decoder raises nothing but
    InvalidPageTokenError (an empty token means the first page)."""
    try:
        _decoders()[listing](token)
    except InvalidPageTokenError:
        pass
    except InvalidArgumentError as exc:  # a parent class is not the promised error
        raise AssertionError(f"{type(exc).__name__}: {exc}") from exc


EXTRA_CHARACTERS = TOKEN_ALPHABET + "=+/.!%~ \n\x00é"


def _cut_extended_inserted_or_deleted(token: str) -> list[str]:
    """Every truncation of ``token`` (but the empty one, the first page), every deletion of a
    character, every extension by one or two characters and every insertion of one."""
    edited = [token[:n] for n in range(1, len(token))]
    edited += [token[:at] + token[at + 1 :] for at in range(len(token))]
    edited += [token + c for c in EXTRA_CHARACTERS]
    edited += [token + c + d for c in "A=" for d in EXTRA_CHARACTERS]
    edited += [token[:at] + c + token[at:] for at in range(len(token)) for c in EXTRA_CHARACTERS]
    return edited


@pytest.mark.parametrize("listing", sorted(LISTINGS))
# Each example tries every edit of its token, so the first failure says enough: no shrinking.
@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_a_token_cut_extended_or_with_a_character_inserted_or_deleted_is_refused(
    listing: str, data: st.DataObject
) -> None:
    """Every such edit of a real token is InvalidPageTokenError or decodes to the same position
    (no other exception, never another position). Replacing a character is another matter:
    see ``test_properties_found.py``."""
    positions, encode_token, decode_token = LISTINGS[listing]
    token = encode_token(data.draw(positions))
    edits = _cut_extended_inserted_or_deleted(token)
    wrong = [e for e in edits if not refused_or_same(decode_token, token, e)]
    assert not wrong, (listing, token, wrong[:3])
