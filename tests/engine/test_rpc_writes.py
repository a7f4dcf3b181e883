"""A locked RPC that only writes Attributes commits on PostgreSQL as one call
(``dexlite_commit_rpc_writes``, ``_storage/rpc_writes``): the rows it leaves are those its unit
would, which these tests read back from the tables: the Attribute values (a delete removes the
row), one RPC_COMMITTED history event per RPC numbered as its change-log rows, and those rows
in write order, a delete's value NULL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from engine import Attribute, Context, EngineConfig, Flow, StepList, rpc
from tests.conftest import running_engine
from tests.engine.test_shared_rpc_locks import _sql
from tests.support.backends import postgres_only
from tests.support.statements_heard import Heard, statements_heard

pytestmark = postgres_only("the one-call commit of an RPC's writes is PostgreSQL's")


class NoteFlow(Flow[None]):
    total = Attribute("total", int)
    note = Attribute("note", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc(lock_attributes=(total.lock(), note.lock()))
    def put(self, context: Context, text: str) -> int:
        value = (self.total.get(context) or 0) + 1
        self.total.set(context, value)
        self.note.set(context, text)
        return value

    @rpc(lock_attributes=(total.lock(),))
    def bump(self, context: Context) -> int:
        value = (self.total.get(context) or 0) + 1
        self.total.set(context, value)
        return value

    @rpc(lock_attributes=(note.lock(),))
    def forget(self, context: Context) -> None:
        self.note.delete(context)


@pytest.fixture
def statements() -> Iterator[list[Heard]]:
    """The text of every statement the engines run from now on."""
    with statements_heard() as heard:
        yield heard


async def test_a_writes_only_rpc_commits_its_values_history_and_change_log_in_one_call(
    engine_config: EngineConfig, statements: list[Heard]
) -> None:
    url = engine_config.database_url
    async with running_engine([NoteFlow()], engine_config) as eng:
        started = await eng.start_flow(NoteFlow, "n")
        statements.clear()
        assert await eng.invoke_rpc("put", "n", "hello") == 1
        assert await eng.invoke_rpc("bump", "n") == 2
        assert await eng.invoke_rpc("forget", "n") is None
        assert (await eng.get_attributes("n", ["total", "note"])).values == {"total": 2}
    calls = [h for h in statements if "dexlite_commit_rpc_writes" in h.statement]
    assert len(calls) == 3  # every commit went as the one call, none as a unit

    run = started.run_id
    values = await _sql(
        url, "SELECT name, value FROM attributes WHERE run_id = :r ORDER BY name", r=run
    )
    assert values == [("total", "2")]  # the deleted note left no row
    events = await _sql(
        url,
        "SELECT details, commit_seq FROM history WHERE run_id = :r "
        "AND event_type = 'RPC_COMMITTED' ORDER BY id",
        r=run,
    )
    details = [json.loads(d) for d, _ in events]
    assert [(d["rpc"], d["attributes"]) for d in details] == [
        ("put", ["note", "total"]),
        ("bump", ["total"]),
        ("forget", ["note"]),
    ]
    seqs = [seq for _, seq in events]
    assert seqs == [seqs[0], seqs[0] + 1, seqs[0] + 2] and seqs[0] >= 1
    logged = await _sql(
        url,
        "SELECT commit_seq, pos, kind, name, value FROM change_log WHERE run_id = :r "
        "AND commit_seq >= :first ORDER BY commit_seq, pos",
        r=run,
        first=seqs[0],
    )
    first = seqs[0]
    assert logged == [
        (first, 1, "W", "total", "1"),
        (first, 2, "W", "note", '"hello"'),
        (first + 1, 1, "W", "total", "2"),
        (first + 2, 1, "W", "note", None),
    ]
