"""Flow lifecycle calls of the client API: describe, search, wait for a result, stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime

from engine._enums import RunStatus
from engine._ids import to_datetime
from engine._limits import check_page_size, check_wait_seconds
from engine._runtime.committer import Committer
from engine._runtime.ports import Database
from engine._storage import reads, units
from engine._storage.records import RunClose
from engine._storage.search import queries as search
from engine.clock import Clock, to_micros
from engine.errors import FlowNotFoundError, InvalidArgumentError
from engine.options import StopType
from engine.registry import Registry
from engine.results import FlowInfo, FlowResult, SearchPage, StepCompletion

_STOP_STATUS = {
    StopType.CANCEL: RunStatus.CANCELED,
    StopType.TERMINATE: RunStatus.TERMINATED,
    StopType.FAIL: RunStatus.FAILED,
}


class RunWatchers:
    """Events set when runs close, by Flow ID, for the waitForFlow calls of this process.

    Keyed by Flow ID, not run ID, so that a call can watch before its first read, when it
    does not know the run yet: a close then lands either before the read (which sees it) or
    after (which sets the event). A close of another run of the Flow ID only wakes it early.
    """

    def __init__(self) -> None:
        #: Per Flow ID, its event and how many calls hold it.
        self._events: dict[str, tuple[asyncio.Event, int]] = {}
        #: waitForFlow calls waiting for a run to close.
        self.waiting = 0

    def watch(self, flow_id: str) -> asyncio.Event:
        """Return an event set when a run of ``flow_id`` closes; :meth:`unwatch` it after."""
        event, users = self._events.get(flow_id) or (asyncio.Event(), 0)
        self._events[flow_id] = (event, users + 1)
        return event

    def unwatch(self, flow_id: str, event: asyncio.Event) -> None:
        """Let go of ``event``; the last call to let go of one never set drops it."""
        found = self._events.get(flow_id)
        if found is None or found[0] is not event:
            return  # set and dropped by a close already
        users = found[1] - 1
        if users:
            self._events[flow_id] = (event, users)
        else:
            del self._events[flow_id]

    def closed(self, flow_id: str) -> None:
        """Wake every call waiting for a run of ``flow_id`` to close."""
        found = self._events.pop(flow_id, None)
        if found is not None:
            found[0].set()


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
        check_page_size(page_size)
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
        check_wait_seconds(wait_seconds)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            # Watch before reading: a close is then either read or heard (see RunWatchers).
            event = self._watchers.watch(flow_id) if wait_seconds > 0 else None
            try:
                found = await reads.load_result(self._database, flow_id, run_id)
                if found is None:
                    raise FlowNotFoundError(
                        f"Flow {flow_id} was not found", flow_id=flow_id, operation="waitForFlow"
                    )
                run, rows = found
                remaining = deadline - loop.time()
                if event is None or not run.is_running or remaining <= 0:
                    break
                run_id = run.run_id  # the run read first is the one waited for
                self._watchers.waiting += 1
                try:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(event.wait(), remaining)
                finally:
                    self._watchers.waiting -= 1
            finally:
                if event is not None:
                    self._watchers.unwatch(flow_id, event)
        completions = [
            StepCompletion(step_type, step_id, None if out is None else json.loads(out))
            for step_type, step_id, out in rows
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
            units.stop_run(
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
