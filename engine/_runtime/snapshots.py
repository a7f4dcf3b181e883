"""Reading an invocation's snapshot and turning it into the Context a handler receives."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Container, Iterable
from datetime import UTC, datetime
from typing import Any

from engine import _codec
from engine._ids import state_key
from engine._reuse import reuse_of
from engine._runtime.committed_state import CommittedState
from engine._runtime.invocation import InvocationContext
from engine._runtime.ports import BlobStore, Database
from engine._runtime.step_io import StepIO
from engine._specs import FlowSpec
from engine._storage import reads
from engine._storage.records import NOT_DECODED, LoadPlan, Snapshot
from engine.channel import ChannelMessage
from engine.results import FlowResult, StepCompletion


class Snapshots:
    """Reads committed state for handlers and clients, resolving hard-delete values."""

    def __init__(
        self,
        database: Database,
        blobs: BlobStore,
        committed: CommittedState | None = None,
        *,
        reuse: bool = True,
    ) -> None:
        self._database = database
        #: Whether values an earlier invocation wrote are reused as objects where they are
        #: (see ``engine._reuse``), rather than decoded again from their text.
        self._reuse = reuse
        self._blobs = blobs
        #: Copies of committed state, when this process is the database's only writer.
        self._committed = committed

    async def read(
        self, flow_id: str, run_id: str | None, plan: LoadPlan, *, overlaid: bool = False
    ) -> Snapshot | None:
        """Read the run (the given one, or the Flow's latest) with what ``plan`` loads.

        ``overlaid``: the caller lays handed-off units over the snapshot (an RPC or a Step;
        see ``CommittedState.snapshot``).
        """
        committed = self._committed
        if committed is None:
            return await reads.load_snapshot(self._database, flow_id, run_id, plan)
        found = committed.snapshot(flow_id, run_id, plan, overlaid=overlaid)
        if found is not None:
            return found
        commits = committed.commits
        snapshot = await reads.load_snapshot(self._database, flow_id, run_id, plan)
        committed.remember(run_id, plan, snapshot, commits)
        return snapshot

    async def texts(
        self,
        snapshot: Snapshot,
        shared: Iterable[tuple[str, str]] = (),
        skip: Container[tuple[str, str]] = (),
    ) -> dict[tuple[str, str], str]:
        """Return the JSON text of each stored value; deleted hard-delete values are absent.

        A hard-delete value is one per Flow ID and key, read from the blob store; ``shared``
        names hard-delete keys this run has no row for, whose value an earlier run of the Flow
        ID may have stored (every run of the Flow ID reads that one value).
        """
        flow_id = snapshot.run.flow_id
        texts: dict[tuple[str, str], str] = {}
        blob_keys: list[tuple[str, str]] = list(shared)
        for key, stored in snapshot.values.items():
            if stored.blob:
                blob_keys.append(key)
            elif stored.value is not None and key not in skip:
                texts[key] = stored.value
        if blob_keys:

            def load() -> dict[tuple[str, str], str | None]:
                return {k: self._blobs.get(flow_id, state_key(*k)) for k in blob_keys}

            for key, text in (await asyncio.to_thread(load)).items():
                if text is not None:
                    texts[key] = text
        return texts

    async def shared_instances(
        self, spec: FlowSpec, snapshot: Snapshot, plan: LoadPlan
    ) -> list[tuple[str, str]]:
        """Return the instances of the hard-delete maps ``plan`` loads whole that earlier runs
        of the Flow ID stored and this run has no row for (the shared values of a map)."""
        maps = [
            name
            for name in plan.whole_maps
            if (state := spec.states.get(name)) is not None and state.hard_delete_on_null
        ]
        if not maps:
            return []
        found = await reads.blob_instances(self._database, snapshot.run.flow_id, maps)
        return [k for k in found if k not in snapshot.values]

    async def values(
        self, spec: FlowSpec, snapshot: Snapshot, plan: LoadPlan | None = None
    ) -> dict[tuple[str, str], Any]:
        """Return the snapshot's values decoded with their declared types (with the Flow ID's
        shared hard-delete values ``plan`` reads)."""
        values: dict[tuple[str, str], Any] = {}
        shared: list[tuple[str, str]] = []
        if plan is not None:
            shared = shared_keys(spec, snapshot, plan)
            shared += await self.shared_instances(spec, snapshot, plan)
        reused = _reused(spec, snapshot) if self._reuse else {}
        for (name, instance), text in (await self.texts(snapshot, shared, reused)).items():
            state = spec.states.get(name)
            if state is not None:
                values[(name, instance)] = _codec.decode(state.value_type, text)
        values.update(reused)
        return values

    async def context(
        self,
        spec: FlowSpec,
        snapshot: Snapshot,
        plan: LoadPlan,
        *,
        step_execution_id: str | None = None,
        step_type: str | None = None,
        attempt: int = 1,
        rpc_name: str | None = None,
        step_io: StepIO | None = None,
        consumed: str | None = None,
    ) -> InvocationContext:
        """Decode ``snapshot`` into the Context of one invocation that loaded ``plan``.

        ``consumed`` is the JSON of what the Step's completed wait consumed and the results of
        its SubFlows, for ``results(ctx)`` and ``SubFlow.get_condition_results``.
        """
        waited = json.loads(consumed) if consumed else {}
        return InvocationContext(
            flow_id=snapshot.run.flow_id,
            run_id=snapshot.run.run_id,
            flow_type=spec.flow_type,
            states=spec.states,
            values=await self.values(spec, snapshot, plan),
            plan=plan,
            step_execution_id=step_execution_id,
            step_type=step_type,
            attempt=attempt,
            rpc_name=rpc_name,
            step_io=step_io,
            channels=spec.channels,
            sizes=snapshot.sizes,
            messages=_messages(spec, snapshot),
            consumed=_consumed(spec, waited.get("channels", {})),
            subflows=_subflow_results(waited.get("subflows", {})),
        )


def _reused(spec: FlowSpec, snapshot: Snapshot) -> dict[tuple[str, str], Any]:
    """Return the values an earlier invocation wrote, reused as objects (see
    ``engine._reuse``), each this reader's own copy: they need no decoding."""
    found: dict[tuple[str, str], Any] = {}
    for key, stored in snapshot.values.items():
        if stored.decoded is NOT_DECODED or stored.blob:
            continue
        state = spec.states.get(key[0])
        copy = None if state is None else reuse_of(state.value_type)
        if copy is not None:
            found[key] = copy(stored.decoded)
    return found


