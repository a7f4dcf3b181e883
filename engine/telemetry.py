"""What the engine reports as it works, for metrics, and a snapshot of its current load.

The engine knows nothing of Prometheus: it calls a :class:`Telemetry` (given in
``EngineConfig.telemetry``) as RPCs finish, Step attempts end and commits land, and answers
:meth:`engine.Engine.stats` with an :class:`EngineStats`. The server turns both into metrics.
Every method of the base class does nothing, so a subclass implements only what it records.
Methods are called on the event loop, except :meth:`Telemetry.commit_batch`, which the SQLite
writer calls from its thread: implementations must be cheap and thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Telemetry:
    """Receives the engine's events; the base class ignores them all."""

    def rpc_finished(self, flow_type: str, rpc: str, outcome: str, seconds: float) -> None:
        """An RPC invocation ended: ``outcome`` is ``ok`` or the problem code it failed with."""

    def lock_conflict(self, flow_type: str, lock_key: str) -> None:
        """An RPC found an Attribute lock held as it took its locks (it answered
        RPC_LOCK_CONFLICT, or tried again: every try that met a held lock counts)."""

    def step_attempt(self, flow_type: str, step_type: str, outcome: str) -> None:
        """A Step attempt ended: ``outcome`` is the decision it committed (``go_to``,
        ``graceful_complete``, ``force_complete``, ``force_fail``, ``dead_end``), ``failed``
        after its last attempt, ``retried``, ``waiting`` (its wait began), ``waited`` (its wait
        ended without a commit of its own), ``canceled`` or ``superseded``."""

    def commit(self, seconds: float) -> None:
        """A commit unit was applied (``seconds`` from hand-off to its durable commit)."""

    def commit_batch(self, units: int) -> None:
        """The SQLite writer committed ``units`` units in one transaction (group commit)."""

    def schedule_acted(
        self, schedule_id: str, overlap: str, started: int, skipped: int, lags: list[float]
    ) -> None:
        """A Schedule acted on its times: ``started`` Flows and ``skipped`` times under its
        ``overlap`` policy; ``lags`` holds, for each scheduled time started, the seconds from
        the time to its start (triggers and backfills have none)."""


@dataclass(frozen=True)
class EngineStats:
    """The engine's load right now, read from its database and Stream Store."""

    #: Open (RUNNING) runs by Flow type.
    open_runs: dict[str, int] = field(default_factory=dict)
    #: Pending Step executions (ready, due later, or waiting).
    steps_pending: int = 0
    #: Pending Step executions that are due now (ready to run).
    steps_due: int = 0
    #: How long the oldest due Step execution has been due, in seconds (0 when none is).
    oldest_due_seconds: float = 0.0
    #: Timers set for later: delayed Steps, retries, and open runs' Flow timeouts.
    timers_scheduled: int = 0
    #: Bytes the Stream Store holds (None when Streams are disabled).
    stream_store_bytes: int | None = None
