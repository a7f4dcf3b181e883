"""The tests here use no database and start no process: they run in the SQLite half only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.backends import backend_independent_directory


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test here backend-independent."""
    backend_independent_directory(items, Path(__file__).resolve().parent, "no database")
