"""Flow lifecycle calls of the client API: describe, search, wait for a result, stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime

from engine._ids import to_datetime
from engine._runtime.committer import Committer
from engine._runtime.ports import Database
from engine._storage import commits, reads
from engine._storage.records import RunClose, RunStatus
from engine._storage.search import queries as search
from engine.clock import Clock, to_micros
from engine.errors import FlowNotFoundError, InvalidArgumentError
from engine.options import StopType
from engine.registry import Registry
from engine.results import FlowInfo, FlowResult, SearchPage, StepCompletion

MAX_WAIT_SECONDS = 60.0
_STOP_STATUS = {
    StopType.CANCEL: RunStatus.CANCELED,
    StopType.TERMINATE: RunStatus.TERMINATED,
    StopType.FAIL: RunStatus.FAILED,
}


class RunWatchers:
    """Events set when runs close, for the waitForFlow calls of this process."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        #: waitForFlow calls waiting for a run to close.
        self.waiting = 0

    def event(self, run_id: str) -> asyncio.Event:
        """Return an event set when ``run_id`` closes."""
        event = self._events.get(run_id)
        if event is None:
            event = self._events[run_id] = asyncio.Event()
        return event

    def closed(self, run_id: str) -> None:
        """Wake everyone waiting for ``run_id`` to close."""
        event = self._events.pop(run_id, None)
        if event is not None:
            event.set()


class FlowQueries:
    """describeFlow, searchFlows, waitForFlow and stopFlow."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        committer: Committer,
        watchers: RunWatchers,
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._database = database
        self._committer = committer
        self._watchers = watchers
        self._clock = clock

    def waiting(self) -> int:
        """Return how many waitForFlow calls wait for a run to close."""
        return self._watchers.waiting

    async def describe(self, flow_id: str, run_id: str | None) -> FlowInfo:
        """Return the latest (or given) run of ``flow_id`` with its search values."""
        found = await search.load_flow_info(self._database, flow_id, run_id)
        if found is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="describeFlow"
            )
        return flow_info(found)

    async def search(
        self, query: str, page_size: int, page_token: str, flow_type: str | None
    ) -> SearchPage:
        """Return one page of the runs matching ``query`` (see ``Engine.search_flows``)."""
        if (
            isinstance(page_size, bool)
            or not isinstance(page_size, int)
            or not (1 <= page_size <= 1000)
        ):
            raise InvalidArgumentError("pageSize must be between 1 and 1000", field="pageSize")
        result = await search.search_runs(
            self._database,
            query,
            self._registry.index_key_types(),
            page_size=page_size,
            page_token=page_token or "",
            flow_type=flow_type,
        )
        return SearchPage([flow_info(found) for found in result.runs], result.next_page_token)

    async def wait(self, flow_id: str, run_id: str | None, wait_seconds: float) -> FlowResult:
        """Return the run's result, waiting up to ``wait_seconds`` for it to close."""
        if not 0 <= wait_seconds <= MAX_WAIT_SECONDS:
            raise InvalidArgumentError("waitSeconds must be between 0 and 60", field="waitSeconds")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            run = await reads.load_run(self._database, flow_id, run_id)
            if run is None:
                raise FlowNotFoundError(
                    f"Flow {flow_id} was not found", flow_id=flow_id, operation="waitForFlow"
                )
            remaining = deadline - loop.time()
            if not run.is_running or remaining <= 0:
                break
            event = self._watchers.event(run.run_id)
            # The run may have closed between the read and the event's creation: look again
            # now that a close can no longer be missed.
            run_id = run.run_id
            again = await reads.load_run(self._database, flow_id, run_id)
            if again is not None and not again.is_running:
                continue
            self._watchers.waiting += 1
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), remaining)
            finally:
                self._watchers.waiting -= 1
        completions = [
            StepCompletion(step_type, step_id, None if out is None else json.loads(out))
            for step_type, step_id, out in await reads.completions(self._database, run.run_id)
        ]
        return FlowResult(
            run.flow_id, run.run_id, run.status, completions, run.error_type, run.error_message
        )

    async def stop(
        self, flow_id: str, stop_type: StopType | str, reason: str | None, run_id: str | None
    ) -> str:
        """Close the active run with CANCELED, TERMINATED or FAILED; return its run ID."""
        try:
            status = _STOP_STATUS[StopType(stop_type)]
        except ValueError:
            raise InvalidArgumentError(
                "type must be CANCEL, TERMINATE or FAIL", field="type"
            ) from None
        close = RunClose(
            status,
            error_type="Stopped" if status == RunStatus.FAILED else None,
            error_message=reason,
        )
        result = await self._committer.commit(
            commits.stop_run(
                flow_id=flow_id, run_id=run_id, close=close, now=to_micros(self._clock.now())
            )
        )
        stopped: str = result.value
        return stopped


def flow_info(found: search.FoundRun) -> FlowInfo:
    """Return the FlowInfo of a run found by a search or describe read."""
    return FlowInfo(
        found.flow_id,
        found.run_id,
        found.flow_type,
        found.status,
        to_datetime(found.started_at) or datetime.now(UTC),
        to_datetime(found.closed_at),
        found.indexed,
        found.parent_flow_id,
        found.parent_run_id,
    )
