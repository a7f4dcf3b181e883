"""Starting Flows: a run, its initial Attributes and its start Step in one commit.

:meth:`Starter.prepare` validates and encodes a start into a :class:`StartRequest`; the storage
piece ``starts.insert_run`` applies one inside any transaction. A start of its own commits it
alone (``start``); a parent Step includes its SubFlows' requests (``prepare_subflow``) in the
commit that begins its wait.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from engine import _codec
from engine._enums import IdReusePolicy, RunStatus
from engine._ids import check_id, new_id
from engine._runtime import effects
from engine._runtime.committer import Committer
from engine._runtime.names import parse_values
from engine._runtime.ports import BlobStore, Database
from engine._specs import FlowSpec
from engine._storage import reads
from engine._storage.records import QueuedStep, StartOutcome, StartRequest, SubFlowStart
from engine.clock import Clock, to_micros
from engine.errors import FlowTypeNotFoundError, InvalidArgumentError, InvalidStepResultError
from engine.flow import Flow
from engine.options import StartFlowOptions
from engine.registry import Registry
from engine.results import StartFlowResult
from engine.subflow import SubFlowCondition

MAX_FLOW_TIMEOUT = timedelta(days=3650)
MAX_DELAY = timedelta(days=3650)


class Starter:
    """Starts runs of registered Flow types."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        blobs: BlobStore,
        committer: Committer,
        clock: Clock,
        change_log: bool = True,
    ) -> None:
        self._change_log = change_log
        self._registry = registry
        self._database = database
        self._blobs = blobs
        self._committer = committer
        self._clock = clock

    async def start(
        self,
        flow: type[Flow[Any]] | Flow[Any] | str,
        flow_id: str,
        input: Any,
        options: StartFlowOptions | None,
    ) -> StartFlowResult:
        """Start a run of ``flow`` (see ``Engine.start_flow``)."""
        spec = self._registry.spec_of(flow)
        request = await self.prepare(spec, flow_id, input, options or StartFlowOptions())
        now = to_micros(self._clock.now())
        result = await self._committer.start(request, now)
        outcome: StartOutcome = result.value
        return StartFlowResult(flow_id, outcome.run_id, outcome.started)

    async def prepare_subflow(
        self, parent: QueuedStep, index: int, condition: SubFlowCondition
    ) -> SubFlowStart:
        """Validate and encode the start of a parent Step's SubFlow condition ``index``.

        The child's Flow ID is ``SubFlow:<parentFlowId>-<stepExecutionId>-<index>`` and its
        Request ID names the parent run, so a start retried in the same parent run attaches.
        Raises InvalidStepResultError when the child cannot be started with that input.
        """
        where = f"the SubFlow at index {index} of {parent.step_type}.wait_for"
        try:
            spec = self._registry.spec(condition.flow_type)
        except FlowTypeNotFoundError:
            raise InvalidStepResultError(
                f"{where} runs Flow type {condition.flow_type}, which is not registered"
            ) from None
        if spec.start_step is None:
            raise InvalidStepResultError(
                f"{where} runs Flow type {spec.flow_type}, which has no start Step to take "
                "its input"
            )
        flow_id = f"SubFlow:{parent.flow_id}-{parent.execution_id}-{index}"
        options = condition.options
        # The seed: a restarted SubFlow starts from the original hard-delete initial value (it
        # reads as absent when an earlier run deleted it), while a start that meets the child
        # running overwrites the stored value, as any start does.
        keep_stored = False
        if any(_is_hard_delete(spec, key) for key in options.initial_attributes):
            latest = await reads.load_run(self._database, flow_id)
            keep_stored = latest is not None and latest.status != RunStatus.RUNNING
        try:
            request = await self.prepare(
                spec,
                flow_id,
                condition.input,
                StartFlowOptions(
                    request_id=f"{parent.run_id}:{parent.execution_id}:{index}",
                    timeout=options.timeout,
                    initial_attributes=dict(options.initial_attributes),
                    start_delay=options.start_delay,
                ),
                store_blobs=not keep_stored,
            )
        except InvalidArgumentError as exc:
            raise InvalidStepResultError(f"{where} cannot start: {exc}") from exc
        return SubFlowStart(index, request, options.reuse_policy)

    async def prepare(
        self,
        spec: FlowSpec,
        flow_id: str,
        input: Any,
        options: StartFlowOptions,
        *,
        store_blobs: bool = True,
    ) -> StartRequest:
        """Validate a start and encode it; hard-delete initial values are stored now (unless
        ``store_blobs`` is False: they keep the value stored for the Flow ID).

        The seed: a start that then fails because the Flow ID is running still overwrites the
        running Flow's hard-delete value (one stored value per Flow ID and key).
        """
        check_id(flow_id, "flowId")
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
            value = _codec.validate_client_value(spec.input_type, input, what="input")
        now = to_micros(self._clock.now())
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
            timeout_at = now + to_micros(options.timeout.total_seconds())
        due_at = None
        if options.start_delay is not None:
            delay = options.start_delay
            if not isinstance(delay, timedelta) or delay < timedelta(0) or delay > MAX_DELAY:
                raise InvalidArgumentError(
                    "startDelay must be between 0 and 10 years", field="startDelaySeconds"
                )
            if delay > timedelta(0):
                due_at = now + to_micros(delay.total_seconds())
        initial = parse_values(spec, options.initial_attributes, "initialAttributes")
        run_id = new_id()
        encoded = _codec.encode(value)
        start_step = None
        if spec.start_step is not None:
            start_step = QueuedStep(
                id="",  # numbered by the commit that creates it
                run_id=run_id,
                flow_id=flow_id,
                flow_type=spec.flow_type,
                step_type=spec.start_step,
                input=encoded,
                phase=spec.steps[spec.start_step].first_phase,
                due_at=due_at,  # a delayed start: the run exists now, its first Step runs later
            )
        writes = await effects.encode_writes(
            self._blobs, spec, flow_id, initial, store_blobs=store_blobs
        )
        return StartRequest(
            flow_id=flow_id,
            flow_type=spec.flow_type,
            run_id=run_id,
            input=encoded,
            request_id=options.request_id,
            id_reuse_policy=policy,
            ignore_already_started=options.ignore_already_started,
            timeout_at=timeout_at,
            # An unset initial value is simply not written (a hard-delete one was erased).
            writes=tuple(w for w in writes if w.value is not None or w.blob),
            start_step=start_step,
            change_log=self._change_log and spec.flow.keep_change_log,
        )


def _is_hard_delete(spec: FlowSpec, key: Any) -> bool:
    """Return True when an initial-Attributes key names a hard-delete Attribute or map."""
    state = spec.state(key.partition("/")[0]) if isinstance(key, str) else None
    return state is not None and state.hard_delete_on_null
