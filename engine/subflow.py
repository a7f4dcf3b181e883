"""SubFlows: child Flows a Step starts and waits for, as wait conditions.

``Wait.until(SubFlow.run(ChildFlow, input))`` starts the child in the same commit that moves
the Step into its wait; the wait holds once the child closes, whatever its status. The child's
Flow ID is derived from the parent's Flow ID, the Step execution ID and the condition's index
(``SubFlow:<parent>-<stepExecutionId>-<index>``), so a new run of the parent's Flow ID meets the
child again and :class:`SubFlowReusePolicy` decides what happens then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from engine._enums import SubFlowReusePolicy
from engine._staging import staging
from engine.errors import DefinitionError
from engine.flow import Flow

if TYPE_CHECKING:
    from engine.context import Context
    from engine.results import FlowResult


@dataclass(frozen=True)
class SubFlowOptions:
    """The options of a SubFlow start: those of StartFlowOptions, with a reuse policy instead
    of an ID reuse policy (the Flow ID is derived, the Request ID generated)."""

    reuse_policy: SubFlowReusePolicy = SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
    timeout: timedelta | None = None
    initial_attributes: Mapping[str, Any] = field(default_factory=dict)
    #: The child exists at once; its start Step runs once the delay has passed.
    start_delay: timedelta | None = None


@dataclass(frozen=True)
class SubFlowCondition:
    """A wait condition that starts (or attaches to) a child Flow and holds once it closes."""

    flow_type: str
    input: Any
    options: SubFlowOptions


class SubFlow:
    """Start child Flows from a Step's ``wait_for``, and read their results in ``execute``."""

    @staticmethod
    def run(
        flow: type[Flow[Any]] | Flow[Any],
        input: Any = None,
        options: SubFlowOptions | None = None,
    ) -> SubFlowCondition:
        """Return a wait condition running ``flow`` (a registered Flow or its class) as a
        child with ``input``."""
        cls = flow if isinstance(flow, type) else type(flow)
        if not isinstance(cls, type) or not issubclass(cls, Flow):
            raise DefinitionError(f"SubFlow.run takes a Flow or Flow class, got {flow!r}")
        options = options or SubFlowOptions()
        if not isinstance(options, SubFlowOptions):
            raise DefinitionError(f"SubFlow.run takes SubFlowOptions, got {options!r}")
        return SubFlowCondition(cls.flow_type(), input, options)

    @staticmethod
    def get_condition_results(context: Context, index: int = 0) -> FlowResult:
        """Return the result of the Wait's SubFlow at ``index`` (its position among the Wait's
        SubFlow conditions, in argument order), as the completed wait saw it.

        In an ``any_of`` a child that did not win may still be running: its result says
        RUNNING.
        """
        return staging(context).subflow_result(index)  # type: ignore[no-any-return]

    @staticmethod
    def get_flow_id(context: Context, index: int = 0) -> str:
        """Return the Flow ID of the Wait's SubFlow at ``index``."""
        return staging(context).subflow_result(index).flow_id  # type: ignore[no-any-return]
