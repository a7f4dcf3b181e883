"""The app factory a test's server process runs to serve the test's own Flows.

``DEXLITE_TEST_FLOWS`` names them as ``module:Class`` references separated by commas; each class
is instantiated without arguments, as the in-process side of the same test does.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from fastapi import FastAPI

import engine
from app.main import create_app

FLOWS_VARIABLE = "DEXLITE_TEST_FLOWS"


def reference_of(flow: engine.Flow[Any]) -> str:
    """Return the ``module:Class`` reference a server process imports ``flow``'s class by."""
    kind = type(flow)
    if "<locals>" in kind.__qualname__:
        raise ValueError(f"{kind.__qualname__} is local to a function: a server cannot import it")
    return f"{kind.__module__}:{kind.__qualname__}"


def flows_of(references: str) -> list[engine.Flow[Any]]:
    """Import and instantiate the Flow classes ``references`` names."""
    flows: list[engine.Flow[Any]] = []
    for reference in references.split(","):
        module_name, _, class_name = reference.partition(":")
        flows.append(getattr(importlib.import_module(module_name), class_name)())
    return flows


def create() -> FastAPI:
    """Build the app serving the Flows ``DEXLITE_TEST_FLOWS`` names (a uvicorn ``--factory``)."""
    return create_app(registry=engine.Registry(flows_of(os.environ[FLOWS_VARIABLE])))
