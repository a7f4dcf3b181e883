"""The system fields of SearchFlows, defined once: the query compiler reads their columns and the
Registry refuses index keys that would shadow them."""

from __future__ import annotations

from dataclasses import dataclass

from engine._enums import IndexType


@dataclass(frozen=True)
class SystemField:
    """A field of every run: its name in queries, how it compares, and where it is stored.

    Most are columns of ``runs``; ParentFlowId and ParentRunId are columns of
    ``subflow_links``, the row a SubFlow run has (keyed by the child's run ID). A ``nullable``
    field may be unset.
    """

    name: str
    type: IndexType
    column: str
    table: str = "runs"
    nullable: bool = False


#: By name, in the order error messages list them. CloseTime is NULL while the run is open;
#: ParentFlowId and ParentRunId are unset unless the run is a SubFlow, ScheduleId unless a
#: Schedule's action started it.
SYSTEM_FIELDS: dict[str, SystemField] = {
    field.name: field
    for field in (
        SystemField("FlowType", IndexType.KEYWORD, "flow_type"),
        SystemField("FlowId", IndexType.KEYWORD, "flow_id"),
        SystemField("RunId", IndexType.KEYWORD, "run_id"),
        SystemField("Status", IndexType.KEYWORD, "status"),
        SystemField("StartTime", IndexType.DATETIME, "started_at"),
        SystemField("CloseTime", IndexType.DATETIME, "closed_at", nullable=True),
        SystemField(
            "ParentFlowId", IndexType.KEYWORD, "parent_flow_id", "subflow_links", nullable=True
        ),
        SystemField(
            "ParentRunId", IndexType.KEYWORD, "parent_run_id", "subflow_links", nullable=True
        ),
        SystemField("ScheduleId", IndexType.KEYWORD, "schedule_id", nullable=True),
    )
}


def is_system_field(name: str) -> bool:
    """Return True when ``name`` is a system field, compared without regard to case."""
    return name.lower() in {field.lower() for field in SYSTEM_FIELDS}
