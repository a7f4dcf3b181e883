"""Parse SearchFlows query text into a small syntax tree.

The grammar lives in ``grammar.lark`` (LALR, so parsing is table-driven and never recursive).
Size is bounded before and after parsing: the text's length, the tree's depth and the number of
conditions, so a hostile query costs little and the compiler's recursion stays shallow. Every
error is an InvalidQueryError with the 0-based character ``position`` and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from engine.errors import InvalidQueryError

MAX_QUERY_LENGTH = 4096
MAX_DEPTH = 16
MAX_CONDITIONS = 64
MAX_LIST_ITEMS = 256
_INT64 = (-(2**63), 2**63 - 1)

# -- the syntax tree ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    """A value written in the query: str, int, float or bool."""

    value: str | int | float | bool
    position: int

    @property
    def kind(self) -> str:
        """Return ``string``, ``integer``, ``number`` or ``boolean``."""
        if isinstance(self.value, bool):
            return "boolean"
        if isinstance(self.value, int):
            return "integer"
        if isinstance(self.value, float):
            return "number"
        return "string"


@dataclass(frozen=True)
class Compare:
    """``field op value`` with op one of ``= != < <= > >=``."""

    field: str
    op: str
    value: Literal
    position: int


@dataclass(frozen=True)
class InList:
    """``field [NOT] IN (values)``."""

    field: str
    values: tuple[Literal, ...]
    negated: bool
    position: int


@dataclass(frozen=True)
class Between:
    """``field [NOT] BETWEEN low AND high`` (both ends included)."""

    field: str
    low: Literal
    high: Literal
    negated: bool
    position: int


@dataclass(frozen=True)
class StartsWith:
    """``field STARTS_WITH prefix``."""

    field: str
    value: Literal
    position: int


@dataclass(frozen=True)
class IsNull:
    """``field IS [NOT] NULL``."""

    field: str
    negated: bool
    position: int


@dataclass(frozen=True)
class And:
    """Every item holds."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """At least one item holds."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """The item does not hold."""

    item: Node


Predicate = Compare | InList | Between | StartsWith | IsNull
Node = Predicate | And | Or | Not


@dataclass(frozen=True)
class OrderItem:
    """One ``ORDER BY`` field."""

    field: str
    descending: bool
    position: int


@dataclass(frozen=True)
class Query:
    """A parsed query: an optional filter and the requested order."""

    where: Node | None
    order: tuple[OrderItem, ...]


# -- parsing -----------------------------------------------------------------------------------

# What a person reads in "expected ..." instead of the grammar's terminal names.
_EXPECTED = {
    "FIELD": "a field name",
    "COMP_OP": "a comparison (= != < <= > >=)",
    "STRING": "a quoted string",
    "NUMBER": "a number",
    "TRUE": "TRUE",
    "FALSE": "FALSE",
    "NOT": "NOT",
    "_OR": "OR",
    "_AND": "AND",
    "_IN": "IN",
    "_BETWEEN": "BETWEEN",
    "_STARTS_WITH": "STARTS_WITH",
    "_IS": "IS",
    "_NULL": "NULL",
    "_ORDER": "ORDER BY",
    "_BY": "BY",
    "ASC": "ASC",
    "DESC": "DESC",
    "_LPAR": "'('",
    "_RPAR": "')'",
    "_COMMA": "','",
    "$END": "the end of the query",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark.open("grammar.lark", rel_to=__file__, parser="lalr", start="start")


def _expected(names: set[str] | None) -> str:
    readable = sorted({_EXPECTED.get(n, n) for n in names or () if n != "$END"})
    if names and "$END" in names:
        readable.append(_EXPECTED["$END"])
    if not readable:
        return "nothing more"
    if len(readable) == 1:
        return readable[0]
    return "one of " + ", ".join(readable)


def _near(text: str, position: int) -> str:
    snippet = text[position : position + 20]
    return repr(snippet) if snippet else "the end of the query"


def parse(text: str) -> Query:
    """Parse query text, or raise InvalidQueryError saying where and what was expected."""
    if not isinstance(text, str):
        raise InvalidQueryError("query must be a string", position=0, field="query")
    if len(text) > MAX_QUERY_LENGTH:
        raise InvalidQueryError(
            f"query is {len(text)} characters long; the limit is {MAX_QUERY_LENGTH}",
            position=MAX_QUERY_LENGTH,
            field="query",
        )
    bad = next((i for i, c in enumerate(text) if ord(c) < 32 and c not in "\t\n\r"), None)
    if bad is not None:
        raise InvalidQueryError(
            f"query contains a control character at position {bad}", position=bad, field="query"
        )
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    _check_size(tree)
    return _Builder(text).query(tree)


def _accepted(text: str, position: int, fallback: Any) -> set[str]:
    """Return exactly the terminals the parser accepts after ``text[:position]``."""
    try:
        interactive = _parser().parse_interactive(text[:position])
        interactive.exhaust_lexer()
        return set(interactive.accepts())  # type: ignore[no-untyped-call]
    except UnexpectedInput:
        return set(fallback or ())


#: Operators of other query languages, and what this one says instead.
_FOREIGN_OPERATORS = (
    ("==", "compare with a single =, not =="),
    ("&&", "use AND, not &&"),
    ("||", "use OR, not ||"),
)


def _hint(text: str, position: int) -> str:
    """A hint when the error sits on an operator of another language (``==``, ``&&``)."""
    for start in (position - 1, position):
        for operator, hint in _FOREIGN_OPERATORS:
            if start >= 0 and text.startswith(operator, start):
                return f" ({hint})"
    return ""


def _syntax_error(text: str, exc: UnexpectedInput) -> InvalidQueryError:
    if isinstance(exc, UnexpectedCharacters):
        position = exc.pos_in_stream or 0
        char = text[position : position + 1]
        if char in "'\"":
            detail = f"unterminated string starting at position {position}"
        else:
            expected = _accepted(text, position, exc.allowed)
            detail = (
                f"unexpected character {char!r} at position {position}; expected "
                f"{_expected(expected)}{_hint(text, position)}"
            )
        return InvalidQueryError(detail, position=position, field="query")
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        position = exc.token.start_pos if exc.token.start_pos is not None else 0
        expected = _accepted(text, position, exc.expected)
        return InvalidQueryError(
            f"unexpected {_near(text, position)} at position {position}; expected "
            f"{_expected(expected)}{_hint(text, position)}",
            position=position,
            field="query",
        )
    fallback = exc.expected if isinstance(exc, UnexpectedToken | UnexpectedEOF) else ()
    return InvalidQueryError(
        f"the query ends too early; expected {_expected(_accepted(text, len(text), fallback))}",
        position=len(text),
        field="query",
    )


def _check_size(tree: Tree[Any]) -> None:
    """Bound the tree's depth and its number of conditions (iteratively: no recursion)."""
    conditions = 0
    stack: list[tuple[Tree[Any], int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidQueryError(
                f"query nests deeper than {MAX_DEPTH} levels",
                position=_first_pos(node),
                field="query",
            )
        if node.data in ("compare", "in_list", "between", "starts_with", "is_null"):
            conditions += 1
            if conditions > MAX_CONDITIONS:
                raise InvalidQueryError(
                    f"query has more than {MAX_CONDITIONS} conditions",
                    position=_first_pos(node),
                    field="query",
                )
            values = [
                c for c in node.children if isinstance(c, Token) and c.type not in ("FIELD", "NOT")
            ]
            if node.data == "in_list" and len(values) > MAX_LIST_ITEMS:
                raise InvalidQueryError(
                    f"an IN list may hold at most {MAX_LIST_ITEMS} values",
                    position=_first_pos(node),
                    field="query",
                )
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth + 1))


