"""Errors raised by the engine.

Every error a caller can handle derives from :class:`EngineError` and carries structured
fields. The HTTP layer maps each leaf to a status code; the engine itself knows nothing of HTTP.
"""

from __future__ import annotations

from typing import Any


class EngineError(Exception):
    """Root of every error the engine raises on purpose."""

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


class DefinitionError(EngineError):
    """A Flow, Step, RPC or state declaration is invalid (raised when a Registry is built)."""


class InvalidArgumentError(EngineError):
    """An argument breaks a rule: a name, an instance key, a duration, a page size, an option."""


class InvalidQueryError(InvalidArgumentError):
    """A SearchFlows query cannot be parsed or checked; ``position`` says where."""

    def __init__(self, detail: str, *, position: int | None = None, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.position = position


class InvalidPageTokenError(InvalidArgumentError):
    """A page token is malformed or was issued for another query."""


class FlowTypeNotFoundError(EngineError):
    """No Flow type of that name is registered."""


class FlowNotFoundError(EngineError):
    """No Flow (or no run of it) with that ID exists."""


class FlowNotActiveOrNotFoundError(EngineError):
    """The Flow does not exist, or the operation cannot use its closed run."""


class RPCNotFoundError(EngineError):
    """The Flow type declares no RPC of that name."""


class ChannelMessageNotFoundError(EngineError):
    """The Channel message is no longer pending."""


class FlowAlreadyStartedError(EngineError):
    """A run with that Flow ID is already running (or the ID reuse policy refuses a new run)."""

    def __init__(self, detail: str, *, run_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.run_id = run_id


class RPCLockConflictError(EngineError):
    """An RPC asked for an Attribute lock that a Step or another RPC holds; it never queues."""

    def __init__(self, key: str, holder: str, **kwargs: Any) -> None:
        super().__init__(f"RPC lock conflict: attribute key {key} is locked by {holder}", **kwargs)
        self.key = key
        self.holder = holder


class FailedPreconditionError(EngineError):
    """The system is not in a state that allows the operation (e.g. the Stream Store is off)."""


class ResourceExhaustedError(EngineError):
    """A capacity limit refused the operation; retry after a short delay."""


class RPCHandlerError(EngineError):
    """The RPC handler raised; ``error_type`` names the exception class."""

    def __init__(self, detail: str, *, error_type: str, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.error_type = error_type


class RPCTimeoutError(EngineError):
    """The RPC handler did not finish within the RPC's timeout."""


class AttributeMapNotLoadedError(EngineError):
    """A handler read an AttributeMap instance that its invocation did not load."""


class ChannelMessagesNotLoadedError(EngineError):
    """A handler read pending Channel messages that its invocation did not load."""


class InvalidStepResultError(EngineError):
    """A Step handler returned something that is not a StepDecision."""


class StepCanceled(BaseException):  # noqa: N818 - a signal, not an error
    """Raised inside a canceled Step's staging calls; a ``BaseException`` so ``except
    Exception`` in user code cannot swallow it."""
