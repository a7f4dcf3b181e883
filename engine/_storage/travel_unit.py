"""Time travel as one commit unit: a run's state at a past commit becomes a new run.

The unit locks the Flow ID and its latest run (the run traveled must be it), resolves the
point to one commit ``c`` of that run, closes the run as TERMINATED if it is open (a fork leaves
it alone), and creates the new run from the state right after ``c``:

- its history begins with a copy of the run's events up to ``c`` (so every earlier point stays
  reachable from the new run), then one TIME_TRAVELED event;
- its change log begins with a copy of the run's log up to ``c``, and its Step executions
  with theirs as they were then: closed ones closed, pending ones pending again at attempt 1
  (a wait that had begun is entered again from its wait_for; an execute phase keeps what its
  wait consumed), under their own commit numbers, so the counters give re-entered executions
  the same IDs;
- its Attributes (hard-delete ones excepted: never logged) and pending Channel messages (same
  IDs) are those of the moment;
- then, unless skipped, what came from outside after ``c`` (RPCs' and clients' writes,
  publications and deletions) is applied again, in commit order, in this same commit.

The new run's own commits continue from ``c + 1`` (the travel's), so both the copied events and
the travel's commit keep their numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select

from engine._enums import HistoryEventType, IdReusePolicy, RunStatus
from engine._storage import channel_messages, past, restore, rows
from engine._storage import tables as t
from engine._storage.journal import DELETE, PUBLISH, WRITE, journal
from engine._storage.records import AttributeWrite, CommitResult, RunChange, StartRequest
from engine._storage.restore import Indexer
from engine._storage.units import journaled
from engine.errors import (
    FailedPreconditionError,
    FlowAlreadyStartedError,
    FlowNotFoundError,
    InvalidArgumentError,
)

TIME_TRAVELED = HistoryEventType.TIME_TRAVELED
WRITES_REAPPLIED = HistoryEventType.WRITES_REAPPLIED


@dataclass(frozen=True)
class Point:
    """A point of a run as storage resolves it (see ``engine.TravelPoint``).

    ``at`` is in microseconds; ``shown`` is the wire form of the point, for the history event.
    """

    kind: str
    event_id: int | None = None
    at: int | None = None
    at_datetime: datetime | None = None
    step_type: str | None = None
    step_execution_id: str | None = None
    execute: bool = False
    shown: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TravelRequest:
    """One travel: the run, the point, the new run's ID and what to apply again."""

    flow_id: str
    run_id: str
    point: Point
    new_run_id: str
    reason: str
    reapply: bool
    fork_to: str | None
    indexer: Indexer
    now: int
    #: Field names for errors, as the caller spells them (``to.eventId``, ...).
    prefix: str = "to."


@dataclass(frozen=True)
class TravelOutcome:
    """The new run, and the run it came from."""

    flow_id: str
    run_id: str
    previous_run_id: str


_RUN = select(t.runs).where(t.runs.c.run_id == bindparam("r"))
_HISTORY_COUNT = select(func.count()).select_from(t.history)
_LINK = select(t.subflow_links).where(t.subflow_links.c.child_run_id == bindparam("r"))


def time_travel(request: TravelRequest) -> Any:
    """Return the unit of ``request`` (its value is a :class:`TravelOutcome`)."""

    def unit(conn: Connection) -> CommitResult:
        return _travel(conn, request)

    return journaled(unit)