def _first_pos(node: Tree[Any]) -> int:
    for token in node.scan_values(lambda v: isinstance(v, Token)):
        return int(token.start_pos or 0)
    return 0


class _Builder:
    """Turn the lark tree into the syntax tree above (depth is already bounded)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def query(self, tree: Tree[Any]) -> Query:
        where: Node | None = None
        order: tuple[OrderItem, ...] = ()
        for child in tree.children:
            if isinstance(child, Tree) and child.data == "order_by":
                order = tuple(self.order_item(item) for item in child.children)
            else:
                where = self.node(child)
        return Query(where, order)

    def order_item(self, tree: Tree[Any]) -> OrderItem:
        field = tree.children[0]
        assert isinstance(field, Token)
        descending = len(tree.children) > 1 and str(tree.children[1]).upper() == "DESC"
        return OrderItem(_field_name(field), descending, int(field.start_pos or 0))

    def node(self, tree: Any) -> Node:
        kind = tree.data
        children = tree.children
        if kind == "or_":
            return Or(tuple(self.node(c) for c in children))
        if kind == "and_":
            return And(tuple(self.node(c) for c in children))
        if kind == "not_":
            return Not(self.node(children[1]))
        if kind == "group":
            return self.node(children[0])
        field: Token = children[0]
        name, position = _field_name(field), int(field.start_pos or 0)
        rest = children[1:]
        if kind == "compare":
            op = "!=" if str(rest[0]) == "<>" else str(rest[0])
            return Compare(name, op, self.literal(rest[1]), position)
        negated = bool(rest) and isinstance(rest[0], Token) and rest[0].type == "NOT"
        if negated:
            rest = rest[1:]
        if kind == "in_list":
            return InList(name, tuple(self.literal(v) for v in rest), negated, position)
        if kind == "between":
            return Between(name, self.literal(rest[0]), self.literal(rest[1]), negated, position)
        if kind == "starts_with":
            return StartsWith(name, self.literal(rest[0]), position)
        if kind == "is_null":
            return IsNull(name, negated, position)
        raise AssertionError(f"unknown rule {kind}")  # pragma: no cover - grammar and code agree

    def literal(self, token: Token) -> Literal:
        position = int(token.start_pos or 0)
        if token.type == "STRING":
            return Literal(_unquote(str(token), position), position)
        if token.type in ("TRUE", "FALSE"):
            return Literal(token.type == "TRUE", position)
        raw = str(token)
        if any(c in raw for c in ".eE"):
            number = float(raw)
            if not math.isfinite(number):
                raise InvalidQueryError(
                    f"number {raw} at position {position} is out of range",
                    position=position,
                    field="query",
                )
            return Literal(number, position)
        value = int(raw)
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidQueryError(
                f"integer {raw} at position {position} is outside the 64-bit range",
                position=position,
                field="query",
            )
        return Literal(value, position)


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}


def _field_name(token: Token) -> str:
    """Return a FIELD token's name, without the backticks of a quoted one."""
    text = str(token)
    return text[1:-1] if text.startswith("`") else text


def _unquote(raw: str, position: int) -> str:
    quote, body = raw[0], raw[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                where = position + 1 + i
                raise InvalidQueryError(
                    f"unknown escape '\\{nxt}' at position {where}; use \\\\, \\', \\\", \\n, "
                    "\\t or \\r",
                    position=where,
                    field="query",
                )
            out.append(_ESCAPES[nxt])
            i += 2
        elif c == quote:  # a doubled quote stands for one
            out.append(quote)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
