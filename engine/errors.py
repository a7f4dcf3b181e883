"""Errors raised by the engine.

Every error a caller can handle derives from :class:`EngineError` and carries structured fields,
its problem ``code`` and whether retrying the same call can succeed (``retryable``). The HTTP
layer maps the intermediate bases to status codes, so an application can add its own leaf (a
``NotFoundError`` with its own code, say) without the HTTP layer knowing it::

    EngineError
    ├── InvalidArgumentError                 INVALID_ARGUMENT
    │   ├── InvalidQueryError                INVALID_QUERY
    │   └── InvalidPageTokenError            INVALID_PAGE_TOKEN
    ├── NotFoundError
    │   ├── FlowTypeNotFoundError            FLOW_TYPE_NOT_FOUND
    │   ├── FlowNotFoundError                FLOW_NOT_FOUND
    │   ├── FlowNotActiveOrNotFoundError     FLOW_NOT_ACTIVE_OR_NOT_FOUND
    │   ├── RPCNotFoundError                 RPC_NOT_FOUND
    │   ├── StreamNotFoundError              STREAM_NOT_FOUND
    │   └── ChannelMessageNotFoundError      CHANNEL_MESSAGE_NOT_FOUND
    ├── ConflictError
    │   ├── FlowAlreadyStartedError          FLOW_ALREADY_STARTED
    │   ├── RPCLockConflictError             RPC_LOCK_CONFLICT (retryable)
    │   └── FailedPreconditionError          FAILED_PRECONDITION
    ├── ResourceExhaustedError               RESOURCE_EXHAUSTED (retryable unless it never fits)
    ├── RPCHandlerError                      RPC_HANDLER_ERROR
    ├── RPCTimeoutError                      RPC_TIMEOUT
    ├── UnavailableError                     UNAVAILABLE (retryable)
    └── ProgrammingError                     (a bug in a Flow: reaches callers as RPC_HANDLER_ERROR)
        ├── DefinitionError
        ├── AttributeMapNotLoadedError
        ├── ChannelMessagesNotLoadedError
        └── InvalidStepResultError
"""

from __future__ import annotations

from typing import Any, ClassVar


class EngineError(Exception):
    """Root of every error the engine raises on purpose."""

    #: The problem code clients see; every leaf names its own.
    code: ClassVar[str] = "INTERNAL"
    #: Whether the same call may succeed when retried after a short delay.
    retryable: bool = False

    def __init__(
        self,
        detail: str,
        *,
        flow_id: str | None = None,
        operation: str | None = None,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.flow_id = flow_id
        self.operation = operation
        self.field = field
        self.extra: dict[str, Any] = dict(extra or {})


# -- bad input --------------------------------------------------------------------------------


class InvalidArgumentError(EngineError):
    """An argument breaks a rule: a name, an instance key, a duration, a page size, an option."""

    code = "INVALID_ARGUMENT"


class InvalidQueryError(InvalidArgumentError):
    """A SearchFlows query cannot be parsed or checked; ``position`` says where."""

    code = "INVALID_QUERY"

    def __init__(self, detail: str, *, position: int | None = None, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.position = position


class InvalidPageTokenError(InvalidArgumentError):
    """A page token is malformed or was issued for another query."""

    code = "INVALID_PAGE_TOKEN"


# -- not found --------------------------------------------------------------------------------


class NotFoundError(EngineError):
    """What the call names does not exist (or is not available to this operation)."""

    code = "NOT_FOUND"


class FlowTypeNotFoundError(NotFoundError):
    """No Flow type of that name is registered."""

    code = "FLOW_TYPE_NOT_FOUND"


class FlowNotFoundError(NotFoundError):
    """No Flow (or no run of it) with that ID exists."""

    code = "FLOW_NOT_FOUND"


class FlowNotActiveOrNotFoundError(NotFoundError):
    """The Flow does not exist, or the operation cannot use its closed run."""

    code = "FLOW_NOT_ACTIVE_OR_NOT_FOUND"


class RPCNotFoundError(NotFoundError):
    """The Flow type declares no RPC of that name."""

    code = "RPC_NOT_FOUND"


class StreamNotFoundError(NotFoundError):
    """The Flow type declares no Stream of that name."""

    code = "STREAM_NOT_FOUND"


class ChannelMessageNotFoundError(NotFoundError):
    """The Channel message is no longer pending."""

    code = "CHANNEL_MESSAGE_NOT_FOUND"


class ScheduleNotFoundError(NotFoundError):
    """No Schedule with that ID exists."""

    code = "SCHEDULE_NOT_FOUND"


# -- conflicts --------------------------------------------------------------------------------


class ConflictError(EngineError):
    """The call conflicts with the current state of the Flow or the server."""

    code = "CONFLICT"


class FlowAlreadyStartedError(ConflictError):
    """A run with that Flow ID is already running (or the ID reuse policy refuses a new run)."""

    code = "FLOW_ALREADY_STARTED"

    def __init__(self, detail: str, *, run_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.run_id = run_id


class ScheduleAlreadyExistsError(ConflictError):
    """A Schedule with that ID exists already."""

    code = "SCHEDULE_ALREADY_EXISTS"


class RPCLockConflictError(ConflictError):
    """An RPC asked for an Attribute lock that a Step or another RPC holds; it never queues."""

    code = "RPC_LOCK_CONFLICT"
    retryable = True

    def __init__(self, key: str, holder: str, **kwargs: Any) -> None:
        super().__init__(f"RPC lock conflict: attribute key {key} is locked by {holder}", **kwargs)
        self.key = key
        self.holder = holder


class FailedPreconditionError(ConflictError):
    """The system is not in a state that allows the operation (e.g. the Stream Store is off)."""

    code = "FAILED_PRECONDITION"


# -- capacity and handlers --------------------------------------------------------------------


class ResourceExhaustedError(EngineError):
    """A capacity limit refused the operation; retry after a short delay when ``retryable``."""

    code = "RESOURCE_EXHAUSTED"

    def __init__(self, detail: str, *, retryable: bool = True, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.retryable = retryable


class RPCHandlerError(EngineError):
    """The RPC handler raised; ``error_type`` (``errorType`` on the wire) names its class."""

    code = "RPC_HANDLER_ERROR"

    def __init__(self, detail: str, *, error_type: str, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.error_type = error_type


class RPCTimeoutError(EngineError):
    """The RPC handler did not finish within the RPC's timeout."""

    code = "RPC_TIMEOUT"


class UnavailableError(EngineError):
    """The engine cannot serve the call now: the database could not be reached or did not
    answer in time, or the engine is not serving yet (still recovering) or any more (shutting
    down). Retry after a short delay. Nothing the call would have changed was acknowledged:
    it committed nothing, or its connection was lost while its commit was under way, and then,
    as after any lost answer, the outcome is unknown."""

    code = "UNAVAILABLE"
    retryable = True


# -- programming errors -----------------------------------------------------------------------


class ProgrammingError(EngineError):
    """A Flow's code or declarations are wrong; fix the code rather than retry.

    Raised at registration or inside a handler, so a caller meets one only as the error of the
    RPC whose handler made it.
    """

    code = "RPC_HANDLER_ERROR"


class DefinitionError(ProgrammingError):
    """A Flow, Step, RPC or state declaration is invalid (raised when a Registry is built)."""


class AttributeMapNotLoadedError(ProgrammingError):
    """A handler read an AttributeMap instance that its invocation did not load."""


class ChannelMessagesNotLoadedError(ProgrammingError):
    """A handler read pending Channel messages that its invocation did not load."""


class InvalidStepResultError(ProgrammingError):
    """A Step handler returned something that is not a StepDecision."""
