"""Several processes starting at once on one new PostgreSQL database: one migrates, the others
wait under the advisory lock and find nothing left to do."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from engine._storage import schema
from tests.support.backends import PREFIX, admin_connection, postgres_url


async def test_concurrent_upgrades_of_an_empty_database_all_succeed_once() -> None:
    admin = await admin_connection()
    name = f"{PREFIX}schema_{uuid.uuid4().hex[:12]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    engines = [create_async_engine(postgres_url(name)) for _ in range(4)]
    try:

        async def upgrade(index: int) -> str | None:
            async with engines[index].begin() as conn:
                await conn.run_sync(schema.upgrade_postgres)
            async with engines[index].connect() as conn:
                return await conn.run_sync(schema.current_revision)

        revisions = await asyncio.gather(*(upgrade(i) for i in range(4)))
        async with engines[0].connect() as conn:
            versions = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
            runs = (
                await conn.execute(text("SELECT count(*) FROM pg_tables WHERE tablename = 'runs'"))
            ).scalar()
    finally:
        for engine in engines:
            await engine.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    assert revisions == [schema.head_revision()] * 4
    assert [tuple(v) for v in versions] == [(schema.head_revision(),)]
    assert runs == 1
