"""FULL_TEXT search: what a token is, and how each database finds runs by token.

Tokens are defined here, in Python, once: :func:`tokens` folds compatibility forms, case and
accents, then splits the text into runs of letters and digits. The index writer stores a
FULL_TEXT value as its tokens joined by single spaces (``search_texts.body``), and a query's
value goes through the same function, so "contains the token or phrase" means the same thing on
every database: the query's tokens appear, consecutively, among the text's tokens.

The databases only index that normalized form; neither re-tokenizes it differently:

- SQLite: an external-content FTS5 table over ``search_texts``, kept in step by triggers (so the
  index writer only upserts or deletes ``search_texts`` rows). Its ``ascii`` tokenizer splits
  on the spaces and leaves every normalized token whole (non-ASCII characters are token
  characters to it, and the ASCII ones are already lower case letters and digits), so a phrase
  query is exact.
- PostgreSQL: a generated ``tsvector`` column of the tokens, built without the text-search
  parser (``array_to_tsvector``), so no server locale or parser rule can re-split or drop one,
  with a GIN index. A match is "the vector holds every query token" (the index's part) and
  "the spaced body contains the spaced phrase" (exact, checked on the candidates). Lexemes are
  the tokens' first :data:`LEXEME_LENGTH` characters (a tsvector lexeme is at most 2047 bytes),
  which keeps the index's part a sound prefilter; the substring check decides.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from sqlalchemy import Boolean, Table, literal, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

FTS_TABLE = "search_texts_fts"
#: PostgreSQL: the generated tsvector column of ``search_texts`` and its GIN index.
LEXEMES_COLUMN = "lexemes"
LEXEMES_INDEX = "ix_search_texts_lexemes"
#: Characters of a token kept in its PostgreSQL lexeme (255 is also PostgreSQL's largest
#: regular-expression repeat count, and 255 characters fit the 2047-byte lexeme limit).
LEXEME_LENGTH = 255

# Combining marks that are accents on a letter (the combining diacritical marks blocks):
# removed, so 'é', 'e' followed by U+0301 and 'e' are one letter. Other marks are kept for NFC
# to recombine with their letters where it can (kana voicing marks); the rest are not letters,
# so, as in FTS5's unicode61 tokenizer, they separate tokens.
_ACCENTS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
# A run of letters and digits: Python's alphanumeric characters, without the underscore.
_TOKEN = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    """Return the tokens of ``text``: case-, accent- and compatibility-folded letter/digit runs.

    ``'Café-CRÈME №5'`` gives ``['cafe', 'creme', 'no5']``; ``'ﬁle ＡＢＣ'`` gives
    ``['file', 'abc']``. The function is idempotent on its output: the tokens of
    ``' '.join(tokens(t))`` are ``tokens(t)``.
    """
    # Decompose before and after folding case: folding can produce characters that decompose.
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    return _TOKEN.findall(unicodedata.normalize("NFC", _ACCENTS.sub("", folded)))


def normalize(text: str) -> str:
    """Return the stored form of a FULL_TEXT value: its tokens joined by single spaces."""
    return " ".join(tokens(text))


# -- schema -----------------------------------------------------------------------------------
# The index structures themselves (the FTS5 table and its triggers on SQLite, the generated
# ``lexemes`` column and its GIN index on PostgreSQL) are created by the baseline migration,
# engine/_storage/migrations/versions/0001_baseline.py; the queries below rely on them.


# -- queries ----------------------------------------------------------------------------------


class ContainsTokens(FunctionElement[bool]):
    """True when a ``search_texts`` row's body contains a phrase of normalized tokens.

    Arguments: the table's ``id`` and ``body`` columns, then the phrase as an FTS5 query, as a
    tsquery of its (truncated) tokens, and as spaced text. Each database's form uses the ones
    it needs; all are bound parameters.
    """

    type = Boolean()
    inherit_cache = True
    name = "contains_tokens"


def fts5_phrase(words: list[str]) -> str:
    """Return an FTS5 query matching the tokens ``words`` as one phrase.

    The value becomes one quoted FTS5 string, so nothing in it acts as an operator; it is still
    passed as a bound parameter, never spliced into SQL.
    """
    return '"' + " ".join(words).replace('"', '""') + '"'


def tsquery_of(words: list[str]) -> str:
    """Return the tsquery text "every token is present" for ``words`` (lexemes verbatim)."""
    lexemes = dict.fromkeys(w[:LEXEME_LENGTH] for w in words)
    return " & ".join("'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in lexemes)


def matching_runs(texts: Table, key: str, text: str) -> Any | None:
    """Return a SELECT of the run IDs whose FULL_TEXT ``key`` contains the token(s) of ``text``.

    None when ``text`` has no token: such a value matches no run.
    """
    words = tokens(text)
    if not words:
        return None
    condition = ContainsTokens(
        texts.c.id,
        texts.c.body,
        literal(fts5_phrase(words)),
        literal(tsquery_of(words)),
        literal(" " + " ".join(words) + " "),
    ).as_comparison(1, 2)  # a predicate itself: SQLite must not see ``(...) = 1``
    return select(texts.c.run_id).where(texts.c.key == key, condition)


@compiles(ContainsTokens, "sqlite")
def _sqlite_contains(element: ContainsTokens, compiler: SQLCompiler, **kw: Any) -> str:
    row_id, _body, phrase, _query, _spaced = list(element.clauses)
    return (
        f"{compiler.process(row_id, **kw)} IN (SELECT rowid FROM {FTS_TABLE} "
        f"WHERE {FTS_TABLE} MATCH {compiler.process(phrase, **kw)})"
    )


@compiles(ContainsTokens, "postgresql")
def _postgres_contains(element: ContainsTokens, compiler: SQLCompiler, **kw: Any) -> str:
    clauses: list[Any] = list(element.clauses)
    _row_id, body, _phrase, query, spaced = clauses
    # The generated column is not in the table's definition: qualify it by hand, like the body.
    lexemes = f"{compiler.preparer.format_table(body.table)}.{LEXEMES_COLUMN}"
    return (
        f"({lexemes} @@ CAST({compiler.process(query, **kw)} AS tsquery) "
        f"AND strpos(' ' || {compiler.process(body, **kw)} || ' ', "
        f"{compiler.process(spaced, **kw)}) > 0)"
    )
