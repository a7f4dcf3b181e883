"""Durable waits on Channel conditions: the condition tree as JSON data, when it is met, and the
rows that keep a Step execution's wait (inside the calling unit's transaction, never committing).

A Step whose ``wait_for`` waits on Channels stores its Wait as a tree (see ``spec``) with the
wait's start time. Whether it is met is decided from the queues' pending counts and the time
alone, inside the commit that consumes the messages, so the decision and the consumption are
one transaction.

Nodes: ``{"mode": "ALL" | "ANY" | "SKIP", "conditions": [...]}``, ``{"timer": µs}``,
``{"channel": name, "instance": key, "atLeast": n, "atMost": m | null}`` and
``{"subflow": index, "flowType": ..., "flowId": ..., "runId": ...}`` (the child run it waits
for, known once the commit that begins the wait started or attached it).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from engine._storage import tables as t
from engine._storage.prepared import Prepared
from engine._storage.records import Phase, QueuedStep, StepState
from engine._storage.rows import requeue_step

Queue = tuple[str, str]
Take = list[tuple[Queue, int]]

#: Order of kinds when several conditions of an ANY are ready at once.
_TIMER, _CHANNEL, _SUBFLOW = 0, 1, 2


def queues(spec: dict[str, Any]) -> set[Queue]:
    """Return every queue (channel, instance) the wait has a condition on."""
    found: set[Queue] = set()

    def walk(node: dict[str, Any]) -> None:
        if "channel" in node:
            found.add((node["channel"], node["instance"]))
        for child in node.get("conditions", ()):
            walk(child)

    walk(spec["root"])
    return found


def subflows(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the SubFlow nodes of the wait, in index order."""
    found: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        if "subflow" in node:
            found.append(node)
        for child in node.get("conditions", ()):
            walk(child)

    walk(spec["root"])
    return sorted(found, key=lambda node: node["subflow"])


def deadlines(spec: dict[str, Any]) -> list[int]:
    """Return the times (µs) at which a Timer of the wait becomes ready, earliest first."""
    found: list[int] = []

    def walk(node: dict[str, Any]) -> None:
        if "timer" in node:
            found.append(spec["startedAt"] + node["timer"])
        for child in node.get("conditions", ()):
            walk(child)

    walk(spec["root"])
    return sorted(found)


def plan(spec: dict[str, Any], counts: dict[Queue, int], closed: set[str], now: int) -> Take | None:
    """Return how many messages each queue gives up if the wait is met at ``now``, else None.

    ``counts`` are the pending counts of the wait's queues, ``closed`` the child runs of its
    SubFlows that have closed. An ANY takes its winner only: among the ready conditions,
    Timers, then Channels, then SubFlows, then argument order. An ALL takes from every
    condition; conditions on one queue first reserve their lower bounds, then take what more
    they may in argument order.
    """
    available = dict(counts)
    taken = _ready(spec["root"], available, _Moment(now, spec["startedAt"], closed))
    if taken is None:
        return None
    merged: dict[Queue, int] = {}
    for queue, count in taken:
        merged[queue] = merged.get(queue, 0) + count
    return [(queue, count) for queue, count in merged.items() if count]


class _Moment:
    """What readiness is judged against: the time, the wait's start, the closed child runs."""

    __slots__ = ("now", "started", "closed")

    def __init__(self, now: int, started: int, closed: set[str]) -> None:
        self.now = now
        self.started = started
        self.closed = closed


def _ready(node: dict[str, Any], available: dict[Queue, int], at: _Moment) -> Take | None:
    """Return what ``node`` takes when it is met, taking it from ``available``; else None."""
    if "timer" in node:
        return [] if at.now >= at.started + node["timer"] else None
    if "subflow" in node:
        return [] if node.get("runId") in at.closed else None
    if "channel" in node:
        queue = (node["channel"], node["instance"])
        pending = available.get(queue, 0)
        if pending < node["atLeast"]:
            return None
        take = pending if node["atMost"] is None else min(pending, node["atMost"])
        available[queue] = pending - take
        return [(queue, take)]
    conditions: list[dict[str, Any]] = node.get("conditions", [])
    if node["mode"] == "SKIP" or not conditions:
        return []
    if node["mode"] == "ALL":
        return _all(conditions, available, at)
    for index in sorted(range(len(conditions)), key=lambda i: (_rank(conditions[i]), i)):
        trial = dict(available)
        taken = _ready(conditions[index], trial, at)
        if taken is not None:
            available.update(trial)
            return taken
    return None


