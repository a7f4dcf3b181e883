"""Index rows and SearchFlows through the engine API (issue 3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Context,
    DefinitionError,
    EngineConfig,
    Flow,
    IndexType,
    InvalidArgumentError,
    InvalidPageTokenError,
    InvalidQueryError,
    Registry,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Wait,
    dead_end,
    rpc,
)
from tests.conftest import running_engine
from tests.support.flow_clients import ServeFlows


class Hold(Step[None]):
    """Writes ``phase`` in wait_for, then waits in execute until the test releases it."""

    release: asyncio.Event

    def wait_for(self, context: Context, input: None) -> Wait:
        self.flow.phase.set(context, "waited")
        return Wait.skip_immediately()

    async def execute(self, context: Context, input: None) -> StepDecision:
        await Hold.release.wait()
        self.flow.phase.set(context, "executed")
        return dead_end()


class SearchFlow(Flow[None]):
    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    progress = AttributeMap("progress", str, index=AttributeIndex(IndexType.KEYWORD, "keyword2"))
    phase = Attribute("phase", str, index=AttributeIndex(IndexType.KEYWORD, "keyword3"))
    loose = Attribute("loose", Any, index=AttributeIndex(IndexType.INT, "int1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(Hold())

    @rpc
    def set_progress(self, context: Context, input: list[list[str]]) -> RPCResult[None]:
        for instance, value in input:
            self.progress.set(context, instance, value)
        return RPCResult(None)

    @rpc
    def delete_progress(self, context: Context, input: str) -> RPCResult[None]:
        self.progress.delete(context, input)
        return RPCResult(None)

    @rpc
    def set_loose(self, context: Context, input: Any) -> RPCResult[None]:
        self.loose.set(context, input)
        self.status.set(context, "written")
        return RPCResult(None)

    @rpc
    def hold(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Hold, None),))


class OtherFlow(Flow[None]):
    """Indexes ``status`` under SearchFlow's key: a search scoped to one type must not see it."""

    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


class ColorFlow(Flow[None]):
    """Indexes ``color`` under its own name, the default key."""

    color = Attribute("color", str, index=AttributeIndex(IndexType.KEYWORD))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


async def found(eng: Any, query: str, **kwargs: Any) -> set[str]:
    page = await eng.search_flows(query, **kwargs)
    return {f.flow_id for f in page.flows}


