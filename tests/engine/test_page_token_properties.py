"""Property: the next-page token of a real page, cut short, extended, or with characters
inserted or removed, is refused with InvalidPageTokenError or reads exactly the page the
token read; a token of one listing is refused by another.

One Engine serves every example (setting it up per example would dominate the run): a few
Flows, each listing with at least three pages, on the selected backend. Hypothesis examples
are plain functions, so the fixture owns an event loop and runs each engine call on it.
A character *replaced* in a token is refused too (tokens carry a digest): see
``tests/unit/test_codec_and_token_edges.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import (
    Attribute,
    AttributeIndex,
    Channel,
    ChannelMap,
    Engine,
    EngineConfig,
    Flow,
    IndexType,
    InvalidPageTokenError,
    Registry,
    StartFlowOptions,
    StepList,
    Stream,
)
from tests.server import TEST_LEASE_SECONDS, TEST_POLL_SECONDS
from tests.support import backends
from tests.support.page_tokens import TOKEN_ALPHABET

T = TypeVar("T")
FLOWS = 6
PAGE = 2


class Paged(Flow[None]):
    """An RPC-only Flow with something to page through in every listing."""

    kw = Attribute("kw", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    note = Attribute("note", str)
    inbox = Channel("inbox", str)
    boxes = ChannelMap("boxes", str)
    log = Stream("log", str)

    def get_steps(self) -> StepList[None]:
        """No Steps: the Flow only holds state."""
        return StepList.empty()


Reader = Callable[[str], Awaitable[Any]]


@dataclass
class World:
    """The engine, its loop, and per listing: a reader of one page and real tokens of it."""

    loop: asyncio.AbstractEventLoop
    engine: Engine
    readers: dict[str, Reader]
    tokens: dict[str, list[str]]

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one engine call to completion on the world's loop."""
        return self.loop.run_until_complete(coroutine)

    def read(self, listing: str, token: str) -> Any:
        """Return the comparable contents of the page ``token`` opens in ``listing``."""
        return self.run(self._read(listing, token))

    async def _read(self, listing: str, token: str) -> Any:
        """Read the page on the loop."""
        return await self.readers[listing](token)


def _readers(eng: Engine) -> dict[str, Reader]:
    """One page of each listing, reduced to what tells two pages apart."""

    async def search(query: str, token: str, flow_type: str | None = None) -> Any:
        """A SearchFlows page: its run IDs."""
        page = await eng.search_flows(query, PAGE, token, flow_type=flow_type)
        return [f.run_id for f in page.flows], page.next_page_token

    async def events(flow_id: str, token: str) -> Any:
        """A history page: its event numbers and types."""
        page = await eng.get_flow_history(flow_id, page_size=PAGE, page_token=token)
        return [(e.event_id, e.event_type) for e in page.events], page.next_page_token

    async def messages(flow_id: str, channel: str, instance: str | None, token: str) -> Any:
        """A page of pending Channel messages: their IDs."""
        page = await eng.list_channel_messages(
            flow_id, channel, instance=instance, page_size=PAGE, page_token=token
        )
        return [m.message_id for m in page.messages], page.next_page_token

    async def stream(flow_id: str, token: str) -> Any:
        """A page of Stream messages: their resume tokens."""
        page = await eng.list_stream_messages(flow_id, "log", PAGE, token, flow_type="Paged")
        return [m.resume_token for m in page.messages], page.next_page_token

    return {
        "search": lambda token: search("FlowType = 'Paged'", token),
        "search-by-id": lambda token: search("ORDER BY FlowId ASC", token),
        "search-scoped": lambda token: search("FlowType = 'Paged'", token, "Paged"),
        "history": lambda token: events("paged-0", token),
        "history-other": lambda token: events("paged-1", token),
        "channel": lambda token: messages("paged-0", "inbox", None, token),
        "channel-map": lambda token: messages("paged-0", "boxes", "a", token),
        "channel-map-other": lambda token: messages("paged-0", "boxes", "b", token),
        "channel-other": lambda token: messages("paged-1", "inbox", None, token),
        "stream": lambda token: stream("paged-0", token),
        "stream-other": lambda token: stream("paged-1", token),
    }


