"""The text of every SQL statement the engines of a test run, as SQLAlchemy's
``before_cursor_execute`` listeners hear them (the engine calls them for the statements it runs
on asyncpg directly too, a grouped one once per member)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

from sqlalchemy import event
from sqlalchemy.engine import Engine as SQLAlchemyEngine


class Heard(NamedTuple):
    """One statement run: its text and its parameters."""

    statement: str
    parameters: Any


@contextlib.contextmanager
def statements_heard() -> Iterator[list[Heard]]:
    """Collect, while open, every statement run, in a list it yields."""
    heard: list[Heard] = []

    def hear(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        heard.append(Heard(statement, parameters))

    event.listen(SQLAlchemyEngine, "before_cursor_execute", hear)
    try:
        yield heard
    finally:
        event.remove(SQLAlchemyEngine, "before_cursor_execute", hear)
