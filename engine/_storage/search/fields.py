"""The system fields of SearchFlows, defined once: the query compiler reads their columns and the
Registry refuses index keys that would shadow them."""

from __future__ import annotations

from dataclasses import dataclass

from engine.attribute import IndexType


@dataclass(frozen=True)
class SystemField:
    """A field every run has: its name in queries, how it compares, its column of ``runs``."""

    name: str
    type: IndexType
    column: str


#: By name, in the order error messages list them. CloseTime is NULL while the run is open.
SYSTEM_FIELDS: dict[str, SystemField] = {
    field.name: field
    for field in (
        SystemField("FlowType", IndexType.KEYWORD, "flow_type"),
        SystemField("FlowId", IndexType.KEYWORD, "flow_id"),
        SystemField("RunId", IndexType.KEYWORD, "run_id"),
        SystemField("Status", IndexType.KEYWORD, "status"),
        SystemField("StartTime", IndexType.DATETIME, "started_at"),
        SystemField("CloseTime", IndexType.DATETIME, "closed_at"),
    )
}


def is_system_field(name: str) -> bool:
    """Return True when ``name`` is a system field, compared without regard to case."""
    return name.lower() in {field.lower() for field in SYSTEM_FIELDS}
