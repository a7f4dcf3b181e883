"""WaitForAttributeMatch: wait until a singleton Attribute or one AttributeMap instance satisfies a
scalar comparison.

Waiters are woken by the commit listener with the values each commit wrote: there is no polling
loop against the database. A waiter registers before it reads the current value, so a commit
cannot slip between the read and the wait unseen: it either is in the read or wakes the waiter.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from engine import _codec
from engine._ids import check_id
from engine._limits import check_wait_seconds
from engine._runtime.ports import Database
from engine._runtime.snapshots import Snapshots
from engine._specs import FlowSpec
from engine._storage import reads
from engine._storage.records import AttributeWrite, LoadPlan
from engine.attribute import _State, check_instance_key
from engine.errors import FlowNotActiveOrNotFoundError, InvalidArgumentError
from engine.options import MatchOperator
from engine.registry import Registry
from engine.results import AttributeMatch

_ORDERED = (MatchOperator.GT, MatchOperator.GE, MatchOperator.LT, MatchOperator.LE)
_NUMERIC_TYPES = (int, float)
_LOOSE_TYPES = (Any, object)

_MATCHED = "matched"
_CLOSED = "closed"


@dataclass(eq=False)
class _Waiter:
    key: tuple[str, str]
    predicate: Callable[[str], bool]
    future: asyncio.Future[tuple[str, str | None]] = field(repr=False)

    def offer(self, text: str | None) -> None:
        if text is not None and not self.future.done() and self.predicate(text):
            self.future.set_result((_MATCHED, text))

    def closed(self) -> None:
        if not self.future.done():
            self.future.set_result((_CLOSED, None))


class AttributeMatches:
    """The open WaitForAttributeMatch calls of this process, by run."""

    def __init__(self, registry: Registry, database: Database, snapshots: Snapshots) -> None:
        self._registry = registry
        self._database = database
        self._snapshots = snapshots
        self._by_run: dict[str, set[_Waiter]] = {}
        self._rereads: set[asyncio.Task[None]] = set()

    def waiting(self) -> int:
        """Return how many calls wait for a match no commit has given them yet."""
        return sum(
            not waiter.future.done() for waiters in self._by_run.values() for waiter in waiters
        )

    def notify(self, run_id: str, writes: Iterable[AttributeWrite], closed: bool = False) -> None:
        """Offer a commit's writes to the run's waiters; a closed run ends the others."""
        waiters = self._by_run.get(run_id)
        if not waiters:
            return
        latest: dict[tuple[str, str], str | None] = {}
        for w in writes:
            latest[(w.name, w.instance)] = None if w.blob else w.value
        for waiter in list(waiters):
            if waiter.key in latest:
                waiter.offer(latest[waiter.key])
            if closed:
                waiter.closed()

    def remote(
        self, flow_id: str, run_id: str, keys: Iterable[tuple[str, str]] | str, closed: bool
    ) -> None:
        """Another process's commit wrote ``keys`` (``"*"``: any) of ``run_id``: its waiters
        here read their value again, and the run's close ends them."""
        if closed:
            for waiter in list(self._by_run.get(run_id, ())):
                waiter.closed()
            return
        chosen = keys if keys == "*" else set(keys)
        for waiter in list(self._by_run.get(run_id, ())):
            if chosen == "*" or waiter.key in chosen:
                task = asyncio.get_running_loop().create_task(self._reread(flow_id, run_id, waiter))
                self._rereads.add(task)
                task.add_done_callback(self._rereads.discard)

    async def _reread(self, flow_id: str, run_id: str, waiter: _Waiter) -> None:
        name, instance = waiter.key
        plan = LoadPlan((), (), (waiter.key,)) if instance else LoadPlan((name,))
        snapshot = await self._snapshots.read(flow_id, run_id, plan)
        stored = None if snapshot is None else snapshot.values.get(waiter.key)
        waiter.offer(stored.value if stored is not None else None)

    def add(self, run_id: str, waiter: _Waiter) -> None:
        """Register a waiter on ``run_id``."""
        self._by_run.setdefault(run_id, set()).add(waiter)

    def remove(self, run_id: str, waiter: _Waiter) -> None:
        """Forget a waiter."""
        waiters = self._by_run.get(run_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._by_run[run_id]

    async def wait(
        self,
        flow_id: str,
        name: str,
        operator: MatchOperator | str,
        value: Any,
        *,
        instance: str | None,
        wait_seconds: float,
    ) -> AttributeMatch:
        """Wait until the Attribute (or map instance) of the Flow's active run matches.

        Returns the matched current value as soon as a commit makes the comparison true, or
        ``matched=False`` when the wait ends first; a missing value never matches.
        """
        check_id(flow_id, "flowId")
        check_wait_seconds(wait_seconds)
        try:
            op = MatchOperator(operator)
        except ValueError:
            raise InvalidArgumentError(
                "operator must be one of EQ, NE, GT, GE, LT, LE", field="operator"
            ) from None
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError("name must be a non-empty string", field="name")
        _check_value(value)
        run = await reads.load_run(self._database, flow_id)
        if run is None or not run.is_running:
            raise _not_active(flow_id)
        state, instance, target = _checked_target(
            self._registry.spec(run.flow_type), name, instance, op, value
        )
        key = (name, instance or "")
        waiter = _Waiter(
            key, make_predicate(state, op, target), asyncio.get_running_loop().create_future()
        )
        self.add(run.run_id, waiter)
        try:
            plan = LoadPlan((), (), (key,)) if state.is_map else LoadPlan((name,))
            snapshot = await self._snapshots.read(flow_id, run.run_id, plan)
            if snapshot is None or not snapshot.run.is_running:
                raise _not_active(flow_id)
            stored = snapshot.values.get(key)
            waiter.offer(stored.value if stored is not None else None)
            if not waiter.future.done():
                try:
                    await asyncio.wait_for(asyncio.shield(waiter.future), wait_seconds)
                except TimeoutError:
                    # A final read: a commit another process made may have gone unannounced.
                    last = await self._snapshots.read(flow_id, run.run_id, plan)
                    stored = None if last is None else last.values.get(key)
                    waiter.offer(stored.value if stored is not None else None)
                    if not waiter.future.done():
                        return AttributeMatch(False, None)
            outcome, text = waiter.future.result()
            if outcome == _CLOSED:
                raise _not_active(flow_id)
            assert text is not None
            return AttributeMatch(True, json.loads(text))
        finally:
            self.remove(run.run_id, waiter)


def _checked_target(
    spec: FlowSpec, name: str, instance: str | None, op: MatchOperator, value: Any
) -> tuple[_State[Any], str | None, Any]:
    """Check a match against the Flow type's declaration of ``name``; return that state, the
    instance key, and the value to compare with (read as the Attribute's type for EQ and NE).
    """
    state = spec.state(name)
    if state is None:
        raise InvalidArgumentError(
            f"Flow type {spec.flow_type} declares no Attribute or AttributeMap named {name!r}",
            field="name",
        )
    if state.hard_delete_on_null:
        raise InvalidArgumentError(
            f"{name!r} is a hard-delete Attribute; WaitForAttributeMatch rejects it",
            field="name",
        )
    if state.is_map:
        instance = check_instance_key(instance, "instance")
    elif instance not in (None, ""):
        raise InvalidArgumentError(
            f"{name!r} is an Attribute, not an AttributeMap; omit instance", field="instance"
        )
    if op in _ORDERED:
        numeric = state.value_type in _NUMERIC_TYPES or state.value_type in _LOOSE_TYPES
        if not numeric or _kind(value) != "number":
            raise InvalidArgumentError(
                f"{op.value} compares int and double values only; {name!r} holds "
                f"{getattr(state.value_type, '__name__', state.value_type)} and value is "
                f"{_kind(value)}",
                field="operator",
            )
    # Ordered operators compare numbers as numbers (count > 9.5 is meaningful for an int);
    # EQ and NE compare with the value read as the Attribute's type.
    loose = op in _ORDERED or state.value_type in _LOOSE_TYPES
    target = value if loose else _codec.validate_client_value(state.value_type, value, what="value")
    return state, instance, target


def _not_active(flow_id: str) -> FlowNotActiveOrNotFoundError:
    return FlowNotActiveOrNotFoundError(
        f"Flow {flow_id} has no active run", flow_id=flow_id, operation="waitForAttributeMatch"
    )


def _check_value(value: Any) -> None:
    if value is None:
        raise InvalidArgumentError(
            "value must be a string, number or boolean; a missing value never matches",
            field="value",
        )
    if isinstance(value, dict | list | tuple):
        raise InvalidArgumentError(
            "value must be a scalar (string, number or boolean), not an object or a list",
            field="value",
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgumentError("value must be a finite number", field="value")
    if not isinstance(value, str | int | float | bool):
        raise InvalidArgumentError("value must be a string, number or boolean", field="value")
    _codec.to_jsonable(value)  # int64 range


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def make_predicate(
    state: _State[Any], operator: MatchOperator, target: Any
) -> Callable[[str], bool]:
    """Return a test of a stored value's JSON text against ``operator`` and ``target``."""
    loose = state.value_type in _LOOSE_TYPES

    def predicate(text: str) -> bool:
        try:
            current = (
                _codec.from_jsonable(json.loads(text))
                if loose
                else _codec.decode(state.value_type, text)
            )
        except Exception:  # a value stored under an older declaration: it cannot match
            return False
        if operator in _ORDERED:
            if _kind(current) != "number":
                return False
            return bool(
                {
                    MatchOperator.GT: current > target,
                    MatchOperator.GE: current >= target,
                    MatchOperator.LT: current < target,
                    MatchOperator.LE: current <= target,
                }[operator]
            )
        same = _kind(current) == _kind(target) and current == target
        return same if operator == MatchOperator.EQ else not same

    return predicate