def _travel(conn: Connection, request: TravelRequest) -> CommitResult:
    target = request.fork_to or request.flow_id
    # Two Flow IDs are locked in one order everywhere, so two forks cannot deadlock.
    locked = {fid: rows.lock_latest_run(conn, fid) for fid in sorted({request.flow_id, target})}
    latest = locked[request.flow_id]
    if latest is None:
        raise FlowNotFoundError(
            f"Flow {request.flow_id} was not found", flow_id=request.flow_id, operation="timeTravel"
        )
    if latest.run_id != request.run_id:
        raise FailedPreconditionError(
            f"run {request.run_id} is not the latest run of Flow {request.flow_id} (the latest is "
            f"{latest.run_id}): only the latest run can travel",
            flow_id=request.flow_id,
            field="runId",
        )
    source = conn.execute(_RUN, {"r": request.run_id}).one()
    if not source.change_log:
        raise FailedPreconditionError(
            f"run {request.run_id} of Flow {request.flow_id} keeps no change log (its Flow "
            f"type {source.flow_type} opts out with keep_change_log = False, or the run began "
            "before the log existed): it cannot travel",
            flow_id=request.flow_id,
        )
    commit, execute_now = _resolve(conn, request, source)
    if request.fork_to is not None:
        occupied = locked[target]
        if occupied is not None and occupied.is_running:
            raise FlowAlreadyStartedError(
                f"Flow {target} is already running (run {occupied.run_id}): a fork needs a "
                "Flow ID with no running run",
                flow_id=target,
                run_id=occupied.run_id,
            )
    changes: list[RunChange] = []
    if request.fork_to is None and latest.is_running:
        canceled = rows.close_run(
            conn,
            request.run_id,
            RunStatus.TERMINATED,
            request.now,
            error_message=f"time travel: {request.reason}" if request.reason else "time travel",
            reason="time travel",
        )
        changes.append(
            RunChange(
                latest.flow_id,
                latest.flow_type,
                latest.run_id,
                ended_step_ids=canceled,
                closed_status=RunStatus.TERMINATED,
            )
        )
    changes.append(_new_run(conn, request, source, target, commit, execute_now, locked[target]))
    outcome = TravelOutcome(target, request.new_run_id, request.run_id)
    return CommitResult(tuple(changes), outcome)


def _resolve(conn: Connection, request: TravelRequest, source: Any) -> tuple[int, str | None]:
    """Return the commit the point names, and the execution restored in its execute phase
    although that commit left it before (None when none is)."""
    point, run_id, prefix = request.point, request.run_id, request.prefix
    if point.kind == "BEGINNING":
        return past.first_commit(conn, run_id), None
    if point.kind == "EVENT":
        assert point.event_id is not None
        return past.event_commit(conn, run_id, point.event_id, f"{prefix}eventId"), None
    if point.kind == "TIME":
        assert point.at is not None and point.at_datetime is not None
        until = source.closed_at if source.closed_at is not None else request.now
        found = past.commit_at(conn, run_id, point.at, until, f"{prefix}at", point.at_datetime)
        return found, None
    if point.kind == "STEP_TYPE":
        assert point.step_type is not None
        return past.step_type_commit(conn, run_id, point.step_type, f"{prefix}stepType"), None
    if point.kind == "STEP_EXECUTION":
        assert point.step_execution_id is not None
        commit, forced = past.execution_commit(
            conn,
            run_id,
            point.step_execution_id,
            point.execute,
            (f"{prefix}stepExecutionId", f"{prefix}method"),
        )
        return commit, point.step_execution_id if forced else None
    raise InvalidArgumentError(f"{prefix}kind: unknown point {point.kind}", field=f"{prefix}kind")


def _new_run(
    conn: Connection,
    request: TravelRequest,
    source: Any,
    target: str,
    commit: int,
    execute_now: str | None,
    occupied: rows.LatestRun | None,
) -> RunChange:
    """Create the new run from the state right after ``commit`` of the source run."""
    new, old, now = request.new_run_id, request.run_id, request.now
    timeout_at = (
        None if source.timeout_at is None else now + (source.timeout_at - source.started_at)
    )
    start = StartRequest(
        flow_id=target,
        flow_type=source.flow_type,
        run_id=new,
        input=source.input,
        request_id=None,
        id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE,
        ignore_already_started=False,
        timeout_at=timeout_at,
        writes=(),
        start_step=None,
        change_log=True,
    )
    # The travel is the new run's commit after the ones it copies.
    rows.insert_run(conn, start, now, commit=commit + 1)
    if occupied is None and not rows.claim_flow_id(conn, start):
        # A start created the fork's Flow ID after this unit found none: decide again under
        # the lock of its row.
        occupied = rows.lock_latest_run(conn, target)
        assert occupied is not None, "the Flow ID's row exists"
        if occupied.is_running:
            raise FlowAlreadyStartedError(
                f"Flow {target} is already running (run {occupied.run_id}): a fork needs a "
                "Flow ID with no running run",
                flow_id=target,
                run_id=occupied.run_id,
            )
    if occupied is not None:
        rows.point_flow_at(conn, start)
    restore.copy_history(conn, old, new, commit)
    restore.copy_log(conn, old, new, commit)
    if request.fork_to is None:
        link = conn.execute(_LINK, {"r": old}).first()
        if link is not None:
            conn.execute(
                insert(t.subflow_links),
                {**link._asdict(), "child_run_id": new},
            )
    writes = restore.restore_values(conn, old, new, commit, request.indexer, now)
    published = restore.restore_messages(conn, old, new, commit)
    queued = restore.restore_steps(
        conn,
        old,
        new,
        commit,
        flow_id=target,
        flow_type=source.flow_type,
        execute_now=execute_now,
    )
    details = {
        "previousRunId": old,
        "previousFlowId": request.flow_id,
        "to": request.point.shown,
        "reason": request.reason,
        "skipWritesReapply": not request.reapply,
    }
    rows.add_history(conn, new, [(TIME_TRAVELED, details)], now)
    if request.reapply:
        more, queues = _reapply(conn, request, old, new, commit)
        writes += more
        published |= queues
    return RunChange(
        flow_id=target,
        flow_type=source.flow_type,
        run_id=new,
        writes=tuple(writes),
        queued_steps=tuple(queued),
        started=True,
        timeout_at=timeout_at,
        published=tuple(sorted(published)),
    )


