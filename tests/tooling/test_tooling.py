"""The house tooling passes: ruff (lint and format) and mypy --strict on the packages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.backends import backend_independent

pytestmark = backend_independent("lint and types")

ROOT = Path(__file__).resolve().parents[2]
PATHS = ["engine", "app", "patterns", "tests", "bench", "soak"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_lint_is_clean() -> None:
    result = _run("ruff", "check", *PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run("ruff", "format", "--check", *PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