def _all(conditions: list[dict[str, Any]], available: dict[Queue, int], at: _Moment) -> Take | None:
    trial = dict(available)
    taken: list[list[Any]] = []
    channels: list[tuple[int, dict[str, Any]]] = []
    for node in conditions:
        if "channel" in node:
            queue = (node["channel"], node["instance"])
            if trial.get(queue, 0) < node["atLeast"]:
                return None
            trial[queue] = trial.get(queue, 0) - node["atLeast"]
            taken.append([queue, node["atLeast"]])
            channels.append((len(taken) - 1, node))
            continue
        nested = _ready(node, trial, at)
        if nested is None:
            return None
        taken.extend([queue, count] for queue, count in nested)
    for position, node in channels:
        queue = taken[position][0]
        room = trial[queue]
        if node["atMost"] is not None:
            room = min(room, node["atMost"] - taken[position][1])
        taken[position][1] += room
        trial[queue] -= room
    available.update(trial)
    return [(queue, count) for queue, count in taken]


def _rank(node: dict[str, Any]) -> int:
    if "timer" in node:
        return _TIMER
    if "channel" in node:
        return _CHANNEL
    if "subflow" in node:
        return _SUBFLOW
    children = node.get("conditions", [])
    return min((_rank(child) for child in children), default=_TIMER)


# -- the rows of a Step execution's wait ------------------------------------------------------

_se = t.step_executions
_sw = t.step_waits
_INSERT_WAIT = Prepared(insert(_sw))
_DELETE_WAIT = Prepared(delete(_sw).where(_sw.c.step_id == bindparam("step_id")))
_WAIT_SPEC = Prepared(select(_sw.c.spec).where(_sw.c.step_id == bindparam("step_id")))
_SET_CONSUMED = Prepared(
    update(_sw).where(_sw.c.step_id == bindparam("b_id")).values(consumed=bindparam("b_consumed"))
)
_STEP_PHASE = Prepared(select(_se.c.state, _se.c.phase).where(_se.c.id == bindparam("step_id")))


def start_wait(conn: Connection, step: QueuedStep, spec: str) -> None:
    """Record a Step execution's durable wait (replacing one a failed attempt left)."""
    _DELETE_WAIT.run(conn, {"step_id": step.id})
    _INSERT_WAIT.many(conn, [{"step_id": step.id, "run_id": step.run_id, "spec": spec}])


def waiting_spec(conn: Connection, step_id: str) -> str | None:
    """Return the wait spec of a Step execution still waiting, or None."""
    row = _STEP_PHASE.first(conn, {"step_id": step_id})
    if row is None or row.state != StepState.PENDING or row.phase != Phase.WAITING:
        return None
    row = _WAIT_SPEC.first(conn, {"step_id": step_id})
    return None if row is None else str(row.spec)


_SET_SPEC = Prepared(
    update(_sw).where(_sw.c.step_id == bindparam("b_id")).values(spec=bindparam("b_spec"))
)


def update_wait(conn: Connection, step: QueuedStep, spec: str) -> None:
    """Record what a wait has seen so far (children seen closed) in its spec."""
    _SET_SPEC.run(conn, {"b_id": step.id, "b_spec": spec})


def end_wait(conn: Connection, step: QueuedStep, consumed: str) -> None:
    """Record what a completed wait consumed and move the execution to ``execute``."""
    _SET_CONSUMED.run(conn, {"b_id": step.id, "b_consumed": consumed})
    requeue_step(conn, step)
