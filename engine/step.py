"""Steps, their options and the decisions their ``execute`` returns."""

from __future__ import annotations

from collections.abc import Awaitable, Generator, Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine._outcomes import DecisionKind
from engine.attribute import AttributeLock, AttributeMapLoad
from engine.errors import DefinitionError

if TYPE_CHECKING:
    from engine.attribute import AttributeMap
    from engine.channel import Channel, ChannelMap, ChannelMapLoad
    from engine.context import Context

I = TypeVar("I")  # noqa: E741 - the Step's input type, named as in Dex's examples


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed Step attempt is retried: up to ``max_attempts`` with exponential backoff."""

    max_attempts: int = 3
    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    max_interval: timedelta = timedelta(seconds=60)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise DefinitionError("RetryPolicy.max_attempts must be at least 1")
        if self.backoff_coefficient < 1:
            raise DefinitionError("RetryPolicy.backoff_coefficient must be at least 1")
        if self.initial_interval < timedelta(0) or self.max_interval < self.initial_interval:
            raise DefinitionError("RetryPolicy intervals must satisfy 0 <= initial <= max")

    def delay_before(self, attempt: int) -> float:
        """Return the delay in seconds before ``attempt`` (2 is the first retry)."""
        delay = self.initial_interval.total_seconds() * self.backoff_coefficient ** (attempt - 2)
        return min(delay, self.max_interval.total_seconds())


@dataclass(frozen=True)
class StepOptions:
    """Per-method locks, loads and retries of a Step (returned by ``get_step_options``).

    Loads select what each method reads beyond singleton Attributes and Channel sizes: whole
    AttributeMaps or exact instances, and the pending messages of Channels, whole ChannelMaps
    or exact ChannelMap instances.
    """

    wait_for_lock_attributes: tuple[AttributeLock, ...] = ()
    execute_lock_attributes: tuple[AttributeLock, ...] = ()
    wait_for_retry: RetryPolicy | None = None
    execute_retry: RetryPolicy | None = None
    wait_for_load_attribute_maps: tuple[AttributeMap[Any], ...] = ()
    wait_for_load_attribute_map_instances: tuple[AttributeMapLoad, ...] = ()
    execute_load_attribute_maps: tuple[AttributeMap[Any], ...] = ()
    execute_load_attribute_map_instances: tuple[AttributeMapLoad, ...] = ()
    failure_step: type[Step[Any]] | None = None
    wait_for_load_channels: tuple[Channel[Any], ...] = ()
    wait_for_load_channel_maps: tuple[ChannelMap[Any], ...] = ()
    wait_for_load_channel_map_instances: tuple[ChannelMapLoad, ...] = ()
    execute_load_channels: tuple[Channel[Any], ...] = ()
    execute_load_channel_maps: tuple[ChannelMap[Any], ...] = ()
    execute_load_channel_map_instances: tuple[ChannelMapLoad, ...] = ()


class Step(Generic[I]):
    """One unit of a Flow. Override ``execute``; optionally ``wait_for`` and options.

    A Step may define ``wait_for(self, context, input) -> Wait`` (``def`` or ``async def``);
    ``execute`` then runs once the Wait holds. After registration ``self.flow`` is the Flow
    instance the Step belongs to.
    """

    flow: Any

    def get_step_options(self) -> StepOptions:
        """Return this Step's locks, loads and retry policies (none by default)."""
        return StepOptions()

    def execute(self, context: Context, input: I) -> StepResult:
        """Do the Step's work and decide what comes next."""
        raise NotImplementedError

    @classmethod
    def step_type(cls) -> str:
        """Return the Step type name (the class name)."""
        return cls.__name__


@dataclass(frozen=True)
class StepMovement:
    """A transition to a new Step execution of ``step`` with ``input``."""

    step: type[Step[Any]]
    input: Any = None

    @classmethod
    def of(cls, step: type[Step[Any]] | Step[Any], input: Any = None) -> StepMovement:
        """Return a movement to ``step`` (a Step class or instance)."""
        return cls(_step_class(step), input)


