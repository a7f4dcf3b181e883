"""Snapshot reads that arrive together are read together (``_storage/read_groups``).

Many GetAttributes calls at once on distinct Flows each read a snapshot; on PostgreSQL those
that arrive while one of their kind is on its way go in one round trip, the read wrapped
to answer each caller's tag first. SQLAlchemy's ``before_cursor_execute`` listeners hear every
statement (a grouped one once per member, with the tag), so the tests see the grouping; a
proxy in front of the server cuts a group's connection to show that its reads are then read
again one by one, each answering its own Flow's values.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import Engine, EngineConfig
from engine._storage.postgres.statement_groups import TAG
from patterns.primitives.rpc.flow import CounterFlow
from tests.conftest import running_engine
from tests.support import backends
from tests.support.backends import postgres_only
from tests.support.statements_heard import Heard, statements_heard
from tests.support.tcp_proxy import CuttingProxy

pytestmark = postgres_only("read groups are PostgreSQL's")

FLOWS = 40
ROUNDS = 3


@pytest.fixture
def statements() -> Iterator[list[Heard]]:
    """The text of every statement the engines run from now on."""
    with statements_heard() as heard:
        yield heard


async def _counters_set(eng: Engine) -> None:
    """Flow c<n>'s counter is n."""
    for n in range(FLOWS):
        await eng.start_flow(CounterFlow, f"c{n}")
        await eng.invoke_rpc("increment", f"c{n}", n)


async def _read_all_at_once(eng: Engine) -> None:
    """Read every Flow's counter, all at once, ROUNDS times; each reads its own value."""
    for _ in range(ROUNDS):
        found = await asyncio.gather(
            *(eng.get_attributes(f"c{n}", ["counter"]) for n in range(FLOWS))
        )
        assert [f.values for f in found] == [{"counter": n} for n in range(FLOWS)]


async def test_reads_at_once_go_in_groups_and_each_answers_its_own_flow(
    engine_config: EngineConfig, statements: list[Heard]
) -> None:
    async with running_engine([CounterFlow()], engine_config) as eng:
        await _counters_set(eng)
        statements.clear()
        await _read_all_at_once(eng)
    grouped = [h for h in statements if TAG in h.statement]
    # All but the first read of each round waited for it and went together.
    assert len(grouped) >= (FLOWS - 1) * ROUNDS, len(grouped)


async def test_with_group_reads_off_every_read_goes_alone(
    engine_config: EngineConfig, statements: list[Heard]
) -> None:
    config = dataclasses.replace(engine_config, group_reads=False)
    async with running_engine([CounterFlow()], config) as eng:
        await _counters_set(eng)
        statements.clear()
        await _read_all_at_once(eng)
    assert [h for h in statements if TAG in h.statement] == []


async def test_a_group_whose_connection_is_cut_is_read_again_one_by_one(
    engine_config: EngineConfig, tmp_path: Path, statements: list[Heard]
) -> None:
    url = backends.database_url_for(tmp_path)
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    with CuttingProxy(host, int(port)) as proxy:
        proxied = url.replace(host_port, f"127.0.0.1:{proxy.port}")
        config = dataclasses.replace(engine_config, database_url=proxied)
        async with running_engine([CounterFlow()], config) as eng:
            await _counters_set(eng)
            # The first grouped read (its text starts with the tag) reaches the server, and
            # its connection is reset before the answer comes back.
            tagged = tuple(f"SELECT ${n}::INT4 AS {TAG.upper()}" for n in range(1, 10))
            proxy.cut_after_commit(1, also=tagged, within=())
            statements.clear()
            await _read_all_at_once(eng)
            assert proxy.commits_cut == 1
    assert any(TAG in h.statement for h in statements)
