"""Properties of the ID and instance-key checks (no database).

A generated string is accepted, unchanged, exactly when a reference written from the documented
rules says so, and refused otherwise with an InvalidArgumentError that names the field. Control
characters in instance keys, which the engine accepts, are in ``test_properties_found.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import AttributeMap, Flow, InvalidArgumentError, Registry, StepList
from engine._ids import MAX_ID_LENGTH, check_id
from engine._runtime.names import parse_key
from engine.attribute import check_instance_key

SPECIAL = "/ \t\n\r\x00\x1f\x7f\x85\u2028\u3000\ufeff"
CHARACTERS = st.one_of(
    st.characters(),
    st.sampled_from(SPECIAL),
    st.characters(categories=["Cs"]),  # lone surrogates
    st.characters(max_codepoint=0x7F),
)
ID_TEXTS = st.text(CHARACTERS, max_size=12) | st.text(
    st.characters(max_codepoint=0x7F) | st.sampled_from(SPECIAL),
    min_size=MAX_ID_LENGTH - 3,
    max_size=MAX_ID_LENGTH + 3,
)
NOT_TEXT = st.none() | st.integers() | st.binary() | st.lists(st.text(max_size=2), max_size=2)


def _storable(text: str) -> bool:
    """Return True when ``text`` has no lone surrogates (UTF-8 can hold it)."""
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def valid_id(text: str) -> bool:
    """The reference rule for Flow, run and request IDs."""
    return (
        not all(c.isspace() for c in text)
        and len(text) <= MAX_ID_LENGTH
        and "/" not in text
        and all(ord(c) >= 32 for c in text)
        and _storable(text)
    )


@settings(max_examples=400, deadline=None)
@given(ID_TEXTS | NOT_TEXT)
def test_an_id_is_accepted_exactly_when_it_follows_the_rules(text: Any) -> None:
    """check_id accepts non-blank text of at most 256 characters without ``/``, control
    characters or lone surrogates, unchanged; anything else raises InvalidArgumentError naming
    the field."""
    if isinstance(text, str) and valid_id(text):
        assert check_id(text, "flowId") == text
    else:
        with pytest.raises(InvalidArgumentError) as info:
            check_id(text, "flowId")
        assert info.value.field == "flowId"


class Keyed(Flow[None]):
    """A Flow with an AttributeMap, for the wire form ``map/instance``."""

    progress = AttributeMap("progress", str)

    def get_steps(self) -> StepList[None]:
        """No Steps: only the declarations matter."""
        return StepList.empty()


KEYED = Registry([Keyed()]).spec("Keyed")
# Control characters are left to the found file: the engine accepts them in instance keys.
KEY_TEXTS = st.text(
    st.one_of(
        st.characters(exclude_categories=["Cc"]),
        st.sampled_from("/ \u2028\u3000\ufeff"),
        st.characters(categories=["Cs"]),
    ),
    max_size=12,
)


def valid_instance_key(text: str) -> bool:
    """The reference rule for AttributeMap and ChannelMap instance keys (DESIGN.md §3)."""
    return not all(c.isspace() for c in text) and "/" not in text and _storable(text)


@settings(max_examples=400, deadline=None)
@given(KEY_TEXTS | NOT_TEXT)
def test_an_instance_key_is_accepted_exactly_when_it_is_non_blank_without_a_slash(
    text: Any,
) -> None:
    """An instance key is accepted, unchanged, exactly when it is non-blank text without ``/``
    or lone surrogates, both in the Python API and in the wire form ``map/instance``; a refusal
    is an InvalidArgumentError naming the field."""
    if isinstance(text, str) and valid_instance_key(text):
        assert check_instance_key(text, "instance") == text
        assert parse_key(KEYED, f"progress/{text}", "name")[1] == text
        return
    with pytest.raises(InvalidArgumentError) as info:
        check_instance_key(text, "instance")
    assert info.value.field == "instance"
    if isinstance(text, str):
        with pytest.raises(InvalidArgumentError) as info:
            parse_key(KEYED, f"progress/{text}", "name")
        assert info.value.field == "name"
    with pytest.raises(InvalidArgumentError) as info:
        Keyed.progress.lock(text)
    assert info.value.field == "key"
