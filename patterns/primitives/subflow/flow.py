"""FanOutFlow starts N SquareFlow SubFlows, waits for all of them, and completes with their squares.

FanOut's ``wait_for`` returns ``Wait.all_of`` over N ``SubFlow.run`` conditions: the children
start in the same commit that moves the Step into its wait, with the Flow IDs
``SubFlow:<parentFlowId>-FanOut-1-<index>``. Child ``index`` squares ``index + 1`` and records the
square in its own ``primitive-subflow-square`` Attribute; the child at ``fail_index`` (if any)
fails instead. Once every child has closed, FanOut's ``execute`` reads each one with
``SubFlow.get_condition_results`` (status, completions, error) and completes with one outcome
per child in index order: a failed child is reported, not hidden, so the parent still
completes.

Every start of the parent's Flow ID enters FanOut-1 again and so meets the same child Flow IDs.
``SubFlowReusePolicy.ALWAYS_RESTART`` gives each parent run fresh children; the default policy
would hand a new run the squares an earlier run's children completed with, whatever its input.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from engine import (
    Attribute,
    Context,
    Flow,
    FlowResult,
    Step,
    StepDecision,
    StepList,
    SubFlow,
    SubFlowOptions,
    SubFlowReusePolicy,
    Wait,
    force_fail,
    graceful_complete,
)

MIN_CHILDREN = 1
MAX_CHILDREN = 50
DEFAULT_CHILDREN = 3
STATUS_WAITING = "waiting"
STATUS_COMPLETED = "completed"
#: The error type a child asked to fail closes with.
CHILD_FAILURE = "SquareRefused"
#: The Step execution ID the children's Flow IDs derive from: FanOut runs once per parent run.
FAN_OUT_EXECUTION = "FanOut-1"

_CHILD_OPTIONS = SubFlowOptions(reuse_policy=SubFlowReusePolicy.ALWAYS_RESTART)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


def check_fail_index(value: int | None, info: ValidationInfo) -> int | None:
    """Refuse a ``fail_index`` that names no child; a validator of the models that carry one."""
    # `children` is validated first (field order); when it failed there is nothing to compare
    # with, and its own error says why.
    children = info.data.get("children")
    if value is not None and children is not None and value >= children:
        raise ValueError(f"must name one of the {children} children: 0 to {children - 1}")
    return value


class FanOutInput(_Model):
    """How many children to start, and which one (by index) should fail, if any."""

    children: int = Field(default=DEFAULT_CHILDREN, ge=MIN_CHILDREN, le=MAX_CHILDREN)
    fail_index: int | None = Field(default=None, ge=0, lt=MAX_CHILDREN)

    @field_validator("fail_index")
    @classmethod
    def _within_children(cls, value: int | None, info: ValidationInfo) -> int | None:
        return check_fail_index(value, info)


class SquareInput(_Model):
    """One child's work: square ``number``, or fail when ``fail`` is set."""

    index: int = Field(ge=0)
    number: int
    fail: bool = False


class SquareOutput(_Model):
    """What a SquareFlow completes with."""

    index: int
    number: int
    square: int


class ChildOutcome(_Model):
    """What FanOut read of one child through ``SubFlow.get_condition_results``."""

    index: int
    flow_id: str
    run_id: str
    status: str
    square: int | None = None
    error_type: str | None = None
    error_message: str | None = None

    @classmethod
    def of(cls, index: int, result: FlowResult) -> ChildOutcome:
        """Return the outcome of the child at ``index`` from its result."""
        square = None
        if result.completions:
            square = SquareOutput.model_validate(result.completions[0].output).square
        return cls(
            index=index,
            flow_id=result.flow_id,
            run_id=result.run_id,
            status=str(result.status),
            square=square,
            error_type=result.error_type,
            error_message=result.error_message,
        )


class FanOutOutput(_Model):
    """What FanOutFlow completes with: one outcome per child, in index order."""

    children: list[ChildOutcome]
    squares: list[int | None]
    total: int
    failed: int


def child_input(index: int, fail_index: int | None) -> SquareInput:
    """Return the input of the child at ``index``: it squares ``index + 1``."""
    return SquareInput(index=index, number=index + 1, fail=index == fail_index)


def child_flow_id(parent_flow_id: str, index: int) -> str:
    """Return the Flow ID the engine derives for the child at ``index`` of a parent run."""
    return f"SubFlow:{parent_flow_id}-{FAN_OUT_EXECUTION}-{index}"


class Square(Step[SquareInput]):
    """Record the square of the input number and complete with it, or fail when asked to."""

    def execute(self, context: Context, input: SquareInput) -> StepDecision:
        """Complete with ``number`` squared, or fail with SquareRefused."""
        if input.fail:
            # A decision, not an exception: the Step is not retried and the child fails at once.
            return force_fail(f"child {input.index} was asked to fail", error_type=CHILD_FAILURE)
        square = input.number * input.number
        self.flow.square.set(context, square)
        output = SquareOutput(index=input.index, number=input.number, square=square)
        return graceful_complete(output)


class SquareFlow(Flow[SquareInput]):
    """The child: one Step that squares a number."""

    square: Attribute[int] = Attribute("primitive-subflow-square", int)

    def get_steps(self) -> StepList[SquareInput]:
        """Start with Square."""
        return StepList.start_step(Square())


class FanOut(Step[FanOutInput]):
    """Start ``children`` SquareFlows, wait for all of them, and complete with what they did."""

    def wait_for(self, context: Context, input: FanOutInput) -> Wait:
        """Wait for every child; they start in the commit that begins this wait."""
        self.flow.status.set(context, STATUS_WAITING)
        return Wait.all_of(
            *(
                SubFlow.run(SquareFlow, child_input(index, input.fail_index), _CHILD_OPTIONS)
                for index in range(input.children)
            )
        )

    def execute(self, context: Context, input: FanOutInput) -> StepDecision:
        """Read each child's result by its index in the Wait and complete with them in order."""
        outcomes = [
            ChildOutcome.of(index, SubFlow.get_condition_results(context, index))
            for index in range(input.children)
        ]
        squares = [outcome.square for outcome in outcomes]
        self.flow.status.set(context, STATUS_COMPLETED)
        return graceful_complete(
            FanOutOutput(
                children=outcomes,
                squares=squares,
                total=sum(square for square in squares if square is not None),
                failed=sum(outcome.square is None for outcome in outcomes),
            )
        )


class FanOutFlow(Flow[FanOutInput]):
    """The parent: fans out to SquareFlow SubFlows and completes with their squares."""

    status: Attribute[str] = Attribute("primitive-subflow-status", str)

    def get_steps(self) -> StepList[FanOutInput]:
        """Start with FanOut."""
        return StepList.start_step(FanOut())
