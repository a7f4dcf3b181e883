"""The enumerations the declarations, the runtime and storage share, in one leaf module.

Storage needs these values without the Flow, Attribute and option classes around them, so
they live here, below every other module (this one imports only the standard library); the
public modules and ``engine`` re-export them.
"""

from __future__ import annotations

import enum


class IndexType(enum.StrEnum):
    """How an indexed Attribute's value is searchable."""

    KEYWORD = "KEYWORD"
    FULL_TEXT = "FULL_TEXT"
    KEYWORD_ARRAY = "KEYWORD_ARRAY"
    INT = "INT"
    DOUBLE = "DOUBLE"
    BOOL = "BOOL"
    DATETIME = "DATETIME"


class IdReusePolicy(enum.StrEnum):
    """What starting a Flow ID that already has runs does."""

    #: Start a new run when no run is open (the default).
    ALLOW_DUPLICATE = "ALLOW_DUPLICATE"
    #: Start a new run only when the latest run did not complete successfully.
    ALLOW_DUPLICATE_FAILED_ONLY = "ALLOW_DUPLICATE_FAILED_ONLY"
    #: Never start a second run with this Flow ID.
    REJECT_DUPLICATE = "REJECT_DUPLICATE"
    #: Terminate an open run, then start a new one.
    TERMINATE_IF_RUNNING = "TERMINATE_IF_RUNNING"


class SubFlowReusePolicy(enum.StrEnum):
    """What starting a SubFlow does when its derived Flow ID already has a run.

    A start whose Request ID matches the existing run's (a retried start of the same parent
    run) always attaches to it, or returns its result. Otherwise, by the existing run:

    ============================  ========  ===================================  ==============
    existing child                ATTACH    RESTART_IF_PREVIOUS_EXITS_ABNORMALLY  ALWAYS_RESTART
    ============================  ========  ===================================  ==============
    none                          start     start                                start
    running                       attach    attach                               terminate, start
    completed                     result    result                               start
    failed, canceled, timed out,  result    start                                start
    terminated
    ============================  ========  ===================================  ==============
    """

    ATTACH = "ATTACH"
    RESTART_IF_PREVIOUS_EXITS_ABNORMALLY = "RESTART_IF_PREVIOUS_EXITS_ABNORMALLY"
    ALWAYS_RESTART = "ALWAYS_RESTART"


class RunStatus(enum.StrEnum):
    """The status of a run: RUNNING until it closes with one of the others."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TERMINATED = "TERMINATED"
    TIMED_OUT = "TIMED_OUT"


class HistoryEventType(enum.StrEnum):
    """What a history event records; its details say which Step, message or child."""

    FLOW_STARTED = "FLOW_STARTED"
    FLOW_CLOSED = "FLOW_CLOSED"
    STEP_WAITING = "STEP_WAITING"
    STEP_ATTEMPT_FAILED = "STEP_ATTEMPT_FAILED"
    STEP_CLOSED = "STEP_CLOSED"
    RPC_COMMITTED = "RPC_COMMITTED"
    ATTRIBUTES_SET = "ATTRIBUTES_SET"
    CHANNEL_PUBLISHED = "CHANNEL_PUBLISHED"
    CHANNEL_CONSUMED = "CHANNEL_CONSUMED"
    CHANNEL_MESSAGE_DELETED = "CHANNEL_MESSAGE_DELETED"
    SUBFLOW_STARTED = "SUBFLOW_STARTED"
    SUBFLOW_ATTACHED = "SUBFLOW_ATTACHED"
    SUBFLOW_CLOSED = "SUBFLOW_CLOSED"
    #: The run began by time travel from an earlier point of another run.
    TIME_TRAVELED = "TIME_TRAVELED"
    #: A travel applied again what one commit after the point took from outside the Flow.
    WRITES_REAPPLIED = "WRITES_REAPPLIED"
    TIMERS_SKIPPED = "TIMERS_SKIPPED"
