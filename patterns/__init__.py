"""The bundled examples the playground drives: one subpackage each (a Flow and its routes)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine import Flow
from patterns.hash_partitioned_attribute_map import flow as profiles
from patterns.hash_partitioned_attribute_map import routes as profiles_routes
from patterns.primitives.attribute import flow as attribute
from patterns.primitives.attribute import routes as attribute_routes
from patterns.primitives.channel import flow as channel
from patterns.primitives.channel import routes as channel_routes
from patterns.primitives.client_apis import flow as shipment
from patterns.primitives.client_apis import routes as shipment_routes
from patterns.primitives.rpc import flow as counter
from patterns.primitives.rpc import routes as counter_routes
from patterns.primitives.rpc_canceling_steps import flow as report
from patterns.primitives.rpc_canceling_steps import routes as report_routes
from patterns.primitives.schedule import flow as digest
from patterns.primitives.schedule import routes as digest_routes
from patterns.primitives.stream import flow as progress
from patterns.primitives.stream import routes as progress_routes
from patterns.primitives.subflow import flow as subflow
from patterns.primitives.subflow import routes as subflow_routes
from patterns.primitives.timer import flow as timer
from patterns.primitives.timer import routes as timer_routes
from patterns.sequentially_chunked_attribute_map import flow as chunked
from patterns.sequentially_chunked_attribute_map import routes as chunked_routes


def bundled_flows() -> list[Flow[Any]]:
    """Return a fresh instance of every bundled Flow."""
    return [
        chunked.ChunkedSubscriberFlow(),
        profiles.CustomerProfileFlow(),
        attribute.AttributeFlow(),
        counter.CounterFlow(),
        shipment.ShipmentFlow(),
        progress.ProgressFlow(),
        report.ReportFlow(),
        channel.ChannelFlow(),
        timer.TimerFlow(),
        subflow.FanOutFlow(),
        subflow.SquareFlow(),
        digest.DigestFlow(),
    ]


def bundled_routers() -> list[APIRouter]:
    """Return the routers of every bundled example."""
    return [
        chunked_routes.router,
        profiles_routes.router,
        attribute_routes.router,
        counter_routes.router,
        shipment_routes.router,
        progress_routes.router,
        report_routes.router,
        channel_routes.router,
        timer_routes.router,
        subflow_routes.router,
        digest_routes.router,
    ]
