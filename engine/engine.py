"""The Engine: lifecycle (open storage, recover, run Steps, close) and the async client API.

Each method here documents the call and delegates to the runtime part that does it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from engine._runtime.composition import compose
from engine._runtime.history import history_page
from engine._runtime.pending import pending_steps
from engine._schedule_calls import ScheduleCalls
from engine._storage.stats import load_counts
from engine.channel import Channel, ChannelMap
from engine.clock import Clock, IdleProbe, to_micros
from engine.config import EngineConfig
from engine.flow_client import FlowClient, FlowRef
from engine.options import MatchOperator, RPCInvokeOptions, StartFlowOptions, StopType
from engine.registry import Registry
from engine.results import (
    AttributeMatch,
    AttributeValues,
    ChannelList,
    ChannelMessagePage,
    FlowInfo,
    FlowResult,
    FlowTypeDescription,
    HistoryPage,
    PendingSteps,
    SearchPage,
    StartFlowResult,
)
from engine.stream import Stream, StreamMessage, StreamMessagePage
from engine.telemetry import EngineStats
from engine.travel import BulkTimeTravelResult, TimeTravelOptions, TimeTravelResult, TravelPoint


class Engine(ScheduleCalls):
    """Runs the Flows of a Registry on one database and serves the client API.

    Use ``async with Engine(registry, config):`` or call ``start()`` and ``close()``.
    """

    def __init__(self, registry: Registry, config: EngineConfig | None = None) -> None:
        self.registry = registry
        self.config = config or EngineConfig()
        self._services = compose(registry, self.config)
        self._started = False

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open storage, resume every open run, and start running Steps and timers."""
        await self._services.start()
        self._started = True

    async def close(self) -> None:
        """Stop running Steps and close storage; open runs resume on the next start."""
        if self._started:
            self._started = False
            await self._services.close()

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def clock(self) -> Clock:
        """Return the clock the engine reads time from."""
        return self._services.clock

    @property
    def recovered_steps(self) -> int:
        """Return how many pending Steps the last start resumed from the database."""
        return self._services.recovered_steps

    async def check_database(self) -> None:
        """Return once the database answers a statement; raise UnavailableError while it
        cannot be reached or does not answer in time (what a readiness probe asks)."""
        await self._services.database.ping()

    async def purge_closed_runs(self) -> int:
        """Purge the runs closed longer than the retention period ago; return how many went.

        The engine also does this on its own every ``retention_check_interval``.
        """
        retention = self._services.retention
        return 0 if retention is None else await retention.purge()

    # -- Flows ----------------------------------------------------------------------------------

    async def start_flow(
        self,
        flow: FlowRef,
        flow_id: str,
        input: Any = None,
        options: StartFlowOptions | None = None,
    ) -> StartFlowResult:
        """Start a run of ``flow`` with ``input``; initial Attributes commit with the start.

        ``options`` choose the ID reuse policy, a Flow timeout and a request ID that makes the
        start idempotent. Raises FlowAlreadyStartedError when the policy refuses a new run.
        """
        return await self._services.starter.start(flow, flow_id, input, options)

    async def describe_flow(self, flow_id: str, run_id: str | None = None) -> FlowInfo:
        """Return the latest (or given) run of ``flow_id`` with its search values."""
        return await self._services.flows.describe(flow_id, run_id)

    async def wait_for_flow(
        self, flow_id: str, run_id: str | None = None, wait_seconds: float = 0.0
    ) -> FlowResult:
        """Return the run's result, waiting up to ``wait_seconds`` (max 60) for it to close.

        A run still open when the wait ends is returned with status RUNNING.
        """
        return await self._services.flows.wait(flow_id, run_id, wait_seconds)

    async def stop_flow(
        self,
        flow_id: str,
        stop_type: StopType | str = StopType.CANCEL,
        reason: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """Close the active run with CANCELED, TERMINATED or FAILED; return its run ID."""
        return await self._services.flows.stop(flow_id, stop_type, reason, run_id)

    # -- search and matches ---------------------------------------------------------------------

    async def search_flows(
        self,
        query: str = "",
        page_size: int = 100,
        page_token: str = "",
        *,
        flow_type: str | None = None,
    ) -> SearchPage:
        """Return one page of the runs (open and closed, every run of a Flow ID) matching
        ``query``, newest first unless it says ``ORDER BY``.

        Read-your-writes: index rows commit with their Attribute writes. ``flow_type`` confines
        the search to one Flow type, combined with the parsed query so no filter can widen it.
        Pass the returned ``next_page_token`` with the same query for the next page.
        """
        return await self._services.flows.search(query, page_size, page_token, flow_type)

    async def wait_for_attribute_match(
        self,
        flow_id: str,
        name: str,
        operator: MatchOperator | str,
        value: Any,
        *,
        instance: str | None = None,
        wait_seconds: float = 0.0,
    ) -> AttributeMatch:
        """Wait up to ``wait_seconds`` (max 60) until an Attribute, or one AttributeMap
        ``instance``, of the Flow's active run compares true with ``value``.

        Returns the matched current value as soon as a commit makes the comparison true, or
        ``matched=False`` when the wait ends first; a missing value never matches. GT, GE, LT
        and LE compare int and double values only. Raises FlowNotActiveOrNotFoundError when the
        Flow has no active run (or its run closes without a match).
        """
        return await self._services.matches.wait(
            flow_id, name, operator, value, instance=instance, wait_seconds=wait_seconds
        )

    # -- RPCs -----------------------------------------------------------------------------------

    async def invoke_rpc(
        self,
        rpc: Any,
        flow_id: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        options: RPCInvokeOptions | None = None,
        flow_type: str | None = None,
    ) -> Any:
        """Invoke an RPC on the Flow's current (or given) run and return its output.

        ``rpc`` is a Flow's RPC method (``flow.register``), or its name as a string, in which
        case the Flow type is the run's, or ``flow_type`` when given: as with a method, a run
        of another type then raises FlowNotActiveOrNotFoundError. ``options`` add AttributeMap
        instance loads and locks chosen at call time, and may ask for lock conflicts to be
        retried for a while (``RPCInvokeOptions.lock_retry``).
        """
        return await self._services.rpcs.invoke_method(
            rpc, flow_id, input, run_id, options, flow_type
        )

    # -- Attributes -----------------------------------------------------------------------------

    async def get_attributes(
        self,
        flow_id: str,
        names: Iterable[str] = (),
        run_id: str | None = None,
        *,
        as_of_event_id: int | None = None,
    ) -> AttributeValues:
        """Read Attributes and map instances from one committed state, without locks.

        With no names, every singleton Attribute is read. Each value is decoded with its
        definition (bytes, datetimes, pydantic models and dataclasses come back as such), and
        the values are returned only once all of them decoded; unset names are absent. Reads
        the current run, or the latest when none is open.

        ``as_of_event_id`` reads the values as they were right after the commit that wrote
        that history event of the run (numbered from 1), from its change log: what a time
        travel to that event restores. Hard-delete values are never kept: they are absent.
        """
        return await self._services.attributes.get(
            flow_id, names, run_id, decoded=True, as_of_event_id=as_of_event_id
        )

    async def get_attributes_json(
        self,
        flow_id: str,
        names: Iterable[str] = (),
        run_id: str | None = None,
        *,
        as_of_event_id: int | None = None,
    ) -> AttributeValues:
        """Like :meth:`get_attributes`, with each value as its JSON data (what the REST API
        answers: bytes as ``{"$bytes": ...}``, datetimes as ISO-8601 text, models as objects)."""
        return await self._services.attributes.get(
            flow_id, names, run_id, as_of_event_id=as_of_event_id
        )

    async def set_attributes(
        self, flow_id: str, values: Mapping[str, Any], run_id: str | None = None
    ) -> tuple[str, str]:
        """Write Attributes of the active run (None deletes); returns (flow ID, run ID).

        On a closed run the only write allowed is the erase of hard-delete values: every value
        must be None, name a hard-delete Attribute, and still have a stored value.
        """
        return await self._services.attributes.set(flow_id, values, run_id)

    # -- time travel ----------------------------------------------------------------------------

    async def time_travel(self, flow_id: str, options: TimeTravelOptions) -> TimeTravelResult:
        """Take the Flow back to a point of its latest run and let it run again from there.

        ``options.run_id`` must be the Flow ID's latest run (else FailedPreconditionError),
        open or closed. An open run closes as TERMINATED in the travel's commit: its attempts
        are canceled and whatever they return later is discarded, its locks freed. The new
        run, now the latest, starts from the whole run state right after the point's commit:
        Attributes and AttributeMaps (hard-delete ones keep their one value per Flow ID),
        pending Channel messages with their IDs, pending Step executions in their phase at
        attempt 1 (re-entered executions keep their IDs, so SubFlows meet their children
        again under their reuse policy), and the run's input; a Flow timeout counts again
        from now. Unless ``skip_writes_reapply``, what RPCs and clients wrote, published and
        deleted after the point is applied again, in commit order, in the same commit.

        Its history begins with a copy of the run's events up to the point, then a
        TIME_TRAVELED event, then what was applied again. ``fork_to_flow_id`` creates the new
        run under that Flow ID instead (FlowAlreadyStartedError if it has a running run) and
        leaves this one untouched. A point the run does not have raises InvalidArgumentError
        naming the field; a Flow type that keeps no change log, FailedPreconditionError.
        """
        return await self._services.travel.travel(flow_id, options)

    async def time_travel_flows(
        self,
        query: str,
        to: TravelPoint,
        *,
        reason: str = "",
        skip_writes_reapply: bool = False,
        dry_run: bool = False,
        limit: int = 100,
    ) -> BulkTimeTravelResult:
        """Travel the latest runs a SearchFlows ``query`` matches (at most ``limit``, 1 to
        1000) back to ``to`` (BEGINNING or a Step type), each in a commit of its own.

        ``dry_run`` lists what would travel and changes nothing. A run that cannot travel
        (its Flow type never ran that Step type, say) is listed under ``failed`` with the
        error's code and detail; the others travel all the same.
        """
        return await self._services.travel.travel_many(
            query,
            to,
            reason=reason,
            skip_writes_reapply=skip_writes_reapply,
            dry_run=dry_run,
            limit=limit,
        )

    # -- Channels -------------------------------------------------------------------------------

    async def list_channels(self, flow_id: str, run_id: str | None = None) -> ChannelList:
        """Return every Channel and every non-empty ChannelMap instance of the current (or
        latest) run with its pending count."""
        return await self._services.channels.list_channels(flow_id, run_id)

    async def list_channel_messages(
        self,
        flow_id: str,
        channel: Channel[Any] | ChannelMap[Any] | str,
        *,
        instance: str | None = None,
        run_id: str | None = None,
        page_size: int = 100,
        page_token: str = "",
    ) -> ChannelMessagePage:
        """Return the pending messages of a Channel (or ChannelMap ``instance``) of the current
        (or latest) run, oldest first; pass ``next_page_token`` back for the next page."""
        return await self._services.channels.list_messages(
            flow_id, channel, instance, run_id, page_size, page_token
        )

    async def publish_to_channel(
        self,
        flow_id: str,
        channel: Channel[Any] | ChannelMap[Any] | str,
        value: Any,
        *,
        instance: str | None = None,
    ) -> str:
        """Publish ``value`` to a Channel (or ChannelMap ``instance``) of the Flow's active
        run and return the message's ID; waiting Steps see it at once."""
        return await self._services.channels.publish(flow_id, channel, value, instance)

    async def delete_channel_message(
        self,
        flow_id: str,
        channel: Channel[Any] | ChannelMap[Any] | str,
        message_id: str,
        *,
        instance: str | None = None,
    ) -> None:
        """Delete a pending message of the Flow's active run by ID; raises
        ChannelMessageNotFoundError when it is no longer pending."""
        await self._services.channels.delete(flow_id, channel, message_id, instance)

    # -- Streams (best effort, in memory: contents vanish when the process restarts) -----------

    async def write_stream(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        value: Any,
        *,
        source: str,
        flow_type: FlowRef | None = None,
    ) -> str:
        """Append ``value`` to a Flow's Stream as a client and return its resume token.

        Works whether or not the Flow exists or is still running. ``source`` must be
        non-empty; it is informational and may repeat. Raises ResourceExhaustedError when the
        Stream or the server is at capacity (trimming then makes room: retry shortly) and
        FailedPreconditionError when the Stream Store is disabled.
        """
        return await self._services.streams.write_client(flow_id, stream, value, source, flow_type)

    async def read_stream(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        resume_token: str = "",
        *,
        wait_seconds: float = 0.0,
        flow_type: FlowRef | None = None,
    ) -> StreamMessage[Any] | None:
        """Return the message after ``resume_token``, waiting up to ``wait_seconds`` (max 60).

        An empty token, or one older than the retained head, starts at the head. Returns None
        when no message arrived before the wait ended.
        """
        return await self._services.streams.read_client(
            flow_id, stream, resume_token, wait_seconds, flow_type
        )

    async def list_stream_messages(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        page_size: int | None = None,
        before_page_token: str = "",
        *,
        flow_type: FlowRef | None = None,
    ) -> StreamMessagePage[Any]:
        """Return retained messages newest first, without waiting.

        An empty token starts at the newest message; pass ``next_page_token`` unchanged for
        the next older page (empty on the last page). ``page_size`` must be between 1 and
        the store's ``max_read_messages`` (1000 by default); None asks for 100, or that
        maximum when it is smaller.
        """
        return await self._services.streams.list_client(
            flow_id, stream, page_size, before_page_token, flow_type
        )

    # -- history and registry -------------------------------------------------------------------

    async def get_flow_history(
        self, flow_id: str, run_id: str | None = None, page_size: int = 100, page_token: str = ""
    ) -> HistoryPage:
        """Return a page of the run's history, oldest first."""
        return await history_page(self._services.database, flow_id, run_id, page_size, page_token)

    async def list_pending_steps(self, flow_id: str, run_id: str | None = None) -> PendingSteps:
        """Return the run's pending Step executions, oldest first: each one's phase, attempt,
        due time and what it waits on (none once the run has closed)."""
        return await pending_steps(self._services.database, flow_id, run_id)

    def list_flow_types(self) -> list[FlowTypeDescription]:
        """Describe every registered Flow type: Steps, RPCs with JSON schemas, state, indexes
        (RPC timeouts as they apply on this engine, its default included)."""
        return self.registry.describe(self.config.default_rpc_timeout)

    async def stats(self) -> EngineStats:
        """Return the engine's load now: open runs by Flow type, pending and due Steps, the
        oldest due Step's wait, scheduled timers and the Stream Store's bytes."""
        now = to_micros(self._services.clock.now())
        counts = await load_counts(self._services.database, now)
        oldest = counts.oldest_due_at
        return EngineStats(
            open_runs=counts.open_runs,
            steps_pending=counts.steps_pending,
            steps_due=counts.steps_due,
            oldest_due_seconds=0.0 if oldest is None else max(0.0, (now - oldest) / 1_000_000),
            timers_scheduled=counts.timers_scheduled,
            stream_store_bytes=await self._services.streams.total_bytes(),
        )

    def _idle_probe(self) -> IdleProbe:
        """Return what tells whether the engine has work in hand (``engine.testing``)."""
        return self._services.workload

    def _announces_commits(self) -> bool:
        """Whether this process sends notices of its commits to other processes."""
        coordination = self._services.coordination
        return coordination is not None and not coordination.notifier.alone

    def _waiting_calls(self) -> tuple[int, int, int]:
        """Count the long-polling calls: (waitForFlow, WaitForAttributeMatch, readStream)."""
        services = self._services
        store = services.streams.store
        return (
            services.flows.waiting(),
            services.matches.waiting(),
            0 if store is None else store.readers_waiting(),
        )


if TYPE_CHECKING:

    def _an_engine_is_a_flow_client(eng: Engine) -> FlowClient:
        # mypy checks here that Engine has every call of FlowClient, with its signature.
        return eng
