"""dexlite's durable flow engine and its Python authoring API.

``Engine`` (and with it the runtime, storage and SQLAlchemy) is imported on first use, so a
program that only declares Flows or talks to a server through ``app.client`` (the CLI) starts
without loading them.
"""

import typing

from engine._enums import HistoryEventType, IdReusePolicy, IndexType, RunStatus, SubFlowReusePolicy
from engine._limits import MAX_PAGE_SIZE, MAX_WAIT_SECONDS
from engine.attribute import (
    Attribute,
    AttributeIndex,
    AttributeLock,
    AttributeMap,
    AttributeMapLoad,
)
from engine.channel import Channel, ChannelCondition, ChannelMap, ChannelMapLoad, ChannelMessage
from engine.clock import Clock, ManualClock
from engine.config import EngineConfig
from engine.context import Context
from engine.errors import (
    AttributeMapNotLoadedError,
    ChannelMessageNotFoundError,
    ChannelMessagesNotLoadedError,
    ConflictError,
    DefinitionError,
    EngineError,
    FailedPreconditionError,
    FlowAlreadyStartedError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowTypeNotFoundError,
    InvalidArgumentError,
    InvalidPageTokenError,
    InvalidQueryError,
    InvalidStepResultError,
    NotFoundError,
    ProgrammingError,
    ResourceExhaustedError,
    RPCHandlerError,
    RPCLockConflictError,
    RPCNotFoundError,
    RPCTimeoutError,
    ScheduleAlreadyExistsError,
    ScheduleNotFoundError,
    StreamNotFoundError,
    UnavailableError,
)
from engine.flow import Flow, FlowTimeoutHandlerOptions, RPCResult, rpc
from engine.flow_client import FlowClient
from engine.options import MatchOperator, RPCInvokeOptions, StartFlowOptions, StopType
from engine.outputs import Heartbeat, StepOutput, StreamWrite
from engine.registry import Registry
from engine.results import (
    AttributeDescription,
    AttributeMatch,
    AttributeValues,
    ChannelInfo,
    ChannelList,
    ChannelMessagePage,
    FlowInfo,
    FlowResult,
    FlowTypeDescription,
    HistoryEvent,
    HistoryPage,
    IndexDescription,
    PendingStep,
    PendingSteps,
    RPCDescription,
    SearchPage,
    StartFlowResult,
    StepCompletion,
    StepTypeDescription,
    StreamDescription,
)
from engine.schedule import (
    BackfillResult,
    OverlapPolicy,
    ScheduleAction,
    ScheduleDescription,
    SchedulePage,
    ScheduleSpec,
    ScheduleTriggerResult,
)
from engine.step import (
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    StepResult,
    dead_end,
    force_complete,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
)
from engine.stream import (
    BufferedTextWriter,
    Stream,
    StreamMessage,
    StreamMessagePage,
    StreamStoreConfig,
)
from engine.subflow import SubFlow, SubFlowCondition, SubFlowOptions
from engine.telemetry import EngineStats, Telemetry
from engine.timer import Timer
from engine.travel import (
    BulkTimeTravelResult,
    FlowRunRef,
    StepMethod,
    TimeTravelFailure,
    TimeTravelOptions,
    TimeTravelResult,
    TravelPoint,
    TravelPointKind,
)
from engine.values import from_json_data, to_json_data, validate_value
from engine.wait import Wait, WaitMode

