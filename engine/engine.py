"""The Engine: lifecycle (open storage, recover, run Steps, close) and the async client API."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from engine import _codec
from engine._runtime.history_tokens import decode_history_token, encode_history_token
from engine._runtime.matches import wait_for_match
from engine._runtime.names import check_id, check_unicode, parse_key, parse_values, to_datetime
from engine._runtime.retention import Retention
from engine._runtime.rpcs import RPCExecutor
from engine._runtime.runtime import Runtime, new_id, state_key
from engine._runtime.scheduler import Scheduler, recover
from engine._storage import commits, reads
from engine._storage.blobs import BlobStore
from engine._storage.database import Database, DatabaseSettings
from engine._storage.records import (
    CANCELED,
    FAILED,
    PHASE_EXECUTE,
    PHASE_WAIT_FOR,
    TERMINATED,
    NewStep,
)
from engine._storage.search import queries as search
from engine._streams import StreamService
from engine.attribute import IndexType
from engine.clock import Clock, to_micros
from engine.config import EngineConfig
from engine.errors import (
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    InvalidArgumentError,
)
from engine.flow import RPC_MARKER, Flow, RPCDefinition
from engine.options import (
    IdReusePolicy,
    MatchOperator,
    RPCInvokeOptions,
    StartFlowOptions,
    StopType,
)
from engine.registry import FlowSpec, Registry, describe_registry
from engine.results import (
    AttributeMatch,
    AttributeValues,
    FlowInfo,
    FlowResult,
    HistoryEvent,
    HistoryPage,
    SearchPage,
    StartFlowResult,
    StepCompletion,
)
from engine.stream import Stream, StreamMessage, StreamMessagePage

MAX_WAIT_SECONDS = 60.0
MAX_FLOW_TIMEOUT = timedelta(days=3650)
_STOP_STATUS = {StopType.CANCEL: CANCELED, StopType.TERMINATE: TERMINATED, StopType.FAIL: FAILED}


class Engine:
    """Runs the Flows of a Registry on one database and serves the client API.

    Use ``async with Engine(registry, config):`` or call ``start()`` and ``close()``.
    """

    def __init__(self, registry: Registry, config: EngineConfig | None = None) -> None:
        self.registry = registry
        self.config = config or EngineConfig()
        self._db = Database(
            DatabaseSettings(
                url=self.config.database_url,
                sqlite_synchronous=self.config.sqlite_synchronous,
                max_batch=self.config.max_commit_batch,
            )
        )
        self._rt = Runtime(
            registry=registry,
            database=self._db,
            blobs=BlobStore(self.config.blob_dir),
            clock=self.config.clock,
            step_threads=self.config.step_threads,
        )
        self._scheduler = Scheduler(self._rt)
        self._rt.scheduler = self._scheduler
        self._rpcs = RPCExecutor(self._rt, self.config.rpc_threads)
        self._streams = StreamService(registry, self.config.streams, self.config.clock)
        self._scheduler.streams = self._streams
        self._started = False
        self._retention: Retention | None = None
        self.recovered_steps = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open storage, resume every open run, and start running Steps and timers."""
        await self._db.open()
        self._rt.timers.start()
        self.recovered_steps = await recover(self._rt, self._scheduler)
        if self.config.retention is not None:
            self._retention = Retention(
                self._rt,
                self.config.retention.total_seconds(),
                self.config.retention_check_interval.total_seconds(),
            )
            self._retention.start()
        self._started = True

    async def purge_closed_runs(self) -> int:
        """Purge the runs closed longer than the retention period ago; return how many went.

        The engine also does this on its own every ``retention_check_interval``.
        """
        if self.config.retention is None:
            return 0
        return await Retention(self._rt, self.config.retention.total_seconds(), 0).purge()

    async def close(self) -> None:
        """Stop running Steps and close storage; open runs resume on the next start."""
        if not self._started:
            return
        self._started = False
        self._streams.close()  # waiting Stream readers return now
        await self._scheduler.close()
        await self._rt.timers.stop()
        if self._retention is not None:
            await self._retention.stop()
        self._rpcs.close()
        await self._db.close()

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def clock(self) -> Clock:
        """Return the clock the engine reads time from."""
        return self._rt.clock

    # -- Flows ----------------------------------------------------------------------------------

    def _spec_of(self, flow: type[Flow[Any]] | Flow[Any] | str) -> FlowSpec:
        if isinstance(flow, str):
            return self.registry.spec(flow)
        cls = flow if isinstance(flow, type) else type(flow)
        return self.registry.spec(cls.flow_type())

    async def start_flow(
        self,
        flow: type[Flow[Any]] | Flow[Any] | str,
        flow_id: str,
        input: Any = None,
        options: StartFlowOptions | None = None,
    ) -> StartFlowResult:
        """Start a run of ``flow`` with ``input``; initial Attributes commit with the start."""
        spec = self._spec_of(flow)
        check_id(flow_id, "flowId")
        options = options or StartFlowOptions()
        if options.request_id is not None:
            check_id(options.request_id, "requestId")
        policy = IdReusePolicy(options.id_reuse_policy)
        if spec.start_step is None:
            if input is not None:
                raise InvalidArgumentError(
                    f"Flow type {spec.flow_type} has no start Step and takes a null input",
                    field="input",
                )
            value = None
        else:
            value = _codec.validate(spec.input_type, input, what="input", strict=False)
        timeout_at = None
        if options.timeout is not None:
            if (
                not isinstance(options.timeout, timedelta)
                or options.timeout <= timedelta(0)
                or options.timeout > MAX_FLOW_TIMEOUT
            ):
                raise InvalidArgumentError(
                    "timeout must be positive and at most 10 years", field="timeoutSeconds"
                )
            timeout_at = self._rt.now_us() + to_micros(options.timeout.total_seconds())
        initial = parse_values(spec, options.initial_attributes, "initialAttributes")
        run_id = new_id()
        start_step = None
        if spec.start_step is not None:
            start_spec = spec.steps[spec.start_step]
            start_step = NewStep(
                id=new_id(),
                step_type=spec.start_step,
                input=_codec.encode(value),
                phase=PHASE_WAIT_FOR if start_spec.has_wait_for else PHASE_EXECUTE,
            )
        writes = await self._rt.stage_writes(spec, flow_id, initial)
        # An unset initial value is simply not written (a hard-delete one was erased above).
        writes = [w for w in writes if w.value is not None or w.blob]
        found_run, started, terminated = await self._db.write(
            commits.start_run(
                flow_id=flow_id,
                flow_type=spec.flow_type,
                run_id=run_id,
                input=_codec.encode(value),
                request_id=options.request_id,
                id_reuse_policy=policy.value,
                ignore_already_started=options.ignore_already_started,
                timeout_at=timeout_at,
                writes=writes,
                start_step=start_step,
                now=self._rt.now_us(),
            )
        )
        if terminated is not None:
            self._rt.after_commit(terminated, flow_id, spec.flow_type)
        if started:
            if timeout_at is not None:
                self._rt.schedule_timeout(run_id, flow_id, spec.flow_type, timeout_at)
            if start_step is not None:
                self._scheduler.submit_new(
                    start_step, run_id=run_id, flow_id=flow_id, flow_type=spec.flow_type
                )
        return StartFlowResult(flow_id, found_run, started)

    async def describe_flow(self, flow_id: str, run_id: str | None = None) -> FlowInfo:
        """Return the latest (or given) run of ``flow_id`` with its search values."""
        found = await search.load_flow_info(self._db.reader(), flow_id, run_id)
        if found is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="describeFlow"
            )
        return _flow_info(found)

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
        if (
            isinstance(page_size, bool)
            or not isinstance(page_size, int)
            or not (1 <= page_size <= 1000)
        ):
            raise InvalidArgumentError("pageSize must be between 1 and 1000", field="pageSize")
        result = await search.search_runs(
            self._db.reader(),
            query,
            self._index_key_types(),
            page_size=page_size,
            page_token=page_token or "",
            flow_type=flow_type,
        )
        return SearchPage([_flow_info(found) for found in result.runs], result.next_page_token)

    def _index_key_types(self) -> dict[str, IndexType]:
        return {
            state.index_key: state.index.type
            for spec in self.registry.specs()
            for state in spec.states.values()
            if state.index is not None and state.index_key is not None
        }

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
        check_id(flow_id, "flowId")
        return await wait_for_match(
            self._rt, flow_id, name, operator, value, instance=instance, wait_seconds=wait_seconds
        )

    async def wait_for_flow(
        self, flow_id: str, run_id: str | None = None, wait_seconds: float = 0.0
    ) -> FlowResult:
        """Return the run's result, waiting up to ``wait_seconds`` (max 60) for it to close."""
        if not 0 <= wait_seconds <= MAX_WAIT_SECONDS:
            raise InvalidArgumentError("waitSeconds must be between 0 and 60", field="waitSeconds")
        db = self._db
        deadline = asyncio.get_running_loop().time() + wait_seconds
        while True:
            run = await reads.load_run(db, flow_id, run_id)
            if run is None:
                raise FlowNotFoundError(
                    f"Flow {flow_id} was not found", flow_id=flow_id, operation="waitForFlow"
                )
            remaining = deadline - asyncio.get_running_loop().time()
            if not run.is_running or remaining <= 0:
                break
            event = self._rt.closed_event(run.run_id)
            # The run may have closed between the read and the event's creation: look again
            # now that a close can no longer be missed.
            run_id = run.run_id
            again = await reads.load_run(db, flow_id, run_id)
            if again is not None and not again.is_running:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)
        completions = [
            StepCompletion(step_type, step_id, None if out is None else json.loads(out))
            for step_type, step_id, out in await reads.completions(db, run.run_id)
        ]
        return FlowResult(
            run.flow_id, run.run_id, run.status, completions, run.error_type, run.error_message
        )

    async def stop_flow(
        self,
        flow_id: str,
        stop_type: StopType | str = StopType.CANCEL,
        reason: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """Close the active run with CANCELED, TERMINATED or FAILED; return its run ID."""
        try:
            status = _STOP_STATUS[StopType(stop_type)]
        except ValueError:
            raise InvalidArgumentError(
                "type must be CANCEL, TERMINATE or FAIL", field="type"
            ) from None
        result = await self._db.write(
            commits.stop_run(
                flow_id=flow_id,
                run_id=run_id,
                status=status,
                reason=reason,
                now=self._rt.now_us(),
            )
        )
        assert result is not None
        run = await reads.load_run(self._db, flow_id, result.run_id)
        self._rt.after_commit(result, flow_id, run.flow_type if run else "")
        stopped: str = result.run_id
        return stopped

    # -- RPCs -----------------------------------------------------------------------------------

    async def invoke_rpc(
        self,
        rpc: Any,
        flow_id: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        options: RPCInvokeOptions | None = None,
    ) -> Any:
        """Invoke an RPC on the Flow's current (or given) run and return its output.

        ``rpc`` is a Flow's RPC method (``flow.register``), or its name as a string, in which
        case the Flow type is the run's.
        """
        check_id(flow_id, "flowId")
        if run_id is not None:
            check_id(run_id, "runId")
        if isinstance(rpc, str):
            return await self._rpcs.invoke(flow_id, rpc, input, run_id=run_id, options=options)
        definition = getattr(rpc, RPC_MARKER, None)
        owner = getattr(rpc, "__self__", None)
        if not isinstance(definition, RPCDefinition) or not isinstance(owner, Flow):
            raise InvalidArgumentError(
                f"{rpc!r} is not an RPC method of a registered Flow instance", field="rpc"
            )
        return await self._rpcs.invoke(
            flow_id,
            definition.name,
            input,
            flow_type=type(owner).flow_type(),
            run_id=run_id,
            options=options,
        )

    # -- Attributes -----------------------------------------------------------------------------

    async def get_attributes(
        self, flow_id: str, names: Iterable[str] = (), run_id: str | None = None
    ) -> AttributeValues:
        """Read Attributes and map instances from one committed state, without locks.

        With no names, every singleton Attribute is read. Values are JSON data; unset names are
        absent. Reads the current run, or the latest when none is open.
        """
        check_id(flow_id, "flowId")
        wanted = list(dict.fromkeys(names))
        for name in wanted:
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError("name: names must be non-empty strings", field="name")
            check_unicode(name, "name")
        # One read: the keys are split as written, then checked against the run's Flow type.
        snapshot = await self._rt.snapshot(
            flow_id,
            run_id,
            names=[n for n in wanted if "/" not in n] if wanted else None,
            instances=[(n.partition("/")[0], n.partition("/")[2]) for n in wanted if "/" in n],
        )
        if snapshot is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="getAttributes"
            )
        if wanted:
            spec = self.registry.spec(snapshot.run.flow_type)
            for name in wanted:
                parse_key(spec, name, "name")
        texts = await self._rt.resolve_texts(flow_id, snapshot)
        values = {state_key(n, i): json.loads(text) for (n, i), text in sorted(texts.items())}
        return AttributeValues(flow_id, snapshot.run.run_id, values)

    async def set_attributes(
        self, flow_id: str, values: Mapping[str, Any], run_id: str | None = None
    ) -> tuple[str, str]:
        """Write Attributes of the active run (None deletes); returns (flow ID, run ID).

        On a closed run the only write allowed is the erase of hard-delete values: every value
        must be None, name a hard-delete Attribute, and still have a stored value.
        """
        check_id(flow_id, "flowId")
        run = await reads.load_run(self._db, flow_id, run_id)
        if run is None:
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="setAttributes"
            )
        spec = self.registry.spec(run.flow_type)
        parsed = parse_values(spec, values, "values")
        if not parsed:
            raise InvalidArgumentError("values must name at least one Attribute", field="values")
        erase = not run.is_running
        if erase:
            for (name, instance), value in parsed.items():
                state = spec.states[name]
                if (
                    value is not None
                    or not state.hard_delete_on_null
                    or not await asyncio.to_thread(
                        self._rt.blobs.exists, flow_id, state_key(name, instance)
                    )
                ):
                    raise FlowNotActiveOrNotFoundError(
                        f"Flow {flow_id} run {run.run_id} is closed; only the erase (null) of "
                        "stored hard-delete values is allowed",
                        flow_id=flow_id,
                        operation="setAttributes",
                    )
        keys = [state_key(n, i) for n, i in parsed]
        owner = new_id()
        if not erase:
            # A client write must not slip under a Step's or an RPC's lock.
            self._rt.locks.acquire_for_rpc(flow_id, keys, owner)
        try:
            writes = await self._rt.stage_writes(spec, flow_id, parsed)
            await self._db.write(
                commits.set_attributes(
                    flow_id=flow_id,
                    run_id=run.run_id,
                    writes=writes,
                    now=self._rt.now_us(),
                    closed_erase=erase,
                )
            )
            self._rt.matches.notify(run.run_id, writes)
        finally:
            self._rt.locks.release(flow_id, owner)
        return flow_id, run.run_id

    # -- Streams (best effort, in memory: contents vanish when the process restarts) -----------

    def _stream(
        self, stream: Stream[Any] | str, flow_type: type[Flow[Any]] | Flow[Any] | str | None
    ) -> tuple[str, Stream[Any]]:
        chosen = None if flow_type is None else self._spec_of(flow_type).flow_type
        return self._streams.resolve(stream, chosen)

    async def write_stream(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        value: Any,
        *,
        source: str,
        flow_type: type[Flow[Any]] | Flow[Any] | str | None = None,
    ) -> str:
        """Append ``value`` to a Flow's Stream as a client and return its resume token.

        Works whether or not the Flow exists or is still running. ``source`` must be
        non-empty; it is informational and may repeat. Raises ResourceExhaustedError when the
        Stream or the server is at capacity (trimming then makes room: retry shortly) and
        FailedPreconditionError when the Stream Store is disabled.
        """
        kind, declared = self._stream(stream, flow_type)
        check_id(flow_id, "flowId")
        return self._streams.write(kind, declared, flow_id, value, source)

    async def read_stream(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        resume_token: str = "",
        *,
        wait_seconds: float = 0.0,
        flow_type: type[Flow[Any]] | Flow[Any] | str | None = None,
    ) -> StreamMessage[Any] | None:
        """Return the message after ``resume_token``, waiting up to ``wait_seconds`` (max 60).

        An empty token, or one older than the retained head, starts at the head. Returns None
        when no message arrived before the wait ended.
        """
        kind, declared = self._stream(stream, flow_type)
        check_id(flow_id, "flowId")
        return await self._streams.read(kind, declared, flow_id, resume_token, wait_seconds)

    async def list_stream_messages(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        page_size: int = 100,
        before_page_token: str = "",
        *,
        flow_type: type[Flow[Any]] | Flow[Any] | str | None = None,
    ) -> StreamMessagePage[Any]:
        """Return retained messages newest first, without waiting.

        An empty token starts at the newest message; pass ``next_page_token`` unchanged for
        the next older page (empty on the last page). ``page_size`` must be between 1 and
        the store's ``max_read_messages`` (1000 by default).
        """
        kind, declared = self._stream(stream, flow_type)
        check_id(flow_id, "flowId")
        return self._streams.list(kind, declared, flow_id, page_size, before_page_token)

    # -- history and registry -------------------------------------------------------------------

    async def get_flow_history(
        self, flow_id: str, run_id: str | None = None, page_size: int = 100, page_token: str = ""
    ) -> HistoryPage:
        """Return a page of the run's history, oldest first."""
        if not 1 <= page_size <= 1000:
            raise InvalidArgumentError("pageSize must be between 1 and 1000", field="pageSize")
        run = await reads.load_run(self._db, flow_id, run_id)
        if run is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="getFlowHistory"
            )
        after, seen = decode_history_token(page_token, run.run_id)
        rows = await reads.history(self._db, run.run_id, after, page_size + 1)
        more = len(rows) > page_size
        rows = rows[:page_size]
        # Events are numbered 1, 2, ... within their run, as Temporal and Dex users expect.
        events = [
            HistoryEvent(seen + n, kind, to_datetime(at) or datetime.now(UTC), json.loads(details))
            for n, (_row_id, kind, at, details) in enumerate(rows, start=1)
        ]
        token = encode_history_token(run.run_id, rows[-1][0], seen + len(rows)) if more else ""
        return HistoryPage(flow_id, run.run_id, events, token)

    def list_flow_types(self) -> list[dict[str, Any]]:
        """Describe every registered Flow type: Steps, RPCs with JSON schemas, state, indexes."""
        return describe_registry(self.registry)


def _flow_info(found: search.FoundRun) -> FlowInfo:
    return FlowInfo(
        found.flow_id,
        found.run_id,
        found.flow_type,
        found.status,
        to_datetime(found.started_at) or datetime.now(UTC),
        to_datetime(found.closed_at),
        found.indexed,
    )
