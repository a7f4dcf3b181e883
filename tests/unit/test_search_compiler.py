"""Compiling queries to SQL: typing rules, bound parameters, page tokens (no database)."""

from __future__ import annotations

import base64
import json

import pytest
from sqlalchemy import select
from sqlalchemy.dialects import sqlite

from engine import InvalidArgumentError, InvalidPageTokenError, InvalidQueryError
from engine._storage import tables as t
from engine._storage.indexes import index_write
from engine._storage.search import paging
from engine._storage.search.compiler import _successor, compile_query, parse_datetime
from engine._storage.search.parser import parse

KEYS = {
    "keyword1": "KEYWORD",
    "keywordList1": "KEYWORD_ARRAY",
    "text1": "FULL_TEXT",
    "int1": "INT",
    "double1": "DOUBLE",
    "bool1": "BOOL",
    "datetime1": "DATETIME",
}


def compile_text(text: str) -> str:
    compiled = compile_query(parse(text), KEYS)
    statement = select(t.runs.c.run_id).where(compiled.where)
    return str(statement.compile(dialect=sqlite.dialect()))


def test_query_values_are_bound_parameters_never_sql_text() -> None:
    hostile = "x'); DROP TABLE runs; --"
    sql = compile_text(
        f"keyword1 = '{hostile.replace(chr(39), chr(39) * 2)}' OR text1 = 'robert''); --' OR "
        "keywordList1 IN ('zz_marker_1', 'zz_marker_2') OR FlowId STARTS_WITH 'zz_marker_3'"
    )
    for fragment in ("DROP", "robert", "zz_marker"):
        assert fragment not in sql
    assert "?" in sql


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "unknown field 'nope'"),
        ("keywrd1 = 'a'", "did you mean 'keyword1'"),
        ("keyword1 = 1", "quoted string"),
        ("int1 = 'one'", "integer"),
        ("int1 = 1.5", "integer"),
        ("int1 = TRUE", "integer"),
        ("double1 = 'x'", "number"),
        ("bool1 = 1", "TRUE or FALSE"),
        ("datetime1 = 'tomorrow'", "ISO-8601"),
        ("datetime1 = 5", "ISO-8601"),
        ("StartTime > 'noon'", "ISO-8601"),
        ("Status = 'running'", "RUNNING"),
        ("text1 > 'a'", "cannot be used on text1"),
        ("text1 STARTS_WITH 'a'", "cannot be used on text1"),
        ("keywordList1 > 'a'", "cannot be used on keywordList1"),
        ("bool1 > FALSE", "cannot be used on bool1"),
        ("int1 STARTS_WITH 'a'", "cannot be used on int1"),
        ("ORDER BY keyword1", "ORDER BY supports the system fields"),
        ("ORDER BY StartTime, StartTime", "twice"),
    ],
)
def test_unknown_fields_and_type_mismatches_are_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidQueryError, match=message) as info:
        compile_query(parse(text), KEYS)
    assert info.value.position is not None


def test_default_order_is_start_time_then_run_id_descending() -> None:
    order = compile_query(parse(""), KEYS).order
    assert [(k.field, k.descending) for k in order] == [("StartTime", True), ("RunId", True)]
    order = compile_query(parse("ORDER BY FlowId ASC"), KEYS).order
    assert [(k.field, k.descending) for k in order] == [("FlowId", False), ("RunId", True)]


def test_starts_with_uses_the_smallest_greater_string() -> None:
    assert _successor("ab") == "ac"
    assert _successor("a\U0010ffff") == "b"
    assert _successor("\ud7ff") == "\ue000"
    assert _successor("\U0010ffff") is None


def test_datetimes_are_instants_with_utc_for_naive_values() -> None:
    assert parse_datetime("1970-01-01T00:00:01Z") == 1_000_000
    assert parse_datetime("1970-01-01T02:00:00+02:00") == 0
    assert parse_datetime("1970-01-01") == 0
    assert parse_datetime("1970-01-01T00:00:00.000001") == 1
    assert parse_datetime("not a date") is None


def test_index_writes_are_typed_by_index_type() -> None:
    assert index_write("k", "INT", 5, "a").number == 5
    assert index_write("k", "BOOL", True, "a").number == 1
    assert index_write("k", "DOUBLE", 2, "a").real == 2.0
    assert index_write("k", "KEYWORD_ARRAY", ["a", "b", "a"], "a").items == ("a", "b")
    assert index_write("k", "DATETIME", "1970-01-01T00:00:01Z", "a").number == 1_000_000
    assert index_write("k", "KEYWORD", None, "a").value is None
    for index_type, value in (
        ("INT", True),
        ("INT", "1"),
        ("KEYWORD", 1),
        ("BOOL", 1),
        ("DOUBLE", float("inf")),
        ("KEYWORD_ARRAY", ["a", 1]),
        ("DATETIME", "soon"),
        ("INT", 2**63),
    ):
        with pytest.raises(InvalidArgumentError, match="cannot index"):
            index_write("k", index_type, value, "a")


def test_page_tokens_are_bound_to_their_query_and_validated() -> None:
    order = compile_query(parse(""), KEYS).order
    digest = paging.query_digest("a = 1")
    token = paging.encode_token(digest, [123, "run"])
    assert paging.decode_token(token, digest, order) == [123, "run"]
    assert paging.decode_token("", digest, order) is None
    with pytest.raises(InvalidPageTokenError, match="another query"):
        paging.decode_token(token, paging.query_digest("a = 2"), order)
    with pytest.raises(InvalidPageTokenError, match="another query"):
        paging.decode_token(token, paging.query_digest("a = 1", "SomeFlow"), order)

    def raw(data: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()

    for bad in (
        "%%%",
        "abc",
        raw([1]),
        raw({"v": 2, "q": digest, "p": [1, "r"]}),
        raw({"v": 1, "q": digest, "p": [1]}),
        raw({"v": 1, "q": digest, "p": ["1", "r"]}),
        raw({"v": 1, "q": digest, "p": [True, "r"]}),
        raw({"v": 1, "q": digest, "p": [2**70, "r"]}),
        "x" * 3000,
    ):
        with pytest.raises(InvalidPageTokenError):
            paging.decode_token(bad, digest, order)
