"""SQL tracing sees every statement: the hot-path statements that skip ``Connection.execute``
(prepared once, run on the driver) call SQLAlchemy's ``before_cursor_execute`` listeners too,
on SQLite and on PostgreSQL, so a tracer needs no patching."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine as SQLAlchemyEngine

from engine import Channel, EngineConfig, Flow, StepList
from tests.conftest import running_engine


class InboxFlow(Flow[None]):
    """A Flow with one Channel and no Steps: it stays open for publications."""

    inbox = Channel("inbox", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


async def test_a_publication_s_prepared_insert_reaches_the_before_cursor_execute_listeners(
    engine_config: EngineConfig,
) -> None:
    seen: list[tuple[str, Any, bool]] = []

    def record(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        seen.append((statement, parameters, many))

    async with running_engine([InboxFlow()], engine_config) as eng:
        await eng.start_flow(InboxFlow, "traced")
        event.listen(SQLAlchemyEngine, "before_cursor_execute", record)
        try:
            message_id = await eng.publish_to_channel("traced", "inbox", "hello")
        finally:
            event.remove(SQLAlchemyEngine, "before_cursor_execute", record)
        before_removal = len(seen)
        await eng.publish_to_channel("traced", "inbox", "unseen")
    inserts = [
        (parameters, many)
        for statement, parameters, many in seen
        if statement.lstrip().upper().startswith("INSERT INTO CHANNEL_MESSAGES")
    ]
    assert len(inserts) == 1, seen
    parameters, many = inserts[0]
    assert many is True  # the message rows go in as one executemany
    flat = json.dumps(parameters, default=str)
    assert message_id in flat and "hello" in flat
    assert len(seen) == before_removal  # a removed listener hears nothing more
