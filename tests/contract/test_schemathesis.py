"""schemathesis against a live server: every generated request gets a documented answer.

The run is bounded and repeatable (a fixed seed, a fixed number of examples per operation) and
covers all four phases, the stateful one included, with the checks the contract is about. A
failure quotes schemathesis' report, which names the operation and a curl line to reproduce it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.server import ServerProcess
from tests.support.backends import backend_independent

pytestmark = [
    backend_independent("the checks only see HTTP, and the server's answers are the same"),
    pytest.mark.timeout(600),
]

ROOT = Path(__file__).resolve().parents[2]
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "allow_header_conformance",
)
PHASES = ("examples", "coverage", "fuzzing", "stateful")
SEED = 20261201
MAX_EXAMPLES = 20


def test_schemathesis_finds_no_failure(tmp_path: Path) -> None:
    env = {"DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL", "DEXLITE_STREAM__EVENTS_MAX_SECONDS": "1"}
    with ServerProcess(tmp_path, env=env) as server:
        command = [
            str(SCHEMATHESIS),
            "--config-file",
            str(ROOT / "tests" / "contract" / "schemathesis.toml"),
            "run",
            str(ROOT / "openapi.json"),
            "--url",
            server.url,
            "--checks",
            ",".join(CHECKS),
            "--phases",
            ",".join(PHASES),
            "--seed",
            str(SEED),
            "--max-examples",
            str(MAX_EXAMPLES),
            # One worker: hypothesis' lambda-source reading is not thread-safe (a worker thread
            # can fail with "AST constructor recursion depth mismatch").
            "--workers",
            "1",
            "--report",
            "junit",
            "--report-junit-path",
            str(tmp_path / "junit.xml"),
            "--request-timeout",
            "70",
            "--no-color",
        ]
        result = subprocess.run(
            command, cwd=tmp_path, capture_output=True, text=True, timeout=540, check=False
        )
        log = server.log_text()
    report = f"{result.stdout}\n{result.stderr}\n--- server log ---\n{log}"
    assert result.returncode == 0, report
    assert "Stateful" in result.stdout, report
    assert " failed" not in result.stdout.split("SUMMARY")[-1], report