def _step_class(step: type[Step[Any]] | Step[Any]) -> type[Step[Any]]:
    cls = step if isinstance(step, type) else type(step)
    if not issubclass(cls, Step):
        raise DefinitionError(f"{step!r} is not a Step")
    return cls


@dataclass(frozen=True)
class StepDecision:
    """What ``execute`` decided; build it with the helper functions below."""

    kind: DecisionKind
    movements: tuple[StepMovement, ...] = ()
    output: Any = None
    error_type: str | None = None
    error_message: str | None = None
    canceling_steps: tuple[type[Step[Any]], ...] = field(default=())

    def with_canceling_steps(self, *steps: type[Step[Any]]) -> StepDecision:
        """Also cancel every active Step of these types when this decision commits."""
        return replace(self, canceling_steps=self.canceling_steps + tuple(map(_step_class, steps)))


def go_to(step: type[Step[Any]] | Step[Any], input: Any = None) -> StepDecision:
    """Continue with one new Step execution."""
    return StepDecision(DecisionKind.GO_TO, (StepMovement.of(step, input),))


def go_to_many(*movements: StepMovement | Iterable[StepMovement]) -> StepDecision:
    """Continue with several Step executions in parallel."""
    flat: list[StepMovement] = []
    for m in movements:
        flat.extend([m] if isinstance(m, StepMovement) else m)
    if not flat:
        raise DefinitionError("go_to_many needs at least one StepMovement")
    return StepDecision(DecisionKind.GO_TO, tuple(flat))


def graceful_complete(output: Any = None) -> StepDecision:
    """Record ``output`` as a completion; the Flow completes when no other Step is active."""
    return StepDecision(DecisionKind.GRACEFUL_COMPLETE, output=output)


def force_complete(output: Any = None) -> StepDecision:
    """Record ``output`` and complete the Flow now, canceling every other active Step."""
    return StepDecision(DecisionKind.FORCE_COMPLETE, output=output)


def force_fail(message: str = "", error_type: str = "ForceFail") -> StepDecision:
    """Fail the Flow now with ``error_type`` and ``message``, canceling every other Step."""
    return StepDecision(DecisionKind.FORCE_FAIL, error_type=error_type, error_message=message)


def dead_end() -> StepDecision:
    """End this branch without a completion; the Flow keeps running."""
    return StepDecision(DecisionKind.DEAD_END)


@dataclass(frozen=True)
class StepList(Generic[I]):
    """The Steps of a Flow: an optional start Step and the others it can move to."""

    start: Step[I] | None = None
    others: tuple[Step[Any], ...] = ()

    @classmethod
    def start_step(cls, step: Step[I]) -> StepList[I]:
        """Return a list whose start Step is ``step``."""
        if not isinstance(step, Step):
            raise DefinitionError(f"start step must be a Step instance, got {step!r}")
        return cls(step)

    @classmethod
    def empty(cls) -> StepList[Any]:
        """Return the list of an RPC-only Flow (started with a null input)."""
        return cls()

    def other_steps(self, *steps: Step[Any]) -> StepList[I]:
        """Add Steps reachable by movements."""
        for s in steps:
            if not isinstance(s, Step):
                raise DefinitionError(f"other steps must be Step instances, got {s!r}")
        return replace(self, others=self.others + steps)

    def all(self) -> tuple[Step[Any], ...]:
        """Return every Step, the start Step first."""
        return ((self.start,) if self.start is not None else ()) + self.others


#: What ``execute`` may return: a decision, from a ``def``, an ``async def`` (awaitable), or a
#: ``def`` generator that yields Stream writes and heartbeats and returns the decision.
StepResult = StepDecision | Awaitable[StepDecision] | Generator[Any, Any, StepDecision]
