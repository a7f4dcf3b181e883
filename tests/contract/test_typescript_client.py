"""A TypeScript client generated from openapi.json type-checks and drives a live server.

openapi-typescript turns the document into ``schema.d.ts`` in a temporary folder, next to copies
of ``ts/contract.test.ts``, ``ts/tsconfig.json`` and ``ts/package.json`` and a link to
``ts/node_modules`` (installed by ``make install`` with ``npm ci``). ``tsc`` checks the script in
strict mode: it reads ``error.code`` and the other Problem fields without casts, so it compiles
only when every error response is documented as the Problem schema. Node's test runner then runs
the script, through tsx and openapi-fetch, against a real server.

``DEXLITE_CONTRACT_OPENAPI`` names another document to generate from (the default is the
repository's ``openapi.json``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server import ServerProcess
from tests.support.backends import backend_independent

pytestmark = [
    backend_independent("the client only sees HTTP, and the server's answers are the same"),
    pytest.mark.timeout(300),
]

ROOT = Path(__file__).resolve().parents[2]
TS_DIR = ROOT / "tests" / "contract" / "ts"
NODE_MODULES = TS_DIR / "node_modules"
#: Copied next to the generated schema.d.ts; package.json makes the folder an ES module scope.
CLIENT_FILES = ("contract.test.ts", "tsconfig.json", "package.json")
STEP_SECONDS = 180.0


def openapi_document() -> Path:
    """Return the OpenAPI document to generate the client from."""
    named = os.environ.get("DEXLITE_CONTRACT_OPENAPI")
    return Path(named).resolve() if named else ROOT / "openapi.json"


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str | None:
    """Run ``command`` in ``cwd``; return None when it exits 0, else a report of its output."""
    try:
        result = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=STEP_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return f"{' '.join(command)} did not finish within {STEP_SECONDS:g} s:\n{exc.output}"
    if result.returncode == 0:
        return None
    return (
        f"{' '.join(command)} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    )


@pytest.fixture(scope="module")
def client_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Generate the client's types into a temporary folder laid out for tsc and tsx."""
    if not (NODE_MODULES / ".bin" / "openapi-typescript").exists():
        pytest.fail(
            f"{NODE_MODULES} is missing or incomplete: run `npm ci --prefix tests/contract/ts` "
            "(or `make install`) first"
        )
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the TypeScript contract test needs Node.js 20 or later")
    document = openapi_document()
    assert document.is_file(), f"no OpenAPI document at {document}"
    folder = tmp_path_factory.mktemp("ts-client")
    for name in CLIENT_FILES:
        shutil.copy(TS_DIR / name, folder / name)
    (folder / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
    generator = str(NODE_MODULES / ".bin" / "openapi-typescript")
    failure = run([generator, str(document), "-o", str(folder / "schema.d.ts")], folder)
    if failure is not None:
        pytest.fail(f"openapi-typescript could not generate from {document}:\n{failure}")
    return folder


def test_generated_client_type_checks(client_dir: Path) -> None:
    """``tsc`` (strict) accepts the contract script against the types generated from the
    document."""
    tsc = str(NODE_MODULES / ".bin" / "tsc")
    failure = run([tsc, "-p", str(client_dir), "--pretty", "false"], client_dir)
    if failure is not None:
        pytest.fail(
            f"the client generated from {openapi_document()} does not type-check:\n{failure}"
        )


def test_generated_client_drives_a_live_server(client_dir: Path, tmp_path: Path) -> None:
    """The contract script passes under Node's test runner against a real server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_")}
    with ServerProcess(tmp_path, env={"DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL"}) as server:
        env["DEXLITE_URL"] = server.url
        command = [
            "node",
            "--import",
            "tsx",
            "--test",
            "--test-reporter=spec",
            str(client_dir / "contract.test.ts"),
        ]
        failure = run(command, client_dir, env)
        log = server.log_text()
    if failure is not None:
        pytest.fail(
            f"the contract script failed against {server.url}:\n{failure}\n"
            f"--- server log ---\n{log}"
        )
