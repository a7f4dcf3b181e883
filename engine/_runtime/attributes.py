"""GetAttributes and SetAttributes: Attribute values read and written from outside a Flow."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from engine import _codec
from engine._ids import check_event_number, check_id, check_text, new_owner_token, state_key
from engine._runtime import effects
from engine._runtime.committer import Committer
from engine._runtime.names import parse_key, parse_values
from engine._runtime.ports import BlobStore, Database, LockTable
from engine._runtime.snapshots import Snapshots, shared_keys
from engine._specs import FlowSpec
from engine._storage import past, reads, units
from engine._storage.records import LoadPlan, StagedEffects
from engine.clock import Clock, to_micros
from engine.errors import (
    FailedPreconditionError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    InvalidArgumentError,
)
from engine.registry import Registry
from engine.results import AttributeValues


class Attributes:
    """Reads committed Attribute values without locks; writes them under the RPC lock rules."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        snapshots: Snapshots,
        blobs: BlobStore,
        locks: LockTable,
        committer: Committer,
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._database = database
        self._snapshots = snapshots
        self._blobs = blobs
        self._locks = locks
        self._committer = committer
        self._clock = clock

    async def get(
        self,
        flow_id: str,
        names: Iterable[str],
        run_id: str | None,
        *,
        decoded: bool = False,
        as_of_event_id: int | None = None,
    ) -> AttributeValues:
        """Read Attributes and map instances of one committed state (see the Engine): as JSON
        data, or (``decoded``) decoded with their definitions, all or nothing; with
        ``as_of_event_id``, the state right after the commit that wrote that history event."""
        check_id(flow_id, "flowId")
        wanted = list(dict.fromkeys(names))
        for name in wanted:
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError("name: names must be non-empty strings", field="name")
            check_text(name, "name")
        if as_of_event_id is not None:
            return await self._as_of(flow_id, wanted, run_id, as_of_event_id, decoded)
        # One read: the keys are split as written, then checked against the run's Flow type.
        plan = (
            LoadPlan(
                tuple(sorted({n for n in wanted if "/" not in n})),
                (),
                tuple(sorted({_split(n) for n in wanted if "/" in n})),
            )
            if wanted
            else LoadPlan()
        )
        snapshot = await self._snapshots.read(flow_id, run_id, plan)
        if snapshot is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="getAttributes"
            )
        spec: FlowSpec | None = None
        if wanted or snapshot.run.flow_type in self._registry.flow_types:
            spec = self._registry.spec(snapshot.run.flow_type)  # names need their Flow type
            for name in wanted:
                parse_key(spec, name, "name")
        shared = [] if spec is None else shared_keys(spec, snapshot, plan)
        texts = await self._snapshots.texts(snapshot, shared)
        return AttributeValues(flow_id, snapshot.run.run_id, _values(spec, texts, decoded))

    async def _as_of(
        self, flow_id: str, wanted: list[str], run_id: str | None, event_id: int, decoded: bool
    ) -> AttributeValues:
        """Read the values right after the commit that wrote history event ``event_id`` of
        the run, from its change log. Hard-delete values are never logged: they are absent."""
        if run_id is not None:
            check_id(run_id, "runId")
        check_event_number(event_id, "asOfEventId")
        keys = [_split(n) for n in wanted] if wanted else None
        found = await self._database.read(
            lambda conn: past.as_of(conn, flow_id, run_id, event_id, keys)
        )
        if found is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="getAttributes"
            )
        spec: FlowSpec | None = None
        if wanted or found.flow_type in self._registry.flow_types:
            spec = self._registry.spec(found.flow_type)
            for name in wanted:
                parse_key(spec, name, "name")
        texts = {
            (v.name, v.instance): v.value
            for v in found.values
            if spec is None
            or (state := spec.states.get(v.name)) is None
            or not state.hard_delete_on_null
        }
        return AttributeValues(flow_id, found.run_id, _values(spec, texts, decoded))

    async def set(
        self, flow_id: str, values: Mapping[str, Any], run_id: str | None
    ) -> tuple[str, str]:
        """Write Attributes of the active run, or erase hard-delete values of a closed one."""
        check_id(flow_id, "flowId")
        run = await reads.load_run(self._database, flow_id, run_id)
        if run is None:
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="setAttributes"
            )
        spec = self._registry.spec(run.flow_type)
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
                        self._blobs.exists, flow_id, state_key(name, instance)
                    )
                ):
                    raise FlowNotActiveOrNotFoundError(
                        f"Flow {flow_id} run {run.run_id} is closed; only the erase (null) of "
                        "stored hard-delete values is allowed",
                        flow_id=flow_id,
                        operation="setAttributes",
                    )
        owner = new_owner_token()
        if not erase:
            # A client write must not slip under a Step's or an RPC's lock: it holds the keys
            # as an RPC does (before a hard-delete value reaches the blob store), and they are
            # released with its commit.
            await self._locks.acquire_for_rpc(flow_id, [state_key(n, i) for n, i in parsed], owner)
        try:
            writes = await effects.encode_writes(self._blobs, spec, flow_id, parsed)
        except BaseException:
            if not erase:
                await self._locks.release_now(flow_id, owner)
            raise
        unit = units.set_attributes(
            flow_id=flow_id,
            run_id=run.run_id,
            effects=StagedEffects(writes=writes),
            now=to_micros(self._clock.now()),
            closed_erase=erase,
        )
        if erase:
            await self._committer.commit(unit)
        else:
            await self._committer.locked(flow_id, owner, unit)
        return flow_id, run.run_id


def _values(
    spec: FlowSpec | None, texts: Mapping[tuple[str, str], str], decoded: bool
) -> dict[str, Any]:
    """Return stored values by wire key: as JSON data, or (``decoded``) decoded with their
    definitions; a Flow type this engine no longer knows gives JSON."""
    if decoded and spec is not None:
        # Every value decodes with its definition before any is returned (as Dex's Client does).
        return {
            state_key(n, i): _decoded(spec, n, i, text) for (n, i), text in sorted(texts.items())
        }
    return {state_key(n, i): json.loads(text) for (n, i), text in sorted(texts.items())}


def _decoded(spec: FlowSpec, name: str, instance: str, text: str) -> Any:
    """Decode one stored value with its definition; a value its (changed) definition no longer
    accepts is a FailedPreconditionError naming it, not a raw pydantic error."""
    value_type = spec.states[name].value_type
    try:
        return _codec.decode(value_type, text)
    except (ValidationError, ValueError) as exc:
        key = state_key(name, instance)
        shown = getattr(value_type, "__name__", repr(value_type))
        raise FailedPreconditionError(
            f"the stored value of Attribute {key} no longer decodes as its declared type "
            f"{shown} (was its definition changed?): {_first_line(exc)}; "
            "get_attributes_json reads it as JSON",
            field=key,
        ) from None


def _first_line(exc: Exception) -> str:
    errors = exc.errors() if isinstance(exc, ValidationError) else None
    if errors:
        first = errors[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"{where + ': ' if where else ''}{first.get('msg', '')}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _split(key: str) -> tuple[str, str]:
    name, _, instance = key.partition("/")
    return name, instance
