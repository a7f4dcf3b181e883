"""A locked RPC that only writes Attributes, committed on PostgreSQL as one statement.

The common RPC (a counter, the chunked pattern's registration) locks some Attributes, writes
them and returns. Committed as a unit, it costs a BEGIN, the run's lock, the writes, the
deferred writes and a COMMIT: five round trips. Here the same changes are one statement, its own
transaction, a call of ``dexlite_commit_rpc_writes``
(``functions/dexlite_commit_rpc_writes.sql``), which drops the RPC's lock rows first and writes
only if it dropped exactly the rows the RPC took (the fence) and the run is still open (the run
found by its ID alone, the rest a filter: ``unit_statements.filter_only`` says why):

- the run's next commit number (as ``rows.lock_run`` takes it inside a journaled unit);
- the Attribute rows (upserts and deletes, the last write to a key winning);
- the ``RPC_COMMITTED`` history event and the change-log rows, as the journal writes them.

It answers what the drop found and what it did, so the caller knows which of four things
happened: all of it (committed), nothing because a Step waits on the Flow (the function
changed nothing: the unit runs instead, granting the Step), the run was not open (the rows are
dropped: the RPC fails as its unit would), or fewer rows than taken with the run open (the
lock was lost: the RPC fails). The run is judged first, as the unit judges it.

Only RPCs whose effects are Attribute writes alone, none to an indexed Attribute, qualify
(:func:`rpc_writes`); every other commit is a unit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine._enums import HistoryEventType
from engine._storage.records import Args, AttributeWrite, CommitResult, RunChange, StagedEffects
from engine._storage.rows import last_writes
from engine._storage.units import rpc_committed_details
from engine.errors import FlowNotActiveOrNotFoundError

#: The commit, its arguments as ``RPCWrites._args`` gives them and whether it keeps the lock
#: rows; it answers ``{dropped, state}``, state 1 committed, 0 the run not open, -1 the rows
#: lost (see ``functions/dexlite_commit_rpc_writes.sql``).
_CALL = """
SELECT dexlite_commit_rpc_writes(
    $1::text, $2::text, $3::varchar, $4::int, $5::int8, $6::varchar[], $7::varchar[],
    $8::text[], $9::bool[], $10::varchar[], $11::varchar[], $12::varchar, $13::text,
    $14::varchar[], $15::varchar[], $16::text[], {keep}
)
"""
SQL = _CALL.format(keep="false")
#: The same writes by an RPC that keeps its lock rows for the next RPC of its process (see
#: ``_runtime/postgres/relay``): ``dexlite_keep_rpc_locks``
#: (``functions/dexlite_keep_rpc_locks.sql``) checks the rows and the run and numbers the
#: commit, raising (SQLSTATE DXL01, DXL02) instead of writing nothing.
KEEP_SQL = _CALL.format(keep="true")

#: The SQLSTATEs ``KEEP_SQL`` raises: the lock rows were lost, the run was not open.
KEPT_LOCKS_LOST = "DXL01"
KEPT_RUN_NOT_OPEN = "DXL02"

#: What the statement found: the run open and the fence held (all written).
COMMITTED = "committed"
#: A Step waits on the Flow: nothing was done, the unit must run (it grants the Step).
WAITERS = "waiters"
#: The run was not open: the lock rows were dropped, nothing was written.
NOT_OPEN = "not open"
#: Fewer lock rows than the RPC took were found (and dropped): nothing was written.
LOST = "lost"


@dataclass(frozen=True)
class RPCWrites:
    """One RPC's writes-only commit, ready to run as one statement."""

    flow_id: str
    run_id: str
    rpc_name: str
    writes: tuple[AttributeWrite, ...]
    history_details: str
    now: int
    #: What the commit changed, as the unit would have answered it.
    result: CommitResult

    def not_open(self) -> FlowNotActiveOrNotFoundError:
        """The error of a run that was not open, as ``units.commit_rpc`` raises it."""
        return FlowNotActiveOrNotFoundError(
            f"Flow {self.flow_id} is not active; RPC {self.rpc_name} has durable effects and "
            "needs an active run",
            flow_id=self.flow_id,
            operation="invokeRpc",
        )

    def statement(self, owner: str, taken: int) -> tuple[str, Args]:
        """The statement and its arguments, to run outside a transaction (it is its own),
        dropping ``owner``'s lock rows, ``taken`` of them expected."""
        return SQL, self._args(owner, taken)

    def kept(self, owner: str, taken: int) -> tuple[str, Args]:
        """The statement and its arguments as ``KEEP_SQL``: the same writes, keeping
        ``owner``'s ``taken`` lock rows (it raises when they are not all there)."""
        return KEEP_SQL, self._args(owner, taken)

    def _args(self, owner: str, taken: int) -> Args:
        latest = last_writes(self.writes)  # as rows.apply_writes applies and logs them
        kept = [w for w in latest if w.value is not None or w.blob]
        gone = [w for w in latest if w.value is None and not w.blob]
        # Hard-delete values are one per Flow ID and never restored: not logged.
        logged = [w for w in latest if not w.hard_delete]
        args = (
            self.flow_id,
            owner,
            self.run_id,
            taken,
            self.now,
            [w.name for w in kept],
            [w.instance for w in kept],
            [w.value for w in kept],
            [w.blob for w in kept],
            [w.name for w in gone],
            [w.instance for w in gone],
            HistoryEventType.RPC_COMMITTED.value,
            self.history_details,
            [w.name for w in logged],
            [w.instance for w in logged],
            [w.value for w in logged],
        )
        return args

    def outcome(self, rows: Sequence[Sequence[Any]], taken: int) -> str:
        """Read the statement's answer: what happened (see the module's constants)."""
        dropped, state = rows[0][0]
        if dropped < 0:
            return WAITERS
        if state == 1 and dropped == taken:
            return COMMITTED
        return NOT_OPEN if state == 0 else LOST


def rpc_writes(
    *, flow_id: str, flow_type: str, run_id: str, rpc_name: str, effects: StagedEffects, now: int
) -> RPCWrites | None:
    """Return the RPC's commit as one statement, or None when its effects are more than
    Attribute writes (or write an indexed Attribute): those commit as a unit."""
    if not effects.writes_only() or any(w.index is not None for w in effects.writes):
        return None
    change = RunChange(flow_id=flow_id, flow_type=flow_type, run_id=run_id, writes=effects.writes)
    return RPCWrites(
        flow_id=flow_id,
        run_id=run_id,
        rpc_name=rpc_name,
        writes=effects.writes,
        history_details=json.dumps(
            rpc_committed_details(rpc_name, effects, ()), separators=(",", ":"), default=str
        ),
        now=now,
        result=CommitResult((change,)),
    )
