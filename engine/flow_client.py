"""FlowClient: the calls an application makes of dexlite, in process or over HTTP.

:class:`engine.Engine` satisfies it in process; ``app.client.Client`` satisfies it over the
REST API. Code written against a FlowClient (the bundled examples' routes, an application's
adapters) runs unchanged either way. The signatures are the Engine's; lifecycle, statistics
and maintenance calls (``start``, ``close``, ``stats``, ``purge_closed_runs``) are not part
of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

from engine.channel import Channel, ChannelMap
from engine.flow import Flow
from engine.options import MatchOperator, RPCInvokeOptions, StartFlowOptions, StopType
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
from engine.schedule import (
    BackfillResult,
    ScheduleDescription,
    SchedulePage,
    ScheduleSpec,
    ScheduleTriggerResult,
)
from engine.stream import Stream, StreamMessage, StreamMessagePage
from engine.travel import BulkTimeTravelResult, TimeTravelOptions, TimeTravelResult, TravelPoint

FlowRef = type[Flow[Any]] | Flow[Any] | str
ChannelRef = Channel[Any] | ChannelMap[Any] | str


class FlowClient(Protocol):
    """The application-facing calls of dexlite; see :class:`engine.Engine` for each one."""

    async def start_flow(
        self,
        flow: FlowRef,
        flow_id: str,
        input: Any = None,
        options: StartFlowOptions | None = None,
    ) -> StartFlowResult:
        """Start a run of ``flow`` (startFlow)."""
        ...

    async def describe_flow(self, flow_id: str, run_id: str | None = None) -> FlowInfo:
        """Describe the latest (or given) run (describeFlow)."""
        ...

    async def wait_for_flow(
        self, flow_id: str, run_id: str | None = None, wait_seconds: float = 0.0
    ) -> FlowResult:
        """Return the run's result, waiting for it to close (waitForFlow)."""
        ...

    async def stop_flow(
        self,
        flow_id: str,
        stop_type: StopType | str = StopType.CANCEL,
        reason: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """Close the active run (stopFlow); return its run ID."""
        ...

    async def search_flows(
        self,
        query: str = "",
        page_size: int = 100,
        page_token: str = "",
        *,
        flow_type: str | None = None,
    ) -> SearchPage:
        """Return a page of runs matching ``query`` (searchFlows)."""
        ...

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
        """Wait until an Attribute compares true with ``value`` (waitForAttributeMatch)."""
        ...

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
        """Invoke an RPC on the Flow's running run and return its output (invokeRpc)."""
        ...

    async def get_attributes(
        self,
        flow_id: str,
        names: Iterable[str] = (),
        run_id: str | None = None,
        *,
        as_of_event_id: int | None = None,
    ) -> AttributeValues:
        """Read Attribute values, decoded by their definitions (getAttributes)."""
        ...

    async def set_attributes(
        self, flow_id: str, values: Mapping[str, Any], run_id: str | None = None
    ) -> tuple[str, str]:
        """Write Attribute values from outside (setAttributes); return (flow ID, run ID)."""
        ...

    async def list_channels(self, flow_id: str, run_id: str | None = None) -> ChannelList:
        """List the run's Channels with their pending counts (listChannels)."""
        ...

    async def list_channel_messages(
        self,
        flow_id: str,
        channel: ChannelRef,
        *,
        instance: str | None = None,
        run_id: str | None = None,
        page_size: int = 100,
        page_token: str = "",
    ) -> ChannelMessagePage:
        """Return pending messages of a Channel, oldest first (listChannelMessages)."""
        ...

    async def publish_to_channel(
        self, flow_id: str, channel: ChannelRef, value: Any, *, instance: str | None = None
    ) -> str:
        """Publish to a Channel of the running run; return the message ID (publishToChannel)."""
        ...

    async def delete_channel_message(
        self, flow_id: str, channel: ChannelRef, message_id: str, *, instance: str | None = None
    ) -> None:
        """Delete a pending Channel message (deleteChannelMessage)."""
        ...

    async def write_stream(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        value: Any,
        *,
        source: str,
        flow_type: FlowRef | None = None,
    ) -> str:
        """Write to a Stream; return the message's resume token (writeStream)."""
        ...

    async def read_stream(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        resume_token: str = "",
        *,
        wait_seconds: float = 0.0,
        flow_type: FlowRef | None = None,
    ) -> StreamMessage[Any] | None:
        """Return the message after ``resume_token``, waiting for one (readStream)."""
        ...

    async def list_stream_messages(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        page_size: int | None = None,
        before_page_token: str = "",
        *,
        flow_type: FlowRef | None = None,
    ) -> StreamMessagePage[Any]:
        """Return a page of a Stream's messages, newest first (listStreamMessages)."""
        ...

    async def get_flow_history(
        self, flow_id: str, run_id: str | None = None, page_size: int = 100, page_token: str = ""
    ) -> HistoryPage:
        """Return a page of the run's history, oldest first (getFlowHistory)."""
        ...

    async def list_pending_steps(self, flow_id: str, run_id: str | None = None) -> PendingSteps:
        """Return the run's pending Step executions (listPendingSteps)."""
        ...

    def list_flow_types(self) -> list[FlowTypeDescription]:
        """Describe every Flow type served (listFlowTypes)."""
        ...

    async def time_travel(self, flow_id: str, options: TimeTravelOptions) -> TimeTravelResult:
        """Take the Flow's latest run back to a point (timeTravelFlow)."""
        ...

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
        """Take the latest run of every Flow ``query`` matches back (timeTravelFlows)."""
        ...

    async def create_schedule(self, spec: ScheduleSpec) -> ScheduleDescription:
        """Create a Schedule (createSchedule)."""
        ...

    async def describe_schedule(self, schedule_id: str) -> ScheduleDescription:
        """Describe a Schedule (describeSchedule)."""
        ...

    async def list_schedules(self, page_size: int = 100, page_token: str = "") -> SchedulePage:
        """Return a page of Schedules by ID (listSchedules)."""
        ...

    async def update_schedule(self, spec: ScheduleSpec) -> ScheduleDescription:
        """Replace a Schedule's spec (updateSchedule)."""
        ...

    async def pause_schedule(self, schedule_id: str, note: str = "") -> ScheduleDescription:
        """Pause a Schedule with a note (pauseSchedule)."""
        ...

    async def unpause_schedule(self, schedule_id: str, note: str = "") -> ScheduleDescription:
        """Unpause a Schedule with a note (unpauseSchedule)."""
        ...

    async def trigger_schedule(self, schedule_id: str) -> ScheduleTriggerResult:
        """Start one action now under the overlap policy (triggerSchedule)."""
        ...

    async def backfill_schedule(
        self, schedule_id: str, start: datetime, end: datetime
    ) -> BackfillResult:
        """Act on every scheduled time in [start, end) (backfillSchedule)."""
        ...

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete a Schedule (deleteSchedule)."""
        ...

    async def skip_timers(
        self, flow_id: str, step_execution_id: str, *, run_id: str | None = None
    ) -> int:
        """Fire now the Timers a pending Step execution waits on (skipTimers)."""
        ...
