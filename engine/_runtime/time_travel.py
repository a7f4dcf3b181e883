"""Time travel: the client calls over ``_storage.travel`` (as-of reads are GetAttributes').

A travel is one commit unit (see ``_storage.travel``); its result goes to the commit listener
like any other: the old run's attempts stop and release their locks, its waiters wake, the new
run's pending executions are queued and its timeout armed. A travel by query travels each
matching latest run in a commit of its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine import _codec
from engine._ids import check_event_number, check_id, check_text, new_id, state_key
from engine._limits import check_page_size
from engine._runtime.committer import Committer
from engine._runtime.flows import FlowQueries
from engine._runtime.ports import Database
from engine._specs import FlowSpec
from engine._storage import reads
from engine._storage import travel_unit as storage
from engine._storage.indexes import index_write
from engine._storage.records import IndexWrite
from engine._storage.restore import Indexer
from engine.clock import Clock, to_micros
from engine.errors import (
    EngineError,
    FlowNotFoundError,
    FlowTypeNotFoundError,
    InvalidArgumentError,
)
from engine.registry import Registry
from engine.travel import (
    BulkTimeTravelResult,
    FlowRunRef,
    StepMethod,
    TimeTravelFailure,
    TimeTravelOptions,
    TimeTravelResult,
    TravelPoint,
    TravelPointKind,
)

#: A reason longer than this is refused (it goes into history and the run's error message).
MAX_REASON_LENGTH = 1000
#: What a travel by query takes at most, and by default.
MAX_BULK_LIMIT, DEFAULT_BULK_LIMIT = 1000, 100
_BULK_POINTS = (TravelPointKind.BEGINNING, TravelPointKind.STEP_TYPE)


class TimeTravel:
    """timeTravelFlow and timeTravelFlows."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        committer: Committer,
        flows: FlowQueries,
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._database = database
        self._committer = committer
        self._flows = flows
        self._clock = clock

    async def travel(self, flow_id: str, options: TimeTravelOptions) -> TimeTravelResult:
        """Travel the Flow's latest run back to a point (see ``Engine.time_travel``)."""
        check_id(flow_id, "flowId")
        if not isinstance(options, TimeTravelOptions):
            raise InvalidArgumentError("options must be TimeTravelOptions", field="options")
        check_id(options.run_id, "runId")
        reason = _reason(options.reason)
        if not isinstance(options.skip_writes_reapply, bool):
            raise InvalidArgumentError(
                "skipWritesReapply must be true or false", field="skipWritesReapply"
            )
        fork = options.fork_to_flow_id
        if fork is not None:
            check_id(fork, "forkToFlowId")
            if fork == flow_id:
                raise InvalidArgumentError(
                    "forkToFlowId must name another Flow ID than the one traveled",
                    field="forkToFlowId",
                )
        run = await reads.load_run(self._database, flow_id, options.run_id)
        if run is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} has no run {options.run_id}",
                flow_id=flow_id,
                operation="timeTravelFlow",
            )
        spec = self._spec(run.flow_type, flow_id)
        point = _point(spec, options.to)
        outcome: storage.TravelOutcome = (
            await self._committer.commit(
                storage.time_travel(
                    storage.TravelRequest(
                        flow_id=flow_id,
                        run_id=options.run_id,
                        point=point,
                        new_run_id=new_id(),
                        reason=reason,
                        reapply=not options.skip_writes_reapply,
                        fork_to=fork,
                        indexer=_indexer(spec),
                        now=to_micros(self._clock.now()),
                    )
                ),
                slow=True,
            )
        ).value
        return TimeTravelResult(outcome.flow_id, outcome.run_id, outcome.previous_run_id)

    async def travel_many(
        self,
        query: str,
        to: TravelPoint,
        *,
        reason: str,
        skip_writes_reapply: bool,
        dry_run: bool,
        limit: int,
    ) -> BulkTimeTravelResult:
        """Travel the latest runs ``query`` matches, each in its own commit (see
        ``Engine.time_travel_flows``)."""
        if not isinstance(to, TravelPoint) or to.kind not in _BULK_POINTS:
            raise InvalidArgumentError(
                "to.kind must be BEGINNING or STEP_TYPE for a travel by query", field="to.kind"
            )
        check_page_size(limit, "limit")
        _reason(reason)
        matched = await self._latest_matching(query, limit)
        if dry_run:
            return BulkTimeTravelResult(True, matched, [], [])
        traveled: list[TimeTravelResult] = []
        failed: list[TimeTravelFailure] = []
        for ref in matched:
            options = TimeTravelOptions(
                run_id=ref.run_id,
                to=to,
                reason=reason,
                skip_writes_reapply=skip_writes_reapply,
            )
            try:
                traveled.append(await self.travel(ref.flow_id, options))
            except EngineError as exc:  # the others travel all the same
                failed.append(TimeTravelFailure(ref.flow_id, ref.run_id, exc.code, exc.detail))
        return BulkTimeTravelResult(False, matched, traveled, failed)

    async def _latest_matching(self, query: str, limit: int) -> list[FlowRunRef]:
        """Return up to ``limit`` runs ``query`` matches that are their Flow ID's latest."""
        found: list[FlowRunRef] = []
        seen: set[str] = set()
        token = ""
        while len(found) < limit:
            page = await self._flows.search(query, 100, token, None)
            for info in page.flows:
                if info.flow_id in seen:
                    continue
                latest = await reads.load_run(self._database, info.flow_id)
                if latest is not None and latest.run_id == info.run_id:
                    seen.add(info.flow_id)
                    found.append(FlowRunRef(info.flow_id, info.run_id))
                    if len(found) == limit:
                        break
            token = page.next_page_token
            if not token:
                break
        return found

    def _spec(self, flow_type: str, flow_id: str) -> FlowSpec:
        try:
            return self._registry.spec(flow_type)
        except FlowTypeNotFoundError:
            raise FlowTypeNotFoundError(
                f"Flow {flow_id} is of type {flow_type}, which this engine does not register: "
                "it cannot travel here",
                flow_id=flow_id,
            ) from None


