"""Hot-path statements are built once per shape: building one costs more than running it."""

from __future__ import annotations

from engine._storage import reads
from engine._storage.records import LoadPlan


def test_snapshot_statements_are_built_once_per_shape() -> None:
    plan = LoadPlan(names=("counter",), instances=(("progress", "a"),))
    same_shape = LoadPlan(names=("counter",), instances=(("progress", "a"),))
    first = reads._snapshot_statement(False, plan)
    assert reads._snapshot_statement(False, same_shape) is first
    assert reads._snapshot_statement(True, plan) is not first
    assert reads._snapshot_statement(False, LoadPlan(names=("other",))) is not first