__all__ = [
    "Attribute",
    "AttributeDescription",
    "AttributeIndex",
    "AttributeLock",
    "AttributeMap",
    "AttributeMapLoad",
    "AttributeMapNotLoadedError",
    "AttributeMatch",
    "AttributeValues",
    "BackfillResult",
    "BufferedTextWriter",
    "BulkTimeTravelResult",
    "Channel",
    "ChannelCondition",
    "ChannelInfo",
    "ChannelList",
    "ChannelMap",
    "ChannelMapLoad",
    "ChannelMessage",
    "ChannelMessageNotFoundError",
    "ChannelMessagePage",
    "ChannelMessagesNotLoadedError",
    "Clock",
    "ConflictError",
    "Context",
    "DefinitionError",
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineStats",
    "FailedPreconditionError",
    "Flow",
    "FlowAlreadyStartedError",
    "FlowClient",
    "FlowInfo",
    "FlowNotActiveOrNotFoundError",
    "FlowNotFoundError",
    "FlowResult",
    "FlowRunRef",
    "FlowTimeoutHandlerOptions",
    "FlowTypeDescription",
    "FlowTypeNotFoundError",
    "Heartbeat",
    "HistoryEvent",
    "HistoryEventType",
    "HistoryPage",
    "IdReusePolicy",
    "IndexDescription",
    "IndexType",
    "InvalidArgumentError",
    "InvalidPageTokenError",
    "InvalidQueryError",
    "InvalidStepResultError",
    "MAX_PAGE_SIZE",
    "MAX_WAIT_SECONDS",
    "ManualClock",
    "MatchOperator",
    "NotFoundError",
    "OverlapPolicy",
    "PendingStep",
    "PendingSteps",
    "ProgrammingError",
    "RPCDescription",
    "RPCHandlerError",
    "RPCInvokeOptions",
    "RPCLockConflictError",
    "RPCNotFoundError",
    "RPCResult",
    "RPCTimeoutError",
    "Registry",
    "ResourceExhaustedError",
    "RetryPolicy",
    "RunStatus",
    "ScheduleAction",
    "ScheduleAlreadyExistsError",
    "ScheduleDescription",
    "ScheduleNotFoundError",
    "SchedulePage",
    "ScheduleSpec",
    "ScheduleTriggerResult",
    "SearchPage",
    "StartFlowOptions",
    "StartFlowResult",
    "Step",
    "StepCompletion",
    "StepDecision",
    "StepList",
    "StepMethod",
    "StepMovement",
    "StepOptions",
    "StepOutput",
    "StepResult",
    "StepTypeDescription",
    "StopType",
    "Stream",
    "StreamDescription",
    "StreamMessage",
    "StreamMessagePage",
    "StreamNotFoundError",
    "StreamStoreConfig",
    "StreamWrite",
    "SubFlow",
    "SubFlowCondition",
    "SubFlowOptions",
    "SubFlowReusePolicy",
    "Telemetry",
    "TimeTravelFailure",
    "TimeTravelOptions",
    "TimeTravelResult",
    "Timer",
    "TravelPoint",
    "TravelPointKind",
    "UnavailableError",
    "Wait",
    "WaitMode",
    "dead_end",
    "force_complete",
    "force_fail",
    "from_json_data",
    "go_to",
    "go_to_many",
    "graceful_complete",
    "rpc",
    "to_json_data",
    "validate_value",
]


if typing.TYPE_CHECKING:
    from engine.engine import Engine


def __getattr__(name: str) -> typing.Any:
    """Import ``Engine`` when it is first asked for (PEP 562)."""
    if name == "Engine":
        from engine.engine import Engine

        Engine.__module__ = "engine"
        globals()["Engine"] = Engine
        return Engine
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


def __dir__() -> list[str]:
    """List ``Engine`` too before it is imported."""
    return sorted({*globals(), "Engine"})


def _public_module() -> None:
    """Name ``engine`` as the module of every public name defined inside the package (as
    httpx does): reprs, tracebacks and docs say ``engine.RunStatus``, not a private path."""
    for name in __all__:
        if name == "Engine":
            continue  # not imported yet: named when it is
        value = globals()[name]
        module = getattr(value, "__module__", None)
        if (
            isinstance(module, str)
            and module.startswith("engine.")
            and name == getattr(value, "__name__", None)
        ):
            value.__module__ = "engine"


_public_module()
