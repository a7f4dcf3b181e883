"""A Python client generated from dexlite's OpenAPI document by openapi-python-client.

The contract tests generate the client the way a user would (``openapi-python-client generate``
on the committed ``openapi.json``), import it from a temporary folder and drive a live server
through it. ``DEXLITE_CONTRACT_OPENAPI`` names another document to generate from.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT_ENV = "DEXLITE_CONTRACT_OPENAPI"
PACKAGE = "dexlite_client"
GENERATE_SECONDS = 300
COUNTER_FLOW_TYPE = "CounterFlow"

#: Request bodies over this many bytes get 413 from the contract tests' server.
REQUEST_LIMIT_BYTES = 64 * 1024
#: Stream messages over this many bytes get 429 from the contract tests' server.
MESSAGE_LIMIT_BYTES = 1024
#: The settings of the server the contract tests drive: small limits make 413 and 429 cheap.
SERVER_ENV = {
    "DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL",
    "DEXLITE_LIMITS__MAX_REQUEST_BYTES": str(REQUEST_LIMIT_BYTES),
    "DEXLITE_STREAM__MAX_MESSAGE_BYTES": str(MESSAGE_LIMIT_BYTES),
}
#: How long one request of the generated client may take (waitForFlow waits up to 60 s).
REQUEST_TIMEOUT_SECONDS = 30.0


def document_path() -> Path:
    """Return the OpenAPI document to generate from: ``$DEXLITE_CONTRACT_OPENAPI`` when set,
    else the repository's ``openapi.json``."""
    chosen = os.environ.get(DOCUMENT_ENV)
    return Path(chosen).resolve() if chosen else ROOT / "openapi.json"


