"""The SearchFlows query language: grammar, literals, limits and error positions (no database)."""

from __future__ import annotations

import pytest

from engine import InvalidQueryError
from engine._storage.search.parser import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_LIST_ITEMS,
    MAX_QUERY_LENGTH,
    And,
    Between,
    Compare,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    OrderItem,
    Query,
    StartsWith,
    parse,
)


def where(text: str) -> object:
    return parse(text).where


def test_empty_query_has_no_filter_and_no_order() -> None:
    assert parse("") == Query(None, ())
    assert parse("   ") == Query(None, ())


def test_and_binds_tighter_than_or() -> None:
    tree = where("a = 1 OR b = 2 AND c = 3")
    assert isinstance(tree, Or)
    assert isinstance(tree.items[0], Compare) and isinstance(tree.items[1], And)


def test_parentheses_group_and_not_negates_its_operand() -> None:
    tree = where("NOT (a = 1 OR b = 2) AND c = 3")
    assert isinstance(tree, And)
    assert isinstance(tree.items[0], Not) and isinstance(tree.items[0].item, Or)


def test_keywords_are_case_insensitive_and_fields_are_not_keywords() -> None:
    assert where("notes = 'x' aNd order1 = 'y'") == And(
        (
            Compare("notes", "=", Literal("x", 8), 0),
            Compare("order1", "=", Literal("y", 25), 16),
        )
    )
    assert where("a not in ('x')") == InList("a", (Literal("x", 10),), True, 0)
    assert where("a is not null") == IsNull("a", True, 0)
    assert where("a Between 1 and 2") == Between("a", Literal(1, 10), Literal(2, 16), False, 0)
    assert where("a starts_with 'p'") == StartsWith("a", Literal("p", 14), 0)


def test_literals_strings_numbers_and_booleans() -> None:
    values = [
        ("'it''s'", "it's"),
        ("'it\\'s'", "it's"),
        ('"say ""hi"""', 'say "hi"'),
        ("'tab\\tnew\\nline'", "tab\tnew\nline"),
        ("'back\\\\slash'", "back\\slash"),
        ("'é ☃'", "é ☃"),
        ("42", 42),
        ("-7", -7),
        ("+3", 3),
        ("1.5", 1.5),
        ("-2e3", -2000.0),
        (".5", 0.5),
        ("TRUE", True),
        ("false", False),
    ]
    for text, value in values:
        tree = where(f"a = {text}")
        assert isinstance(tree, Compare)
        assert tree.value.value == value and type(tree.value.value) is type(value), text


def test_not_equal_has_two_spellings() -> None:
    assert where("a <> 1") == where("a != 1")


def test_order_by_with_directions() -> None:
    query = parse("a = 1 ORDER BY StartTime DESC, FlowId")
    assert query.order == (OrderItem("StartTime", True, 15), OrderItem("FlowId", False, 31))
    assert parse("order by CloseTime asc").order == (OrderItem("CloseTime", False, 9),)


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("a = ", 4, "a quoted string"),
        ("= 1", 0, "a field name"),
        ("a == 1", 3, "a number"),
        ("a = 1; DROP TABLE runs", 5, "AND"),
        ("a = 1 OR 1=1", 9, "a field name"),
        ("a = 1)", 5, "the end of the query"),
        ("((a = 1)", 8, "')'"),
        ("a IN ()", 6, "a quoted string"),
        ("a = 1 ORDER BY", 14, "a field name"),
        ("a BETWEEN 1 OR 2", 12, "AND"),
        ("a IS NUL", 5, "NULL"),
        ("a = 1 --", 6, "ORDER BY"),
    ],
)
def test_syntax_errors_give_the_position_and_what_was_expected(
    text: str, position: int, expected: str
) -> None:
    with pytest.raises(InvalidQueryError) as info:
        parse(text)
    assert info.value.position == position
    assert "expected" in info.value.detail and expected in info.value.detail
    assert info.value.field == "query"


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("a = 'open", 4),
        ("a = 'bad \\q'", 9),
        ("a = 99999999999999999999", 4),
        ("a = 1e999", 4),
        ("a = 'x'\x01", 7),
    ],
)
def test_bad_literals_and_characters_are_rejected_with_their_position(
    text: str, position: int
) -> None:
    with pytest.raises(InvalidQueryError) as info:
        parse(text)
    assert info.value.position == position


@pytest.mark.parametrize(
    ("text", "position", "hint"),
    [
        ("FlowType == 'X'", 10, "(compare with a single =, not ==)"),
        ("a = 1 && b = 2", 6, "(use AND, not &&)"),
        ("a = 1 || b = 2", 6, "(use OR, not ||)"),
    ],
)
def test_an_operator_of_another_language_gets_a_hint(text: str, position: int, hint: str) -> None:
    with pytest.raises(InvalidQueryError) as info:
        parse(text)
    assert info.value.position == position
    assert info.value.detail.endswith(hint), info.value.detail


def test_a_plain_syntax_error_gets_no_hint() -> None:
    with pytest.raises(InvalidQueryError) as info:
        parse("a = = 1")
    assert not info.value.detail.endswith(")"), info.value.detail


def test_length_depth_conditions_and_list_size_are_bounded() -> None:
    with pytest.raises(InvalidQueryError, match="limit"):
        parse("a = '" + "x" * MAX_QUERY_LENGTH + "'")
    parse("(" * (MAX_DEPTH - 2) + "a = 1" + ")" * (MAX_DEPTH - 2))
    with pytest.raises(InvalidQueryError, match="deeper"):
        parse("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1))
    with pytest.raises(InvalidQueryError, match="deeper"):
        parse("NOT " * (MAX_DEPTH + 1) + "a = 1")
    parse(" OR ".join(["a = 1"] * MAX_CONDITIONS))
    with pytest.raises(InvalidQueryError, match="conditions"):
        parse(" OR ".join(["a = 1"] * (MAX_CONDITIONS + 1)))
    parse("a IN (" + ", ".join(["1"] * MAX_LIST_ITEMS) + ")")
    with pytest.raises(InvalidQueryError, match="IN list"):
        parse("a IN (" + ", ".join(["1"] * (MAX_LIST_ITEMS + 1)) + ")")


def test_a_query_must_be_a_string() -> None:
    with pytest.raises(InvalidQueryError):
        parse(None)  # type: ignore[arg-type]
