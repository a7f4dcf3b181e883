"""The bundled examples the playground drives: one subpackage each (a Flow and its routes)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine import Flow
from patterns.sequentially_chunked_attribute_map import flow as chunked
from patterns.sequentially_chunked_attribute_map import routes as chunked_routes


def bundled_flows() -> list[Flow[Any]]:
    """Return a fresh instance of every bundled Flow."""
    return [chunked.ChunkedSubscriberFlow()]


def bundled_routers() -> list[APIRouter]:
    """Return the routers of every bundled example."""
    return [chunked_routes.router]
