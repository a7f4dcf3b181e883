"""The text of every SQL statement the engines of a test run, as SQLAlchemy's
``before_cursor_execute`` listeners hear them (the engine calls them for the statements it runs
on asyncpg directly too, a grouped one once per member)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine as SQLAlchemyEngine


@contextlib.contextmanager
def statements_heard() -> Iterator[list[str]]:
    """Collect, while open, the text of every statement run, in a list it yields."""
    heard: list[str] = []

    def hear(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        heard.append(statement)

    event.listen(SQLAlchemyEngine, "before_cursor_execute", hear)
    try:
        yield heard
    finally:
        event.remove(SQLAlchemyEngine, "before_cursor_execute", hear)