def shared_keys(spec: FlowSpec, snapshot: Snapshot, plan: LoadPlan) -> list[tuple[str, str]]:
    """Return the hard-delete keys ``plan`` reads by name that the snapshot's run has no row
    for (whole-map loads: see :meth:`Snapshots.shared_instances`).

    The seed keeps one stored hard-delete value per Flow ID and key, shared by every run of the
    Flow ID: a run that never wrote it still reads what an earlier run stored (and nothing once
    any run deleted it).
    """
    keys: list[tuple[str, str]] = []
    for state in spec.states.values():
        if not state.hard_delete_on_null:
            continue
        if state.is_map:
            keys.extend(k for k in plan.instances if k[0] == state.name)
        elif plan.names is None or state.name in plan.names:
            keys.append((state.name, ""))
    return [k for k in keys if k not in snapshot.values]


def _messages(
    spec: FlowSpec, snapshot: Snapshot
) -> dict[tuple[str, str], tuple[ChannelMessage[Any], ...]]:
    """Decode the loaded pending messages with their Channel's type."""
    decoded: dict[tuple[str, str], tuple[ChannelMessage[Any], ...]] = {}
    for (name, instance), stored in snapshot.messages.items():
        channel = spec.channels.get(name)
        if channel is None:
            continue  # a Channel a later version of the Flow no longer declares
        decoded[(name, instance)] = tuple(
            ChannelMessage(
                m.message_id,
                _codec.decode(channel.value_type, m.value),
                datetime.fromtimestamp(m.published_at / 1_000_000, UTC),
            )
            for m in stored
        )
    return decoded


def _consumed(
    spec: FlowSpec, consumed: dict[str, list[Any]]
) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Decode what a wait consumed, ``{"name" or "map/instance": [values]}``."""
    decoded: dict[tuple[str, str], tuple[Any, ...]] = {}
    for key, values in consumed.items():
        name, _, instance = key.partition("/")
        channel = spec.channels.get(name)
        if channel is not None:
            decoded[(name, instance)] = tuple(
                _codec.decode(channel.value_type, json.dumps(value)) for value in values
            )
    return decoded


def _subflow_results(results: dict[str, dict[str, Any]]) -> dict[int, FlowResult]:
    """Decode the SubFlow results a wait recorded as it completed, by condition index."""
    return {
        int(index): FlowResult(
            flow_id=r["flowId"],
            run_id=r["runId"],
            status=r["status"],
            completions=[
                StepCompletion(c["stepType"], c["stepExecutionId"], c["output"])
                for c in r["completions"]
            ],
            error_type=r["errorType"],
            error_message=r["errorMessage"],
        )
        for index, r in results.items()
    }
