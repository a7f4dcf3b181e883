"""Input rules the bundled examples state in words: pydantic's own message for a pattern
quotes the regular expression, which tells a newcomer nothing.

A field keeps its pattern in the JSON Schema (``Field(json_schema_extra={"pattern": ...})``)
and checks it with :func:`matches`, whose error says the rule.
"""

from __future__ import annotations

import re

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError


def matches(pattern: str, rule: str) -> AfterValidator:
    """Return a validator refusing a string that does not match ``pattern`` with ``rule`` as
    its message (its type stays ``string_pattern_mismatch``)."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        # fullmatch: Python's ``$`` would also accept a final newline the schema refuses.
        if compiled.fullmatch(value) is None:
            raise PydanticCustomError("string_pattern_mismatch", rule)
        return value

    return AfterValidator(check)