def _reapply(
    conn: Connection, request: TravelRequest, old: str, new: str, commit: int
) -> tuple[list[AttributeWrite], set[tuple[str, str]]]:
    """Apply again what came from outside after ``commit``, in commit order; return the
    writes and the queues that received messages."""
    lg = t.change_log
    found = conn.execute(
        select(lg)
        .where(lg.c.run_id == old, lg.c.commit_seq > commit, lg.c.external.is_(True))
        .order_by(lg.c.commit_seq, lg.c.pos)
    ).all()
    if not found:
        return [], set()
    positions = _event_positions(conn, old, commit, {row.commit_seq for row in found})
    log = journal(conn)
    log.external = True  # a later travel of the new run applies them again
    latest: dict[tuple[str, str], AttributeWrite] = {}
    published: set[tuple[str, str]] = set()
    events: dict[int, dict[str, Any]] = {}
    for row in found:
        event = events.setdefault(
            row.commit_seq,
            {
                "sourceEventId": positions.get(row.commit_seq),
                "attributes": [],
                "published": [],
                "deleted": [],
            },
        )
        key = f"{row.name}/{row.instance}" if row.instance else row.name
        if row.kind == WRITE:
            latest.pop((row.name, row.instance), None)
            latest[(row.name, row.instance)] = AttributeWrite(
                row.name,
                row.instance,
                row.value,
                index=request.indexer(row.name, row.instance, row.value),
            )
            event["attributes"].append(key)
        elif row.kind == PUBLISH:
            channel_messages.insert_messages(
                conn,
                new,
                [(row.name, row.instance, row.message_id, row.value)],
                request.now,
                published_at=[row.at],
            )
            published.add((row.name, row.instance))
            event["published"].append({"channel": key, "messageId": row.message_id})
        elif row.kind == DELETE and channel_messages.delete_message(
            conn, new, row.name, row.instance, row.message_id
        ):
            event["deleted"].append({"channel": key, "messageId": row.message_id})
    for event in events.values():
        event["attributes"] = sorted(set(event["attributes"]))
    writes = list(latest.values())
    rows.apply_writes(conn, new, writes, request.now)
    log.external = False
    rows.add_history(
        conn,
        new,
        [(WRITES_REAPPLIED, event) for _, event in sorted(events.items())],
        request.now,
    )
    return writes, published


def _event_positions(
    conn: Connection, run_id: str, after: int, commits: set[int]
) -> dict[int, int]:
    """Return the number (from 1) of the first event of each of ``commits`` in the run."""
    h = t.history
    before = conn.execute(
        _HISTORY_COUNT.where(h.c.run_id == run_id, h.c.commit_seq <= after)
    ).scalar_one()
    later = conn.execute(
        select(h.c.commit_seq).where(h.c.run_id == run_id, h.c.commit_seq > after).order_by(h.c.id)
    ).scalars()
    positions: dict[int, int] = {}
    for n, found in enumerate(later, start=before + 1):
        if found in commits and found not in positions:
            positions[found] = n
    return positions
