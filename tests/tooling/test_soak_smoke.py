"""``make soak``'s tool works: a few seconds of it against a real server pass and leave a
summary of the documented shape (``make test`` proves the tool without a 10-minute run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soak.load import MIX
from tests.support.backends import backend_independent

ROOT = Path(__file__).resolve().parents[2]
OPERATION_FIELDS = {"sent", "ok", "refused", "per_second", "p50_ms", "p99_ms"}


@backend_independent("the soak starts its own server on a fresh SQLite file")
@pytest.mark.timeout(240)
def test_a_five_second_soak_passes_and_writes_its_summary(tmp_path: Path) -> None:
    """``python -m soak --seconds 5`` exits 0 and its JSON holds every operation kind,
    the error counts, the checks of every acknowledged write and the server's RSS."""
    output = tmp_path / "soak.json"
    # The developer's DEXLITE_* settings must not reach the soak's server.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_")}
    done = subprocess.run(
        [sys.executable, "-m", "soak", "--seconds", "5", "--workers", "4"]
        + ["--output", str(output)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=220,
    )
    assert output.exists(), done.stdout + done.stderr
    summary = json.loads(output.read_text())
    assert set(summary["operations"]) == set(MIX), summary["operations"]
    for figures in summary["operations"].values():
        assert set(figures) == OPERATION_FIELDS and figures["sent"] > 0, figures
    assert summary["total"]["sent"] == sum(f["sent"] for f in summary["operations"].values())
    for error in summary["errors"]:
        assert set(error) == {"status", "code", "count", "allowed"}, error
    checks = summary["checks"]
    assert checks["starts"]["acknowledged"] == summary["acknowledged"]["starts"] > 0
    assert len(checks["counters"]) == summary["counters"]
    assert len(checks["channels"]) == summary["channels"]
    assert summary["acknowledged"]["increments"] == sum(
        c["acknowledged"] for c in checks["counters"]
    )
    rss = summary["rss_mb"]
    assert 0 < rss["start"] <= rss["max"] and rss["end"] <= rss["max"] <= rss["bound"], rss
    assert summary["failures"] == [] and summary["passed"] is True, summary["failures"]
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert (tmp_path / "soak.server.log").exists()
