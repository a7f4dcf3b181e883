"""Starting Flows: a run, its initial Attributes and its start Step in one commit.

:meth:`Starter.prepare` validates and encodes a start into a :class:`StartRequest`; the storage
piece ``commits.insert_run`` applies one inside any transaction. A start of its own commits it
alone (``start``); a parent Step can include the same request in its own commit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from engine import _codec
from engine._ids import check_id, new_id
from engine._runtime import effects
from engine._runtime.committer import Committer
from engine._runtime.names import parse_values
from engine._runtime.ports import BlobStore
from engine._specs import FlowSpec
from engine._storage import commits
from engine._storage.records import QueuedStep, StartOutcome, StartRequest
from engine.clock import Clock, to_micros
from engine.errors import InvalidArgumentError
from engine.flow import Flow
from engine.options import IdReusePolicy, StartFlowOptions
from engine.registry import Registry
from engine.results import StartFlowResult

MAX_FLOW_TIMEOUT = timedelta(days=3650)


class Starter:
    """Starts runs of registered Flow types."""

    def __init__(
        self, *, registry: Registry, blobs: BlobStore, committer: Committer, clock: Clock
    ) -> None:
        self._registry = registry
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
        result = await self._committer.commit(
            commits.start_run(request, to_micros(self._clock.now()))
        )
        outcome: StartOutcome = result.value
        return StartFlowResult(flow_id, outcome.run_id, outcome.started)

    async def prepare(
        self, spec: FlowSpec, flow_id: str, input: Any, options: StartFlowOptions
    ) -> StartRequest:
        """Validate a start and encode it; hard-delete initial values are stored now.

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
            value = _codec.validate(spec.input_type, input, what="input", strict=False)
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
            )
        writes = await effects.encode_writes(self._blobs, spec, flow_id, initial)
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
        )
