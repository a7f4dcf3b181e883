"""Prometheus metrics at ``/metrics``: the engine's telemetry, its load, and HTTP traffic.

Each app has its own registry (no process-global state), so several apps in one process (the
tests) keep separate figures. Counters and histograms are fed as things happen: the engine
calls :class:`PrometheusTelemetry`, the ASGI middleware times every request. Gauges describe
the load at scrape time and are read from the engine then (:meth:`engine.Engine.stats`).
Labels stay bounded: Flow, Step and RPC names come from the registry, a lock is named by its
Attribute (not its map instance), and a request by its route's template, not its path.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import engine

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
UNMATCHED_ROUTE = "<unmatched>"


class Metrics:
    """Every metric of one app, in its own registry."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        self.rpc_seconds = Histogram(
            "dexlite_rpc_duration_seconds",
            "RPC invocations by Flow type, RPC and outcome (ok or the problem code).",
            ["flow_type", "rpc", "outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.lock_conflicts = Counter(
            "dexlite_lock_conflicts",
            "RPC tries that found an Attribute lock held (RPC_LOCK_CONFLICT, or tried again with "
            "lockRetry), by Flow type and lock.",
            ["flow_type", "lock"],
            registry=registry,
        )
        self.step_attempts = Counter(
            "dexlite_step_attempts",
            "Step attempts by Flow type, Step type and outcome.",
            ["flow_type", "step_type", "outcome"],
            registry=registry,
        )
        self.commit_seconds = Histogram(
            "dexlite_commit_duration_seconds",
            "Commit units from hand-off to durable commit.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.commit_batch_units = Histogram(
            "dexlite_commit_batch_units",
            "Units per SQLite group commit (one transaction, one fsync).",
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self.http_seconds = Histogram(
            "dexlite_http_request_duration_seconds",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.schedule_actions = Counter(
            "dexlite_schedule_actions",
            "Schedule times acted on, by Schedule, overlap policy and result (started, skipped).",
            ["schedule_id", "overlap", "result"],
            registry=registry,
        )
        self.schedule_lag_seconds = Histogram(
            "dexlite_schedule_start_lag_seconds",
            "Seconds from a scheduled time to the start of its Flow.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.open_runs = Gauge(
            "dexlite_open_runs",
            "Open (RUNNING) runs by Flow type.",
            ["flow_type"],
            registry=registry,
        )
        self.steps_pending = Gauge(
            "dexlite_steps_pending", "Pending Step executions.", registry=registry
        )
        self.steps_due = Gauge(
            "dexlite_steps_due", "Pending Step executions due now (the queue).", registry=registry
        )
        self.oldest_due_seconds = Gauge(
            "dexlite_step_queue_age_seconds",
            "How long the oldest due Step execution has waited to run.",
            registry=registry,
        )
        self.timers_scheduled = Gauge(
            "dexlite_timers_scheduled",
            "Timers set for later: delayed Steps, retries and Flow timeouts.",
            registry=registry,
        )
        self.stream_store_bytes = Gauge(
            "dexlite_stream_store_bytes", "Bytes the Stream Store holds.", registry=registry
        )
        self.telemetry = PrometheusTelemetry(self)

    async def render(self, eng: engine.Engine) -> bytes:
        """Read the engine's load into the gauges and return the exposition text."""
        stats = await eng.stats()
        for flow_type in eng.registry.flow_types:
            self.open_runs.labels(flow_type).set(stats.open_runs.get(flow_type, 0))
        self.steps_pending.set(stats.steps_pending)
        self.steps_due.set(stats.steps_due)
        self.oldest_due_seconds.set(stats.oldest_due_seconds)
        self.timers_scheduled.set(stats.timers_scheduled)
        if stats.stream_store_bytes is not None:
            self.stream_store_bytes.set(stats.stream_store_bytes)
        return generate_latest(self.registry)


class PrometheusTelemetry(engine.Telemetry):
    """Records the engine's events in :class:`Metrics` (thread-safe, as the writer needs)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        # Bounded by the registered Flow types, RPCs and outcome codes.
        self._rpcs: dict[tuple[str, str, str], Any] = {}

    def rpc_finished(self, flow_type: str, rpc: str, outcome: str, seconds: float) -> None:
        """Observe one RPC invocation's latency under its outcome."""
        labels = (flow_type, rpc, outcome)
        child = self._rpcs.get(labels)
        if child is None:
            child = self._rpcs[labels] = self._metrics.rpc_seconds.labels(*labels)
        child.observe(seconds)

    def lock_conflict(self, flow_type: str, lock_key: str) -> None:
        """Count a lock conflict under the lock's Attribute (map instances stay unlabelled)."""
        self._metrics.lock_conflicts.labels(flow_type, lock_key.partition("/")[0]).inc()

    def step_attempt(self, flow_type: str, step_type: str, outcome: str) -> None:
        """Count one Step attempt's outcome."""
        self._metrics.step_attempts.labels(flow_type, step_type, outcome).inc()

    def commit(self, seconds: float) -> None:
        """Observe one commit unit's latency."""
        self._metrics.commit_seconds.observe(seconds)

    def commit_batch(self, units: int) -> None:
        """Observe one group commit's size."""
        self._metrics.commit_batch_units.observe(units)

    def schedule_acted(
        self, schedule_id: str, overlap: str, started: int, skipped: int, lags: list[float]
    ) -> None:
        """Count a Schedule's started and skipped times and observe each start's lag."""
        metrics = self._metrics
        if started:
            metrics.schedule_actions.labels(schedule_id, overlap, "started").inc(started)
        if skipped:
            metrics.schedule_actions.labels(schedule_id, overlap, "skipped").inc(skipped)
        for lag in lags:
            metrics.schedule_lag_seconds.observe(lag)


class HTTPMetricsMiddleware:
    """Time every HTTP request under its route template (``/api/v1/flows/{flowId}``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        # One per (method, route template, status): bounded by the app's routes.
        self._children: dict[tuple[str, str, int], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception that escapes everything is answered 500 by the server

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            labels = (scope["method"], _route_of(scope), status)
            child = self._children.get(labels)
            if child is None:
                # labels() checks and looks its arguments up each time: keep what it returns.
                child = self._children[labels] = self.metrics.http_seconds.labels(
                    labels[0], labels[1], str(status)
                )
            child.observe(time.perf_counter() - started)


def _route_of(scope: Scope) -> str:
    """The template of the route that answered (set by the router), or a fixed label."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    # The playground is a mount of static files: one label for all of them.
    return (
        "/playground" if str(scope.get("path", "")).startswith("/playground") else UNMATCHED_ROUTE
    )
