"""FULL_TEXT tokens and the SQL each database gets for them (no database)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from engine import InvalidArgumentError
from engine._storage import tables as t
from engine._storage.indexes import index_write
from engine._storage.search.compiler import compile_query
from engine._storage.search.fulltext import (
    LEXEME_LENGTH,
    fts5_phrase,
    normalize,
    tokens,
    tsquery_of,
)
from engine._storage.search.parser import parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The quick, brown FOX!", ["the", "quick", "brown", "fox"]),
        ("Café-CRÈME №5", ["cafe", "creme", "no5"]),
        ("cafe\u0301", ["cafe"]),  # a decomposed accent
        ("\ufb01le ＡＢＣ ½", ["file", "abc", "1", "2"]),  # compatibility forms
        ("Straße STRASSE", ["strasse", "strasse"]),  # full case folding
        ("bob@example.com a_b x-ray", ["bob", "example", "com", "a", "b", "x", "ray"]),
        ("がぎ 가나 किताब", ["がぎ", "가나", "क", "त", "ब"]),  # kana and Hangul stay composed
        ("ÅNGSTRÖM Ωmega Ǆ", ["angstrom", "ωmega", "dz"]),
        ("?! -- ...", []),
        ("", []),
    ],
)
def test_tokens_are_folded_runs_of_letters_and_digits(text: str, expected: list[str]) -> None:
    assert tokens(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_the_stored_form_is_a_fixed_point_that_no_database_re_splits(text: str) -> None:
    stored = normalize(text)
    assert tokens(stored) == (stored.split(" ") if stored else [])
    assert normalize(stored) == stored
    for token in tokens(stored):
        # FTS5's ascii tokenizer keeps non-ASCII characters and splits on ASCII non-alphanumerics;
        # tsvector and tsquery input quote lexemes with ' and escape with \\.
        assert all(c.isascii() is False or c.isdigit() or c.islower() for c in token), token
        assert not {"'", "\\", " ", '"'} & set(token)


def test_query_forms_quote_and_bound_the_tokens() -> None:
    assert fts5_phrase(["brown", "fox"]) == '"brown fox"'
    assert tsquery_of(["a", "b", "a"]) == "'a' & 'b'"
    long = "x" * (LEXEME_LENGTH + 40)
    assert tsquery_of([long, long + "y"]) == "'" + "x" * LEXEME_LENGTH + "'"
    assert tsquery_of(["it's", "a\\b"]) == "'it''s' & 'a\\\\b'"


def test_a_full_text_index_write_stores_the_tokens() -> None:
    write = index_write("k", "FULL_TEXT", "Hello, WORLD — café", "a")
    assert write.text == "hello world cafe"
    assert write.value == '"Hello, WORLD \\u2014 caf\\u00e9"'
    assert index_write("k", "FULL_TEXT", "?!", "a").text == ""
    assert index_write("k", "FULL_TEXT", "a\x00b", "a").text == "a b"


@pytest.mark.parametrize(
    ("index_type", "value"), [("KEYWORD", "a\x00"), ("KEYWORD_ARRAY", ["\x00"])]
)
def test_a_keyword_with_nul_is_refused_on_every_database(index_type: str, value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="NUL"):
        index_write("k", index_type, value, "a")


def _sql(text: str, dialect: object) -> str:
    compiled = compile_query(parse(text), {"text1": "FULL_TEXT", "keyword1": "KEYWORD"})
    statement = select(t.runs.c.run_id).where(compiled.where)
    return str(statement.compile(dialect=dialect))  # type: ignore[arg-type]


def test_each_database_gets_its_own_full_text_sql_with_bound_values() -> None:
    lite = _sql("text1 = 'Robert''); DROP'", sqlite.dialect())
    pg = _sql("text1 = 'Robert''); DROP'", postgresql.dialect())
    assert "search_texts_fts MATCH ?" in lite
    assert "search_texts.lexemes @@ CAST(" in pg and "strpos(" in pg
    for sql in (lite, pg):
        assert "robert" not in sql.lower() and "DROP" not in sql
    assert _sql("text1 = '!?'", sqlite.dialect()).count("search_texts") == 0  # no token: false