async def test_the_last_instance_write_of_a_commit_sets_the_map_search_value(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([SearchFlow()]) as flows:
        await flows.start_flow(SearchFlow, "f")
        await flows.invoke_rpc("set_progress", "f", [["payment", "paid"], ["shipping", "sent"]])
        assert await found(flows, "keyword2 = 'sent'") == {"f"}
        assert await found(flows, "keyword2 = 'paid'") == set()


async def test_deleting_any_map_instance_removes_the_map_search_value(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([SearchFlow()]) as flows:
        await flows.start_flow(SearchFlow, "f")
        await flows.invoke_rpc("set_progress", "f", [["payment", "paid"]])
        await flows.invoke_rpc("set_progress", "f", [["shipping", "sent"]])
        # A deletion is a write of the shared search field, like any instance write.
        await flows.invoke_rpc("delete_progress", "f", "payment")
        assert await found(flows, "keyword2 IS NULL") == {"f"}
        assert (await flows.describe_flow("f")).indexed_attributes == {}


async def test_wait_for_and_execute_writes_are_indexed_in_their_commits(
    engine_config: EngineConfig,
) -> None:
    Hold.release = asyncio.Event()
    async with running_engine([SearchFlow()], engine_config) as eng:
        await eng.start_flow(SearchFlow, "f")
        await eng.invoke_rpc("hold", "f")
        match = await eng.wait_for_attribute_match("f", "phase", "EQ", "waited", wait_seconds=5)
        assert match.matched
        assert await found(eng, "keyword3 = 'waited'") == {"f"}
        Hold.release.set()
        match = await eng.wait_for_attribute_match("f", "phase", "EQ", "executed", wait_seconds=5)
        assert match.matched
        assert await found(eng, "keyword3 = 'executed'") == {"f"}


async def test_a_value_the_index_type_cannot_hold_fails_the_write(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([SearchFlow()]) as flows:
        await flows.start_flow(SearchFlow, "f")
        with pytest.raises(InvalidArgumentError, match="cannot index"):
            await flows.invoke_rpc("set_loose", "f", "not a number")
        with pytest.raises(InvalidArgumentError, match="cannot index"):
            await flows.invoke_rpc("set_loose", "f", True)
        assert await found(flows, "keyword1 = 'written'") == set()  # nothing committed
        await flows.invoke_rpc("set_loose", "f", 12)
        assert await found(flows, "int1 = 12 AND keyword1 = 'written'") == {"f"}


async def test_index_rows_survive_a_restart(engine_config: EngineConfig) -> None:
    async with running_engine([SearchFlow()], engine_config) as eng:
        await eng.start_flow(
            SearchFlow,
            "f",
            options=StartFlowOptions(initial_attributes={"status": "kept", "progress/a": "p"}),
        )
    async with running_engine([SearchFlow()], engine_config) as eng:
        assert await found(eng, "keyword1 = 'kept' AND keyword2 = 'p'") == {"f"}


async def test_a_flow_type_scope_cannot_be_widened_by_any_caller_filter(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([SearchFlow(), OtherFlow()]) as flows:
        for flow_id, flow in (("mine", SearchFlow), ("other", OtherFlow)):
            await flows.start_flow(
                flow, flow_id, options=StartFlowOptions(initial_attributes={"status": "x"})
            )
        escape = "keyword1 = 'y' OR FlowType = 'OtherFlow'"
        assert await found(flows, escape, flow_type="SearchFlow") == set()
        assert await found(flows, "keyword1 = 'x'", flow_type="SearchFlow") == {"mine"}
        assert await found(flows, "", flow_type="OtherFlow") == {"other"}
        # Text that would close the scope's parenthesis is not a filter on its own: refused.
        for hostile in (
            "keyword1 = 'y') OR (FlowType = 'OtherFlow'",
            "keyword1 = 'y' ) OR FlowType != ''",
        ):
            with pytest.raises(InvalidQueryError):
                await flows.search_flows(hostile, flow_type="SearchFlow")


async def test_page_size_and_token_are_checked_by_the_engine(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([SearchFlow()]) as flows:
        for i in range(3):
            await flows.start_flow(SearchFlow, f"f{i}")
        for size in (0, 1001, True, 2.5):
            with pytest.raises(InvalidArgumentError, match="pageSize"):
                await flows.search_flows("", size)  # type: ignore[arg-type]
        page = await flows.search_flows("", 2)
        assert len(page.flows) == 2 and page.next_page_token
        with pytest.raises(InvalidPageTokenError):
            await flows.search_flows("", 2, page.next_page_token, flow_type="SearchFlow")
        rest = await flows.search_flows("", 2, page.next_page_token)
        assert len(rest.flows) == 1 and rest.next_page_token == ""


async def test_order_by_close_time_puts_open_runs_last_in_ascending_order(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([SearchFlow()]) as flows:
        for flow_id in ("a", "b", "c"):
            await flows.start_flow(SearchFlow, flow_id)
        await flows.stop_flow("b")
        await flows.stop_flow("a")
        order = [f.flow_id for f in (await flows.search_flows("ORDER BY CloseTime")).flows]
        assert order == ["b", "a", "c"]
        pages, token = [], ""
        while True:
            page = await flows.search_flows("ORDER BY CloseTime ASC, FlowId DESC", 1, token)
            pages.extend(f.flow_id for f in page.flows)
            token = page.next_page_token
            if not token:
                break
        assert pages == ["b", "a", "c"]


async def test_a_regular_attribute_is_searchable_under_its_name_by_default(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([ColorFlow()]) as flows:
        await flows.start_flow(
            ColorFlow, "f", options=StartFlowOptions(initial_attributes={"color": "red"})
        )
        assert await found(flows, "color = 'red'") == {"f"}
        assert (await flows.describe_flow("f")).indexed_attributes == {"color": "red"}


async def test_search_arguments_of_the_wrong_type_are_rejected(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([SearchFlow()]) as flows:
        with pytest.raises(InvalidQueryError):
            await flows.search_flows(["keyword1 = 'a'"])  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="flow_type"):
            await flows.search_flows("", flow_type=["SearchFlow"])  # type: ignore[arg-type]


class NamedKeyFlow(Flow[None]):
    """Indexed under its Attribute name (the default key), which is not an identifier."""

    status = Attribute("primitive-attribute-status", str, index=AttributeIndex(IndexType.KEYWORD))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


async def test_a_default_index_key_that_is_not_an_identifier_is_searched_in_backticks(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([NamedKeyFlow()]) as flows:
        for flow_id, status in (("a", "waiting"), ("b", "done")):
            options = StartFlowOptions(initial_attributes={"primitive-attribute-status": status})
            await flows.start_flow(NamedKeyFlow, flow_id, options=options)
        found = await flows.search_flows("`primitive-attribute-status` = 'done'")
        ordered = await flows.search_flows(
            "`primitive-attribute-status` IS NOT NULL ORDER BY FlowId DESC"
        )
        info = await flows.describe_flow("a")
        with pytest.raises(InvalidQueryError):
            await flows.search_flows("primitive-attribute-status = 'done'")  # unquoted: a minus
    assert [f.flow_id for f in found.flows] == ["b"]
    assert [f.flow_id for f in ordered.flows] == ["b", "a"]
    assert info.indexed_attributes == {"primitive-attribute-status": "waiting"}


@pytest.mark.parametrize(
    ("key", "message"),
    [("FlowType", "reserved system field"), ("odd`key", "without a backtick"), (" ", "1 to 256")],
)
def test_an_index_key_colliding_with_a_system_field_or_unquotable_is_refused(
    key: str, message: str
) -> None:
    class Bad(Flow[None]):
        value = Attribute("value", str, index=AttributeIndex(IndexType.KEYWORD, key))

        def get_steps(self) -> StepList[None]:
            return StepList.empty()

    with pytest.raises(DefinitionError, match=message):
        Registry([Bad()])