def _reason(reason: Any) -> str:
    if not isinstance(reason, str):
        raise InvalidArgumentError("reason must be a string", field="reason")
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidArgumentError(
            f"reason must be at most {MAX_REASON_LENGTH} characters", field="reason"
        )
    return check_text(reason, "reason")


def _point(spec: FlowSpec, to: Any) -> storage.Point:
    """Check a point against the Flow type and return storage's form of it."""
    if not isinstance(to, TravelPoint):
        raise InvalidArgumentError("to must be a TravelPoint", field="to")
    try:
        kind = TravelPointKind(to.kind)
    except ValueError:
        raise InvalidArgumentError(
            "to.kind must be BEGINNING, EVENT, TIME, STEP_TYPE or STEP_EXECUTION",
            field="to.kind",
        ) from None
    shown: dict[str, Any] = {"kind": kind.value}
    if kind == TravelPointKind.BEGINNING:
        return storage.Point(kind.value, shown=shown)
    if kind == TravelPointKind.EVENT:
        event = check_event_number(to.event_id, "to.eventId")
        return storage.Point(kind.value, event_id=event, shown=shown | {"eventId": event})
    if kind == TravelPointKind.TIME:
        at = to.at
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise InvalidArgumentError(
                "to.at must be a date and time with a time zone", field="to.at"
            )
        return storage.Point(
            kind.value,
            at=to_micros(at.timestamp()),
            at_datetime=at,
            shown=shown | {"at": at.isoformat()},
        )
    if kind == TravelPointKind.STEP_TYPE:
        name = to.step_type_name
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError("to.stepType must name a Step type", field="to.stepType")
        if check_text(name, "to.stepType") not in spec.steps:
            raise InvalidArgumentError(
                f"to.stepType: Flow type {spec.flow_type} has no Step type {name}",
                field="to.stepType",
            )
        return storage.Point(kind.value, step_type=name, shown=shown | {"stepType": name})
    execution = to.step_execution_id
    if not isinstance(execution, str) or not execution:
        raise InvalidArgumentError(
            "to.stepExecutionId must name a Step execution (<StepType>-<n>)",
            field="to.stepExecutionId",
        )
    check_text(execution, "to.stepExecutionId")
    try:
        method = StepMethod(to.method)
    except ValueError:
        raise InvalidArgumentError(
            "to.method must be WAIT_FOR or EXECUTE", field="to.method"
        ) from None
    return storage.Point(
        kind.value,
        step_execution_id=execution,
        execute=method == StepMethod.EXECUTE,
        shown=shown | {"stepExecutionId": execution, "method": method.value},
    )


def _indexer(spec: FlowSpec) -> Indexer:
    """Return the search value a restored or reapplied write sets, by its definition now."""

    def index(name: str, instance: str, text: str | None) -> IndexWrite | None:
        state = spec.states.get(name)
        if state is None or state.index is None or state.index_key is None:
            return None
        try:
            value = None if text is None else _codec.decode(state.value_type, text)
            return index_write(state.index_key, state.index.type, value, state_key(name, instance))
        except (ValueError, TypeError, EngineError):
            return None  # a value its definition no longer takes keeps its row, unindexed

    return index
