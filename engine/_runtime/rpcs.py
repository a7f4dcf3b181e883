"""The RPC executor: locks, one snapshot, the handler, one commit, exactly as seed 002 says."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engine import _codec
from engine._runtime.runtime import Runtime, new_id
from engine._storage import commits, reads
from engine._storage.records import Effects
from engine.attribute import AttributeLock, AttributeMapLoad, check_instance_key
from engine.errors import (
    EngineError,
    FlowNotActiveOrNotFoundError,
    InvalidArgumentError,
    RPCHandlerError,
    RPCTimeoutError,
)
from engine.flow import RPCDefinition, RPCResult
from engine.options import RPCInvokeOptions
from engine.registry import FlowSpec, check_load, check_lock


def plan_invocation(
    spec: FlowSpec, definition: RPCDefinition, options: RPCInvokeOptions | None
) -> tuple[list[AttributeLock], list[str], list[AttributeMapLoad]]:
    """Union, sort and de-duplicate invoke options with the definition, after validating them.

    Returns (locks, whole-map loads, exact-instance loads). Invoke options can only add exact
    AttributeMap instance locks and loads; every entry must name an AttributeMap of this Flow
    with a non-empty, slash-free instance.
    """
    options = options or RPCInvokeOptions()
    what = f"RPC {definition.name} invoke options"
    if not isinstance(options, RPCInvokeOptions):
        raise InvalidArgumentError(f"{what}: expected RPCInvokeOptions", field="options")
    extra_locks: list[AttributeLock] = []
    for lock in options.lock_attribute_map_instances:
        if not isinstance(lock, AttributeLock):
            raise InvalidArgumentError(
                f"{what}: lock_attribute_map_instances takes map.lock(key) values, got {lock!r}",
                field="lockAttributeMapInstances",
            )
        check_lock(what, spec.states, lock, InvalidArgumentError)
        if lock.instance is None:
            raise InvalidArgumentError(
                f"{what}: {lock.name!r} is not an AttributeMap instance lock",
                field="lockAttributeMapInstances",
            )
        check_instance_key(lock.instance, "lockAttributeMapInstances instance")
        extra_locks.append(lock)
    extra_loads: list[AttributeMapLoad] = []
    for load in options.load_attribute_map_instances:
        check_load(what, spec.states, load, InvalidArgumentError)
        check_instance_key(load.instance, "loadAttributeMapInstances instance")
        extra_loads.append(load)
    locks = sorted(set(definition.lock_attributes) | set(extra_locks))
    whole = sorted({m.name for m in definition.load_attribute_maps})
    exact = sorted(set(definition.load_attribute_map_instances) | set(extra_loads))
    return locks, whole, exact


KNOWN_TYPES_LIMIT = 100_000


class _WrongGuess(Exception):
    """The cached Flow type of a Flow ID did not match its run."""


class RPCExecutor:
    """Invokes RPC handlers."""

    def __init__(self, runtime: Runtime, threads: int) -> None:
        self.rt = runtime
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dexlite-rpc")
        self._known_types: dict[str, str] = {}

    def _remember(self, flow_id: str, flow_type: str) -> None:
        if flow_id not in self._known_types and len(self._known_types) >= KNOWN_TYPES_LIMIT:
            self._known_types.pop(next(iter(self._known_types)))  # forget the oldest
        self._known_types[flow_id] = flow_type

    def close(self) -> None:
        """Stop the handler threads."""
        self._executor.shutdown(wait=False, cancel_futures=True)

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
        """Run one RPC invocation and return its output.

        Called by name, the Flow type is the run's. A Flow ID keeps its type unless it is
        reused by another type, so the type seen last time is tried first, saving a read; the
        snapshot tells when that guess was wrong, and the call then starts over properly.
        """
        if flow_type is None:
            guess = self._known_types.get(flow_id)
            if guess is not None:
                try:
                    return await self._invoke(
                        flow_id, rpc_name, input, guess, run_id, options, guessed=True
                    )
                except _WrongGuess:
                    self._known_types.pop(flow_id, None)
            run = await reads.load_run(self.rt.db, flow_id, run_id)
            if run is None:
                raise FlowNotActiveOrNotFoundError(
                    f"Flow {flow_id} was not found", flow_id=flow_id, operation="invokeRpc"
                )
            flow_type = run.flow_type
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
            spec = self.rt.registry.spec(flow_type)
            definition = spec.rpc(rpc_name)
            value = self._input(definition, input)
            locks, whole, exact = plan_invocation(spec, definition, options)
        except EngineError:
            if guessed:  # perhaps judged against the wrong type: decide with the real one
                raise _WrongGuess() from None
            raise
        transactional = bool(locks) or definition.is_transactional
        owner = new_id()
        self.rt.locks.acquire_for_rpc(flow_id, [lock.key for lock in locks], owner)
        try:
            snapshot = await self.rt.snapshot(
                flow_id,
                run_id,
                whole_maps=whole,
                instances=[(load.name, load.instance) for load in exact],
            )
            if snapshot is not None and snapshot.run.flow_type == flow_type:
                self._remember(flow_id, flow_type)
            elif guessed:
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
            context = await self.rt.build_context(
                spec,
                snapshot,
                loaded_maps=whole,
                loaded_instances=[(load.name, load.instance) for load in exact],
                rpc_name=rpc_name,
            )
            result = await self._run_handler(spec, definition, context, value)
            if not isinstance(result, RPCResult):
                result = RPCResult(result)
            output = (
                _codec.validate(
                    definition.output_type,
                    result.output,
                    what=f"output of RPC {rpc_name}",
                    strict=False,
                )
                if definition.output_type is not None or result.output is not None
                else None
            )
            effects = Effects(
                writes=await self.rt.stage_writes(
                    spec, flow_id, context.staged_writes, context.staged_texts
                ),
                new_steps=self.rt.new_steps(spec, result.next_steps),
                cancel_step_types=self.rt.step_type_names(spec, result.canceling_steps),
            )
            if not effects.is_empty() or transactional:
                commit = await self.rt.db.write(
                    commits.commit_rpc(
                        run_id=snapshot.run.run_id,
                        rpc_name=rpc_name,
                        effects=effects,
                        now=self.rt.now_us(),
                        flow_id=flow_id,
                    )
                )
                self.rt.after_commit(commit, flow_id, flow_type, writes=effects.writes)
            return output
        finally:
            self.rt.locks.release(flow_id, owner)

    @staticmethod
    def _input(definition: RPCDefinition, input: Any) -> Any:
        if not definition.takes_input or definition.input_type is None:
            if input is not None:
                raise InvalidArgumentError(
                    f"RPC {definition.name} takes a null input", field="input"
                )
            return None
        return _codec.validate(
            definition.input_type, input, what=f"input of RPC {definition.name}", strict=False
        )

    async def _run_handler(
        self, spec: FlowSpec, definition: RPCDefinition, context: Any, value: Any
    ) -> Any:
        bound = definition.function.__get__(spec.flow, type(spec.flow))
        args = (context, value) if definition.takes_input else (context,)
        timeout = definition.timeout.total_seconds()
        try:
            if definition.is_async:
                return await asyncio.wait_for(bound(*args), timeout)
            loop = asyncio.get_running_loop()
            future = loop.run_in_executor(self._executor, functools.partial(bound, *args))
            return await asyncio.wait_for(future, timeout)
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
            raise RPCHandlerError(
                f"RPC {definition.name} raised {type(exc).__name__}: {exc}",
                error_type=type(exc).__name__,
                flow_id=context.flow_id,
                operation="invokeRpc",
            ) from exc