async def _fill(eng: Engine) -> None:
    """Start the Flows and give each listing at least three pages."""
    for i in range(FLOWS):
        options = StartFlowOptions(initial_attributes={"kw": f"k{i % 2}"})
        await eng.start_flow("Paged", f"paged-{i}", options=options)
    for flow_id in ("paged-0", "paged-1"):
        for n in range(3 * PAGE):
            await eng.set_attributes(flow_id, {"note": f"n{n}"})
            await eng.publish_to_channel(flow_id, "inbox", f"m{n}")
            await eng.publish_to_channel(flow_id, "boxes", f"a{n}", instance="a")
            await eng.publish_to_channel(flow_id, "boxes", f"b{n}", instance="b")
            await eng.write_stream(flow_id, "log", f"s{n}", source="test", flow_type="Paged")


async def _tokens(reader: Reader) -> list[str]:
    """Return the next-page tokens of the first pages of a listing (at least two)."""
    found: list[str] = []
    _, token = await reader("")
    while token:
        found.append(token)
        _, token = await reader(token)
    assert len(found) >= 2, found
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A started Engine with Paged Flows, on its own event loop, for the whole module."""
    tmp = Path(tmp_path_factory.mktemp("page-tokens"))
    config = EngineConfig(
        database_url=backends.database_url_for(tmp),
        blob_dir=str(tmp / "blobs"),
        sqlite_synchronous="OFF",
        lease_seconds=TEST_LEASE_SECONDS,
        poll_seconds=TEST_POLL_SECONDS,
    )
    loop = asyncio.new_event_loop()
    eng = Engine(Registry([Paged()]), config)
    try:
        loop.run_until_complete(eng.start())
        try:
            loop.run_until_complete(_fill(eng))
            readers = _readers(eng)
            tokens = {name: loop.run_until_complete(_tokens(r)) for name, r in readers.items()}
            yield World(loop, eng, readers, tokens)
        finally:
            loop.run_until_complete(eng.close())
    finally:
        loop.close()


EXTRA = st.text(st.sampled_from(TOKEN_ALPHABET + "=+/.!%~ \n\x00é"), min_size=1, max_size=4)


@st.composite
def edits(draw: st.DrawFn, token: str) -> str:
    """``token`` cut short, extended, or with characters inserted or removed somewhere."""
    kind = draw(st.sampled_from(["truncate", "extend", "insert", "delete"]))
    if kind == "truncate":
        return token[: draw(st.integers(0, len(token) - 1))]
    if kind == "extend":
        return token + draw(EXTRA)
    at = draw(st.integers(0, len(token) - 1))
    if kind == "insert":
        return token[:at] + draw(EXTRA) + token[at:]
    return token[:at] + token[at + draw(st.integers(1, 3)) :]


LISTINGS = ["search", "search-by-id", "search-scoped", "history", "channel", "channel-map"]
LISTINGS += ["stream"]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_an_edited_token_is_refused_or_reads_the_same_page(world: World, data: Any) -> None:
    """A real token cut, extended, or with characters inserted or removed, either raises
    InvalidPageTokenError or opens exactly the page the token opens: never another error,
    never another page."""
    listing = data.draw(st.sampled_from(LISTINGS))
    token = data.draw(st.sampled_from(world.tokens[listing]))
    edited = data.draw(edits(token))
    if edited == "":
        return  # an empty token is the first page, by definition
    try:
        page = world.read(listing, edited)
    except InvalidPageTokenError:
        return
    assert page == world.read(listing, token), (listing, token, edited)


# Pairs whose tokens must not be interchangeable: another query, another Flow type scope,
# another run, another Channel or instance, another Flow's Stream.
FOREIGN = [
    ("search", "search-by-id"),
    ("search-by-id", "search"),
    ("search", "search-scoped"),
    ("search-scoped", "search"),
    ("history", "history-other"),
    ("channel", "channel-map"),
    ("channel-map", "channel-map-other"),
    ("channel-map", "channel"),
    ("channel", "channel-other"),
    ("stream", "stream-other"),
]


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(pair=st.sampled_from(FOREIGN), which=st.integers(0, 1))
def test_a_token_of_one_listing_is_refused_by_another(
    world: World, pair: tuple[str, str], which: int
) -> None:
    """A token issued for one query, run, Channel, instance or Stream is InvalidPageTokenError
    anywhere else."""
    issued, used = pair
    token = world.tokens[issued][which]
    with pytest.raises(InvalidPageTokenError):
        world.read(used, token)