def generate(document: Path, folder: Path) -> str:
    """Generate the client package ``folder/dexlite_client`` from ``document``.

    Returns what the generator printed (stdout and stderr together; it prints its warnings
    on stderr). Raises AssertionError, quoting that output, when it did not create the client.
    """
    # The generator's post-hooks run ruff; the venv that runs the tests has it.
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    completed = subprocess.run(
        [
            str(bin_dir / "openapi-python-client"),
            "generate",
            "--path",
            str(document),
            "--meta",
            "none",
            "--output-path",
            str(folder / PACKAGE),
        ],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=GENERATE_SECONDS,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0 and (folder / PACKAGE / "__init__.py").is_file(), (
        f"openapi-python-client could not generate a client from {document} "
        f"(exit {completed.returncode}):\n{output}"
    )
    return output


class Operations:
    """The generated operation modules by name: ``operations.start_flow`` is the module of
    operationId ``startFlow``, whichever tag's package holds it."""

    def __init__(self, api: ModuleType) -> None:
        """Import every operation module under the generated ``api`` package."""
        self._modules: dict[str, ModuleType] = {}
        for info in pkgutil.walk_packages(api.__path__, f"{api.__name__}."):
            if info.ispkg:
                continue
            module = importlib.import_module(info.name)
            name = info.name.rsplit(".", 1)[1]
            assert name not in self._modules, (
                f"two generated operations are named {name}: "
                f"{self._modules[name].__name__} and {module.__name__}"
            )
            self._modules[name] = module

    def __getattr__(self, name: str) -> Any:
        """Return the operation module ``name`` (snake_case of its operationId)."""
        try:
            return self._modules[name]
        except KeyError:
            raise AttributeError(
                f"the generated client has no operation module {name!r}; it has "
                f"{', '.join(sorted(self._modules))}"
            ) from None


@dataclass(frozen=True)
class GeneratedClient:
    """The imported client package: its operations, models and what its generation printed."""

    package: ModuleType
    models: ModuleType
    api: Operations
    errors: ModuleType
    types: ModuleType
    generator_output: str

    @property
    def Problem(self) -> type[Any]:
        """Return the generated model of an application/problem+json body."""
        problem: type[Any] = self.models.Problem
        return problem

    def typed(self, model: Any, name: str) -> Any:
        """Return field ``name`` of a generated model, asserting the model declares it (rather
        than keeping it among its untyped additional properties) and that it is set."""
        assert hasattr(model, name), (
            f"the generated {type(model).__name__} has no typed field {name!r} (the document's "
            f"schema does not declare it); the body was {model.to_dict()}"
        )
        value = getattr(model, name)
        assert not isinstance(value, self.types.Unset), (
            f"{type(model).__name__}.{name} is not set; the body was {model.to_dict()}"
        )
        return value

    def client(self, base_url: str, **kwargs: Any) -> Any:
        """Return a generated ``Client`` that raises on any status the document omits."""
        return self.package.Client(
            base_url=base_url,
            raise_on_unexpected_status=True,
            timeout=httpx.Timeout(REQUEST_TIMEOUT_SECONDS),
            **kwargs,
        )


def _forget_package() -> None:
    """Drop the generated package and its submodules from ``sys.modules``."""
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


@contextmanager
def imported(folder: Path, generator_output: str) -> Iterator[GeneratedClient]:
    """Import the package generated into ``folder``; forget it (modules and path) afterwards."""
    _forget_package()
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    try:
        package = importlib.import_module(PACKAGE)
        yield GeneratedClient(
            package=package,
            models=importlib.import_module(f"{PACKAGE}.models"),
            api=Operations(importlib.import_module(f"{PACKAGE}.api")),
            errors=importlib.import_module(f"{PACKAGE}.errors"),
            types=importlib.import_module(f"{PACKAGE}.types"),
            generator_output=generator_output,
        )
    finally:
        _forget_package()
        sys.path.remove(str(folder))


def expect_problem(
    generated: GeneratedClient, response: Any, status: int, code: str, **fields: Any
) -> Any:
    """Assert ``response`` is an application/problem+json error ``status`` with ``code`` and
    the typed ``fields`` given (``flow_id=...``); return its body as the generated ``Problem``.

    ``response`` is a generated ``Response`` (its ``parsed`` must already be a ``Problem``) or
    a plain httpx response (its body is parsed with ``Problem.from_dict``).
    """
    content_type = response.headers.get("content-type", "")
    assert response.status_code == status, (
        f"expected {status} {code}, got {int(response.status_code)} ({content_type}): "
        f"{response.content!r}"
    )
    assert content_type.startswith("application/problem+json"), (
        f"{status} {code} came as {content_type!r}, not application/problem+json"
    )
    if hasattr(response, "parsed"):
        parsed = response.parsed
        assert isinstance(parsed, generated.Problem), (
            f"the client parsed the {status} body as {type(parsed).__name__}, not Problem "
            f"(the document does not describe it as one): {response.content!r}"
        )
    else:
        parsed = generated.Problem.from_dict(response.json())
    assert parsed.code == code, f"expected code {code}, got {parsed.code}: {parsed.detail}"
    assert parsed.status == status, f"the body says status {parsed.status}, the response {status}"
    assert parsed.detail, f"{code} has an empty detail"
    for name, expected in fields.items():
        actual = generated.typed(parsed, name)
        assert actual == expected, f"{code}: {name} is {actual!r}, expected {expected!r}"
    return parsed


def new_id(prefix: str) -> str:
    """Return a Flow ID no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def start_counter(gen: GeneratedClient, client: Any, flow_id: str, counter: int = 0) -> str:
    """Start a CounterFlow through startFlow with ``counter`` set; return its run ID."""
    models = gen.models
    body = models.StartFlowBody(
        flow_type=COUNTER_FLOW_TYPE,
        flow_id=flow_id,
        options=models.StartFlowOptionsBody(
            initial_attributes=models.AttributeValues.from_dict({"counter": counter})
        ),
    )
    response = gen.api.start_flow.sync_detailed(client=client, body=body)
    assert response.status_code == 201, response.content
    assert isinstance(response.parsed, models.StartFlowResponse)
    assert response.parsed.started is True and response.parsed.flow_id == flow_id
    run_id: str = response.parsed.run_id
    return run_id


def invoke(gen: GeneratedClient, client: Any, flow_id: str, rpc: str, value: Any = None) -> Any:
    """Invoke ``rpc`` through invokeRpc with ``value`` as input; return the response."""
    body = gen.models.InvokeRpcBody() if value is None else gen.models.InvokeRpcBody(input_=value)
    return gen.api.invoke_rpc.sync_detailed(flow_id, rpc, client=client, body=body)


def error_locations(generated: GeneratedClient, problem: Any) -> list[str]:
    """Return the typed ``location`` of each item of a VALIDATION_ERROR's ``errors``, checking
    every item also has its ``message`` and ``type``."""
    locations = []
    for item in generated.typed(problem, "errors"):
        locations.append(generated.typed(item, "location"))
        assert generated.typed(item, "message") and generated.typed(item, "type_"), item
    return locations
