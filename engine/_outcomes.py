"""How a Step attempt ends: the decision ``execute`` returned, or a final failure."""

from __future__ import annotations

import enum


class DecisionKind(enum.StrEnum):
    """What a StepDecision does to the Flow."""

    GO_TO = "GO_TO"
    GRACEFUL_COMPLETE = "GRACEFUL_COMPLETE"
    FORCE_COMPLETE = "FORCE_COMPLETE"
    FORCE_FAIL = "FORCE_FAIL"
    DEAD_END = "DEAD_END"


class OutcomeKind(enum.StrEnum):
    """How a Step execution closed: by one of the decisions, or FAILED after its last attempt."""

    GO_TO = "GO_TO"
    GRACEFUL_COMPLETE = "GRACEFUL_COMPLETE"
    FORCE_COMPLETE = "FORCE_COMPLETE"
    FORCE_FAIL = "FORCE_FAIL"
    DEAD_END = "DEAD_END"
    FAILED = "FAILED"

    @classmethod
    def of(cls, decision: DecisionKind) -> OutcomeKind:
        """Return the outcome of a decision."""
        return cls(decision.value)

    @property
    def is_completion(self) -> bool:
        """Return True for the decisions that record a completion."""
        return self in (OutcomeKind.GRACEFUL_COMPLETE, OutcomeKind.FORCE_COMPLETE)
