"""The bundled examples the playground drives: one subpackage each (a Flow and its routes)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine import Flow
from patterns.primitives.rpc_canceling_steps import flow as report
from patterns.primitives.rpc_canceling_steps import routes as report_routes
from patterns.primitives.stream import flow as progress
from patterns.primitives.stream import routes as progress_routes
from patterns.sequentially_chunked_attribute_map import flow as chunked
from patterns.sequentially_chunked_attribute_map import routes as chunked_routes


def bundled_flows() -> list[Flow[Any]]:
    """Return a fresh instance of every bundled Flow."""
    return [chunked.ChunkedSubscriberFlow(), progress.ProgressFlow(), report.ReportFlow()]


def bundled_routers() -> list[APIRouter]:
    """Return the routers of every bundled example."""
    return [chunked_routes.router, progress_routes.router, report_routes.router]
