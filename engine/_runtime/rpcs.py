"""The RPC executor: locks, one snapshot, the handler, one commit, as Dex runs an RPC."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from engine import _codec
from engine._ids import check_id, new_owner_token
from engine._limits import check_lock_retry
from engine._loads import RPCPlan, rpc_plan_with
from engine._rpc_definition import RPCDefinition, rpc_definition_of
from engine._runtime import effects, failures
from engine._runtime.committer import Committer, RPCCommit
from engine._runtime.handler_threads import HandlerThreads
from engine._runtime.handoff import handed_off_snapshot, nothing, overlay
from engine._runtime.invocation import InvocationContext
from engine._runtime.lock_turns import LockTurns
from engine._runtime.ports import BlobStore, Database, LockTable
from engine._runtime.snapshots import Snapshots
from engine._specs import FlowSpec
from engine._storage import reads
from engine._storage.records import StagedEffects
from engine.clock import Clock, to_micros
from engine.errors import (
    EngineError,
    FlowNotActiveOrNotFoundError,
    InvalidArgumentError,
    RPCHandlerError,
    RPCLockConflictError,
    RPCTimeoutError,
)
from engine.flow import Flow, RPCResult
from engine.options import RPCInvokeOptions
from engine.registry import Registry
from engine.telemetry import Telemetry

KNOWN_TYPES_LIMIT = 100_000


@dataclass(frozen=True)
class _Call:
    """One RPC call, checked: what each of its tries runs."""

    flow_id: str
    rpc_name: str
    flow_type: str
    run_id: str | None
    spec: FlowSpec
    definition: RPCDefinition
    value: Any
    plan: RPCPlan
    guessed: bool


def _alone() -> bool:
    """No other invocation waits for the keys (a call that does not retry)."""
    return False


class _WrongGuess(Exception):
    """The cached Flow type of a Flow ID did not match its run."""


class RPCExecutor:
    """Invokes RPC handlers."""

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
        threads: int,
        default_timeout: timedelta = timedelta(seconds=60),
        all_transactional: bool = False,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._telemetry = telemetry or Telemetry()
        self._default_timeout = default_timeout
        self._all_transactional = all_transactional
        self._registry = registry
        self._database = database
        self._snapshots = snapshots
        self._blobs = blobs
        self._locks = locks
        self._committer = committer
        self._clock = clock
        self._threads = HandlerThreads(threads, "dexlite-rpc")
        self._known_types: dict[str, str] = {}
        self._turns = LockTurns()

    def _remember(self, flow_id: str, flow_type: str) -> None:
        if flow_id not in self._known_types and len(self._known_types) >= KNOWN_TYPES_LIMIT:
            self._known_types.pop(next(iter(self._known_types)))  # forget the oldest
        self._known_types[flow_id] = flow_type

    def close(self) -> None:
        """Stop the handler threads."""
        self._threads.close()

    async def invoke_method(
        self,
        rpc: Any,
        flow_id: str,
        input: Any,
        run_id: str | None,
        options: RPCInvokeOptions | None,
        flow_type: str | None = None,
    ) -> Any:
        """Invoke ``rpc``, a Flow's RPC method or an RPC name (see ``Engine.invoke_rpc``)."""
        check_id(flow_id, "flowId")
        if run_id is not None:
            check_id(run_id, "runId")
        if isinstance(rpc, str):
            if flow_type is not None:
                self._registry.spec(flow_type)  # an unknown type: FlowTypeNotFoundError
            return await self.invoke(
                flow_id,
                rpc,
                input,
                flow_type=flow_type,
                run_id=run_id,
                options=options,
            )
        definition = rpc_definition_of(rpc)
        owner = getattr(rpc, "__self__", None)
        if definition is None or not isinstance(owner, Flow):
            raise InvalidArgumentError(
                f"{rpc!r} is not an RPC method of a registered Flow instance", field="rpc"
            )
        return await self.invoke(
            flow_id,
            definition.name,
            input,
            flow_type=type(owner).flow_type(),
            run_id=run_id,
            options=options,
        )

    async def invoke(
        self,
        flow_id: str,
        rpc_name: str,
        input: Any,
        *,
        flow_type: str | None = None,
        run_id: str | None = None,
        options: RPCInvokeOptions | None = None,
    ) -> Any:
        """Run one RPC invocation and return its output, telling the telemetry how it went.

        Called by name, the Flow type is the run's. A Flow ID keeps its type unless it is
        reused by another type, so the type seen last time is tried first, saving a read; the
        snapshot tells when that guess was wrong, and the call then starts over properly.
        """
        started = time.perf_counter()
        outcome = "ok"
        try:
            return await self._invoke_named(flow_id, rpc_name, input, flow_type, run_id, options)
        except EngineError as exc:
            outcome = exc.code
            raise
        except BaseException:
            outcome = "INTERNAL"
            raise
        finally:
            self._telemetry.rpc_finished(
                self._type_of(flow_id, flow_type),
                rpc_name,
                outcome,
                time.perf_counter() - started,
            )

    def _type_of(self, flow_id: str, flow_type: str | None) -> str:
        """The Flow type an invocation ran against, for telemetry ("" when it is unknown)."""
        return flow_type or self._known_types.get(flow_id, "")

    async def _invoke_named(
        self,
        flow_id: str,
        rpc_name: str,
        input: Any,
        flow_type: str | None,
        run_id: str | None,
        options: RPCInvokeOptions | None,
    ) -> Any:
        if flow_type is None:
            guess = self._known_types.get(flow_id)
            if guess is not None:
                try:
                    return await self._invoke(
                        flow_id,
                        rpc_name,
                        input,
                        guess,
                        run_id,
                        options,
                        guessed=True,
                    )
                except _WrongGuess:
                    self._known_types.pop(flow_id, None)
            run = await reads.load_run(self._database, flow_id, run_id)
            if run is None:
                raise FlowNotActiveOrNotFoundError(
                    f"Flow {flow_id} was not found", flow_id=flow_id, operation="invokeRpc"
                )
            flow_type = run.flow_type
            self._remember(flow_id, flow_type)
        return await self._invoke(
            flow_id, rpc_name, input, flow_type, run_id, options, guessed=False
        )

    async def _invoke(
        self,
        flow_id: str,
        rpc_name: str,
        input: Any,
        flow_type: str,
        run_id: str | None,
        options: RPCInvokeOptions | None,
        *,
        guessed: bool,
    ) -> Any:
        try:
            spec = self._registry.spec(flow_type)
            definition = spec.rpc(rpc_name)
            value = self._input(definition, input)
            plan = self._plan(spec, definition, options)
            retry = (
                check_lock_retry(options.lock_retry)
                if options is not None and options.lock_retry is not None
                else None
            )
        except EngineError:
            if guessed:  # perhaps judged against the wrong type: decide with the real one
                raise _WrongGuess() from None
            raise
        call = _Call(flow_id, rpc_name, flow_type, run_id, spec, definition, value, plan, guessed)
        if retry is None or not plan.lock_keys:
            return await self._run(call, nothing, _alone)
        return await self._turns.retrying(
            flow_id,
            tuple(plan.lock_keys),
            retry,
            lambda released, followed: self._run(call, released, followed),
        )

    async def _run(
        self, call: _Call, on_released: Callable[[], None], followed: Callable[[], bool]
    ) -> Any:
        """Take the call's locks, read, run the handler, commit; tell ``on_released`` once
        the keys are free."""
        flow_id, run_id, flow_type, plan = call.flow_id, call.run_id, call.flow_type, call.plan
        spec, rpc_name = call.spec, call.rpc_name
        transactional = plan.transactional or self._all_transactional
        owner = new_owner_token()
        try:
            # A lock table on PostgreSQL may read the snapshot with the locks, in one round trip.
            loaded = await self._locks.acquire_for_rpc(
                flow_id, plan.lock_keys, owner, (run_id, plan.loads)
            )
        except RPCLockConflictError as exc:
            # Every try counts, those the invocation retries too.
            self._telemetry.lock_conflict(flow_type, exc.key)
            raise
        committing = False
        try:
            # Taken before the read: a unit that ends meanwhile is in what the read sees.
            # Only an RPC that commits after the earlier holders (a transactional one) reads
            # what they handed off; any other reads committed state, like every client read,
            # since it may answer without committing anything.
            after = self._committer.handoffs.pending(flow_id) if transactional else ()
            # When the units on their way wrote every key the plan loads, they are the snapshot.
            snapshot = handed_off_snapshot(after, plan.loads, run_id, spec.singletons)
            if snapshot is None and loaded is not None and not after:
                snapshot = loaded.snapshot
            elif snapshot is None:
                snapshot = overlay(
                    await self._snapshots.read(flow_id, run_id, plan.loads, overlaid=transactional),
                    after,
                    plan.loads,
                )
            if snapshot is not None and snapshot.run.flow_type == flow_type:
                self._remember(flow_id, flow_type)
            elif call.guessed:
                raise _WrongGuess()
            if snapshot is None or snapshot.run.flow_type != flow_type:
                raise FlowNotActiveOrNotFoundError(
                    f"Flow {flow_id} of type {flow_type} was not found",
                    flow_id=flow_id,
                    operation="invokeRpc",
                )
            if transactional and not snapshot.run.is_running:
                raise FlowNotActiveOrNotFoundError(
                    f"Flow {flow_id} is not active; RPC {rpc_name} takes locks or is "
                    "transactional and needs an active run",
                    flow_id=flow_id,
                    operation="invokeRpc",
                )
            context = await self._snapshots.context(spec, snapshot, plan.loads, rpc_name=rpc_name)
            result = await self._run_handler(spec, call.definition, context, call.value)
            staged = await self._effects(spec, call.definition, context, result, transactional)
            if staged.changes_state() or transactional:
                committing = True  # the Committer releases the keys, however it ends
                await self._committer.rpc(
                    RPCCommit(
                        flow_id=flow_id,
                        flow_type=flow_type,
                        run=snapshot.run,
                        rpc_name=rpc_name,
                        effects=staged,
                        now=to_micros(self._clock.now()),
                        owner=owner,
                        locked=bool(plan.lock_keys),
                        after=after,
                        on_released=on_released,
                        # Another invocation waits for the keys: it may get them before this
                        # commit ended (a handoff).
                        followed=followed(),
                    )
                )
            return staged.output
        finally:
            if not committing:
                await self._locks.release_now(flow_id, owner)
                on_released()

    @staticmethod
    def _plan(
        spec: FlowSpec, definition: RPCDefinition, options: RPCInvokeOptions | None
    ) -> RPCPlan:
        if options is None or not (
            options.load_attribute_map_instances
            or options.lock_attribute_map_instances
            or options.load_channel_map_instances
        ):
            # Options that add no load or lock (what a route passes when its request named
            # none) leave the registered plan, which is built once.
            return spec.rpc_plans[definition.name]
        return rpc_plan_with(definition, spec.states, spec.channels, options)

    async def _effects(
        self,
        spec: FlowSpec,
        definition: RPCDefinition,
        context: InvocationContext,
        result: Any,
        transactional: bool,
    ) -> StagedEffects:
        """Validate the handler's output and turn its staged work into effects.

        A transactional RPC's deletions are strict: a message no longer pending fails the RPC
        with nothing committed.
        """
        if not isinstance(result, RPCResult):
            result = RPCResult(result)
        output = (
            _codec.validate(
                definition.output_type,
                result.output,
                what=f"output of RPC {definition.name}",
                strict=False,
            )
            if definition.output_type is not None or result.output is not None
            else None
        )
        return await effects.stage(
            self._blobs,
            spec,
            context,
            cancel_step_types=effects.step_type_names(spec, result.canceling_steps),
            next_steps=effects.next_steps(
                spec, run_id=context.run_id, flow_id=context.flow_id, movements=result.next_steps
            ),
            output=output,
            strict_deletions=transactional,
        )

    @staticmethod
    def _input(definition: RPCDefinition, input: Any) -> Any:
        if not definition.takes_input or definition.input_type is None:
            if input is not None:
                raise InvalidArgumentError(
                    f"RPC {definition.name} takes a null input", field="input"
                )
            return None
        return _codec.validate_client_value(
            definition.input_type, input, what=f"input of RPC {definition.name}"
        )

    async def _run_handler(
        self, spec: FlowSpec, definition: RPCDefinition, context: InvocationContext, value: Any
    ) -> Any:
        bound = definition.function.__get__(spec.flow, type(spec.flow))
        args = (context, value) if definition.takes_input else (context,)
        own = definition.timeout if definition.has_own_timeout else self._default_timeout
        timeout = own.total_seconds()
        try:
            # asyncio.timeout runs an async handler in this task; wait_for would make a task.
            async with asyncio.timeout(timeout):
                if definition.is_async:
                    return await bound(*args)
                return await self._threads.run(functools.partial(bound, *args))
        except TimeoutError:
            context.request_cancellation()
            raise RPCTimeoutError(
                f"RPC {definition.name} did not finish within {timeout:g} s",
                flow_id=context.flow_id,
                operation="invokeRpc",
            ) from None
        except EngineError:
            raise
        except Exception as exc:
            failures.log_rpc_failure(
                exc, flow_id=context.flow_id, run_id=context.run_id, rpc_name=definition.name
            )
            raise RPCHandlerError(
                f"RPC {definition.name} raised {type(exc).__name__}: {exc}",
                error_type=type(exc).__name__,
                flow_id=context.flow_id,
                operation="invokeRpc",
            ) from exc
