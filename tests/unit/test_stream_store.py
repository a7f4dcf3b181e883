"""The in-memory Stream Store: order, resume tokens, listing, capacity, trimming, waiters."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine import (
    FailedPreconditionError,
    Flow,
    InvalidArgumentError,
    InvalidPageTokenError,
    ManualClock,
    Registry,
    ResourceExhaustedError,
    Stream,
    StreamStoreConfig,
)
from engine._streams import MemoryStreamStore, StreamService

OVERHEAD = 10


class NewsFlow(Flow[None]):
    progress = Stream("progress", str)
    small = Stream("small", str, stream_capacity_bytes=1000)
    other = Stream("other", str)


class SportsFlow(Flow[None]):
    progress = Stream("progress", str)


def service(**config: Any) -> StreamService:
    config.setdefault("message_overhead_bytes", OVERHEAD)
    return StreamService(
        Registry([NewsFlow(), SportsFlow()]), StreamStoreConfig(**config), ManualClock()
    )


def store_of(svc: StreamService) -> MemoryStreamStore:
    assert svc.store is not None
    return svc.store


def size_of(value: str, flow_id: str = "f", source: str = "s") -> int:
    # Serialized value (a JSON string has quotes), Flow ID, source and the overhead.
    return len(value) + 2 + len(flow_id) + len(source) + OVERHEAD


async def parked(svc: StreamService, flow_id: str = "f", stream: str = "progress") -> int:
    """Return how many readers wait on ``flow_id`` once the tasks created so far have started.

    Tasks take their first step in the order they were created, and a read runs without
    pausing up to its wait: a task created after the readers sees every one of them parked.
    """

    async def count() -> int:
        waiter = store_of(svc)._waiters.get(("NewsFlow", stream, flow_id))
        return 0 if waiter is None else waiter.count

    return await asyncio.create_task(count())


async def settle(svc: StreamService) -> None:
    """Let background trim jobs finish."""
    store = store_of(svc)
    while tasks := list(store._trimming._tasks):
        await asyncio.gather(*tasks)


async def write(
    svc: StreamService,
    value: str,
    flow_id: str = "f",
    stream: Stream[Any] | None = None,
    source: str = "s",
) -> str:
    stream = stream or NewsFlow.progress
    return await svc.write("NewsFlow", stream, flow_id, value, source)


async def read(
    svc: StreamService,
    token: str = "",
    flow_id: str = "f",
    stream: Stream[Any] | None = None,
    wait: float = 0.0,
) -> Any:
    return await svc.read("NewsFlow", stream or NewsFlow.progress, flow_id, token, wait)


def values(page: Any) -> list[Any]:
    return [m.value for m in page.messages]


# -- order and resume tokens ----------------------------------------------------------------


async def test_read_stream_follows_write_order_with_resume_tokens() -> None:
    svc = service()
    for v in ["a", "b", "c"]:
        await write(svc, v)
    seen, token = [], ""
    while (message := await read(svc, token)) is not None:
        seen.append(message.value)
        token = message.resume_token
    assert seen == ["a", "b", "c"]


async def test_write_returns_the_resume_token_of_the_written_message() -> None:
    svc = service()
    first = await write(svc, "a")
    await write(svc, "b")
    after_first = await read(svc, first)
    assert after_first.value == "b"
    assert (await read(svc)).resume_token == first


async def test_read_message_carries_value_token_creation_time_and_source() -> None:
    svc = service()
    await write(svc, "hello", source="client#7")
    message = await read(svc)
    assert message.value == "hello"
    assert message.source == "client#7"
    assert message.created_at.timestamp() == pytest.approx(svc.clock.now())
    assert isinstance(message.resume_token, str) and message.resume_token


async def test_flow_ids_have_separate_messages_in_one_stream() -> None:
    svc = service()
    await write(svc, "one", flow_id="f1")
    await write(svc, "two", flow_id="f2")
    assert (await read(svc, flow_id="f1")).value == "one"
    assert (await read(svc, flow_id="f2")).value == "two"
    assert await read(svc, flow_id="f3") is None


async def test_empty_and_too_old_tokens_start_at_the_retained_head() -> None:
    svc = service(default_capacity_bytes=size_of("m0") * 10)
    tokens = [await write(svc, f"m{i}") for i in range(9)]  # 90% of capacity: trimming starts
    await settle(svc)
    head = await read(svc)
    assert head.value != "m0"  # the oldest were trimmed
    assert (await read(svc, tokens[0])).value == head.value
    assert (await read(svc, tokens[-1])) is None


async def test_resume_token_of_another_stream_or_flow_id_is_rejected() -> None:
    svc = service()
    token = await write(svc, "a", flow_id="f1")
    with pytest.raises(InvalidArgumentError, match="another"):
        await read(svc, token, flow_id="f2")
    with pytest.raises(InvalidArgumentError, match="another"):
        await read(svc, token, stream=NewsFlow.other)
    with pytest.raises(InvalidArgumentError, match="malformed"):
        await read(svc, "not a token")


async def test_tokens_of_a_previous_process_start_at_the_head_and_list_empty() -> None:
    before = service()
    old_resume = await write(before, "gone")
    await write(before, "gone too")
    old_page = (await before.list("NewsFlow", NewsFlow.progress, "f", 1, "")).next_page_token
    after = service()  # a restart: contents vanished, sequences start again
    await write(after, "new")
    assert (await read(after, old_resume)).value == "new"
    page = await after.list("NewsFlow", NewsFlow.progress, "f", 10, old_page)
    assert page.messages == [] and page.next_page_token == ""


async def test_wait_seconds_outside_zero_to_sixty_is_invalid() -> None:
    svc = service()
    for bad in (-1, 61, float("nan")):
        with pytest.raises(InvalidArgumentError, match="waitSeconds"):
            await read(svc, wait=bad)


# -- long poll ------------------------------------------------------------------------------


async def test_waiting_reader_wakes_when_a_message_is_written() -> None:
    svc = service()
    reader = asyncio.create_task(read(svc, wait=30))
    assert await parked(svc) == 1
    assert not reader.done()
    await write(svc, "news")
    message = await asyncio.wait_for(reader, 5)
    assert message.value == "news"
    assert store_of(svc)._waiters == {}


async def test_waiting_reader_ignores_writes_to_other_flow_ids() -> None:
    svc = service()
    reader = asyncio.create_task(read(svc, flow_id="mine", wait=0.2))
    assert await parked(svc, "mine") == 1
    await write(svc, "theirs", flow_id="other")
    assert await parked(svc, "mine") == 1  # the write did not wake it
    assert await reader is None
    assert store_of(svc)._waiters == {}


async def test_closing_the_store_releases_waiting_readers() -> None:
    svc = service()
    reader = asyncio.create_task(read(svc, wait=30))
    assert await parked(svc) == 1
    await svc.close()
    with pytest.raises(FailedPreconditionError):
        await asyncio.wait_for(reader, 5)


# -- listing ----------------------------------------------------------------------------------


async def test_list_pages_newest_first_with_exclusive_tokens_until_empty() -> None:
    svc = service()
    for i in range(5):
        await write(svc, f"m{i}")
    pages, token = [], ""
    while True:
        page = await svc.list("NewsFlow", NewsFlow.progress, "f", 2, token)
        pages.append(values(page))
        token = page.next_page_token
        if not token:
            break
    assert pages == [["m4", "m3"], ["m2", "m1"], ["m0"]]


async def test_last_full_page_has_an_empty_next_token() -> None:
    svc = service()
    for i in range(4):
        await write(svc, f"m{i}")
    first = await svc.list("NewsFlow", NewsFlow.progress, "f", 2, "")
    second = await svc.list("NewsFlow", NewsFlow.progress, "f", 2, first.next_page_token)
    assert values(second) == ["m1", "m0"] and second.next_page_token == ""


async def test_messages_written_after_the_first_page_do_not_join_its_chain() -> None:
    svc = service()
    for i in range(4):
        await write(svc, f"m{i}")
    first = await svc.list("NewsFlow", NewsFlow.progress, "f", 2, "")
    await write(svc, "late")
    second = await svc.list("NewsFlow", NewsFlow.progress, "f", 2, first.next_page_token)
    assert values(first) == ["m3", "m2"] and values(second) == ["m1", "m0"]
    assert values(await svc.list("NewsFlow", NewsFlow.progress, "f", 1, ""))[0] == "late"


async def test_page_is_empty_when_trimming_moved_the_head_past_its_anchor() -> None:
    svc = service(default_capacity_bytes=size_of("m00") * 10)
    for i in range(6):
        await write(svc, f"m{i:02}")
    first = await svc.list("NewsFlow", NewsFlow.progress, "f", 2, "")
    assert values(first) == ["m05", "m04"]
    for i in range(6, 30):  # keeps crossing the trigger: trimming passes m04 for good
        await write(svc, f"m{i:02}")
        await settle(svc)
    assert (await read(svc)).value > "m04"
    page = await svc.list("NewsFlow", NewsFlow.progress, "f", 2, first.next_page_token)
    assert page.messages == [] and page.next_page_token == ""


async def test_page_token_is_bound_to_flow_type_flow_id_and_stream() -> None:
    svc = service()
    await write(svc, "a")
    await write(svc, "b")
    token = (await svc.list("NewsFlow", NewsFlow.progress, "f", 1, "")).next_page_token
    assert token
    with pytest.raises(InvalidPageTokenError):
        await svc.list("NewsFlow", NewsFlow.progress, "g", 1, token)
    with pytest.raises(InvalidPageTokenError):
        await svc.list("NewsFlow", NewsFlow.other, "f", 1, token)
    with pytest.raises(InvalidPageTokenError):
        await svc.list("SportsFlow", SportsFlow.progress, "f", 1, token)
    resume = await write(svc, "c")
    with pytest.raises(InvalidPageTokenError):  # a resume token is not a page token
        await svc.list("NewsFlow", NewsFlow.progress, "f", 1, resume)


@pytest.mark.parametrize("size", [0, -1, 1001, True, 2.5])
async def test_page_size_outside_one_to_max_is_rejected_not_reduced(size: Any) -> None:
    svc = service()
    with pytest.raises(InvalidArgumentError, match="pageSize"):
        await svc.list("NewsFlow", NewsFlow.progress, "f", size, "")


async def test_page_size_limit_follows_max_read_messages() -> None:
    svc = service(max_read_messages=3)
    for i in range(5):
        await write(svc, f"m{i}")
    assert len((await svc.list("NewsFlow", NewsFlow.progress, "f", 3, "")).messages) == 3
    with pytest.raises(InvalidArgumentError, match="between 1 and 3"):
        await svc.list("NewsFlow", NewsFlow.progress, "f", 4, "")


# -- capacity and trimming --------------------------------------------------------------------


async def test_size_estimate_counts_value_flow_id_source_and_overhead() -> None:
    svc = service()
    await write(svc, "hello", flow_id="flow-1", source="me")
    assert (await store_of(svc).stats("NewsFlow", "progress"))["usage"] == size_of(
        "hello", "flow-1", "me"
    )


async def test_capacity_is_shared_by_every_flow_id_of_the_flow_type() -> None:
    svc = service()
    await write(svc, "x" * 100, flow_id="a", stream=NewsFlow.small)
    await write(svc, "x" * 100, flow_id="b", stream=NewsFlow.small)
    usage = (await store_of(svc).stats("NewsFlow", "small"))["usage"]
    assert usage == size_of("x" * 100, "a") + size_of("x" * 100, "b")
    # Another Flow type's Stream of the same name has its own capacity.
    await svc.write("SportsFlow", SportsFlow.progress, "a", "y", "s")
    assert (await store_of(svc).stats("NewsFlow", "small"))["usage"] == usage


async def test_trimming_starts_at_trigger_and_removes_oldest_down_to_target() -> None:
    svc = service()  # small: capacity 1000, trigger 900, target 700
    big = "x" * (100 - size_of("", "f0"))  # exactly 100 bytes each
    for i in range(8):
        await write(svc, big, flow_id=f"f{i % 3}", stream=NewsFlow.small)
    store = store_of(svc)
    assert (await store.stats("NewsFlow", "small"))["usage"] == 800
    assert store.trim_jobs_started == 0
    await write(svc, big, flow_id="f0", stream=NewsFlow.small)  # 900: the trigger
    assert (await store.stats("NewsFlow", "small"))["trimming"]
    await settle(svc)
    assert (await store.stats("NewsFlow", "small"))["usage"] == 700
    # The two oldest messages went, across Flow IDs: f0's and f1's first.
    assert (await read(svc, flow_id="f0", stream=NewsFlow.small)) is not None
    remaining = 0
    for f in ("f0", "f1", "f2"):
        remaining += len((await svc.list("NewsFlow", NewsFlow.small, f, 100, "")).messages)
    assert remaining == 7


async def test_write_at_capacity_is_rejected_then_a_retry_succeeds_after_trimming() -> None:
    svc = service()
    store = store_of(svc)
    await write(svc, "x" * (800 - size_of("")), stream=NewsFlow.small)  # 800, under the trigger
    await write(svc, "y" * (50 - size_of("")), stream=NewsFlow.small)  # 850
    third = "z" * (300 - size_of(""))
    with pytest.raises(ResourceExhaustedError, match="capacity") as rejected:
        await write(svc, third, stream=NewsFlow.small)
    assert rejected.value.retryable is True
    assert (await store.stats("NewsFlow", "small"))["trimming"]  # the rejection asked for room
    await settle(svc)
    await write(svc, third, stream=NewsFlow.small)
    page = await svc.list("NewsFlow", NewsFlow.small, "f", 10, "")
    assert [len(v) for v in values(page)] == [len(third), len("y" * (50 - size_of("")))]


async def test_message_larger_than_the_capacity_can_never_fit() -> None:
    svc = service()
    await write(svc, "keep", stream=NewsFlow.small)
    with pytest.raises(ResourceExhaustedError, match="never fit") as rejected:
        await write(svc, "x" * 1000, stream=NewsFlow.small)
    assert rejected.value.retryable is False
    await settle(svc)
    assert values(await svc.list("NewsFlow", NewsFlow.small, "f", 10, "")) == ["keep"]


async def test_message_over_the_per_message_limit_is_rejected() -> None:
    svc = service(max_message_bytes=50)
    await write(svc, "x" * 48)  # 50 bytes with its quotes
    with pytest.raises(ResourceExhaustedError, match="at most 50 bytes per message"):
        await write(svc, "x" * 49)


def test_declared_capacity_above_the_server_maximum_is_reduced() -> None:
    svc = service(max_capacity_bytes=500)
    assert svc.capacity(NewsFlow.small) == 500
    assert service(default_capacity_bytes=123).capacity(NewsFlow.progress) == 123


async def test_server_wide_limit_rejects_then_trims_the_largest_streams_oldest() -> None:
    svc = service(max_total_bytes=1000)
    store = store_of(svc)
    one = "x" * (100 - size_of(""))  # 100 bytes each
    for _ in range(6):
        await write(svc, one)  # NewsFlow/progress: 600
    for _ in range(3):
        await write(svc, one, stream=NewsFlow.other)  # NewsFlow/other: 300
    with pytest.raises(ResourceExhaustedError, match="server") as rejected:
        await write(svc, "y" * (250 - size_of("")), stream=NewsFlow.other)
    assert rejected.value.retryable is True
    await settle(svc)
    # 150 bytes had to go; the largest Stream gave up its two oldest messages.
    assert (await store.stats("NewsFlow", "progress"))["usage"] == 400
    assert (await store.stats("NewsFlow", "other"))["usage"] == 300
    await write(svc, "y" * (250 - size_of("")), stream=NewsFlow.other)
    assert store.total == 950


async def test_each_stream_is_trimmed_by_one_job_at_a_time() -> None:
    svc = service(trim_workers=1)
    store = store_of(svc)
    for _ in range(8):
        await write(svc, "x" * (100 - size_of("")), stream=NewsFlow.small)
    for _ in range(20):  # many rejections and triggers while the job has not run yet
        with pytest.raises(ResourceExhaustedError):
            await write(svc, "x" * (300 - size_of("")), stream=NewsFlow.small)
    assert store.trim_jobs_started == 1
    await settle(svc)
    assert (await store.stats("NewsFlow", "small"))["usage"] <= 700


async def test_concurrent_writers_keep_every_message_in_order_per_source() -> None:
    svc = service()

    async def writer(name: str) -> None:
        for i in range(200):
            await write(svc, f"{name}:{i}", source=name)
            if i % 7 == 0:
                await asyncio.sleep(0)

    await asyncio.gather(*(writer(f"w{n}") for n in range(8)))
    newest_first: list[str] = []
    token = ""
    while True:
        page = await svc.list("NewsFlow", NewsFlow.progress, "f", 1000, token)
        newest_first += values(page)
        if not (token := page.next_page_token):
            break
    assert len(newest_first) == 1600
    for n in range(8):
        mine = [v for v in reversed(newest_first) if v.startswith(f"w{n}:")]
        assert mine == [f"w{n}:{i}" for i in range(200)]


# -- disabled backend and configuration -----------------------------------------------------


async def test_disabled_store_fails_client_calls_and_drops_step_writes() -> None:
    svc = service(backend="disabled")
    with pytest.raises(FailedPreconditionError, match="disabled"):
        await write(svc, "a")
    with pytest.raises(FailedPreconditionError):
        await read(svc)
    with pytest.raises(FailedPreconditionError):
        await svc.list("NewsFlow", NewsFlow.progress, "f", 1, "")
    svc.append_from_step("NewsFlow", NewsFlow.progress, "f", "#step", '"dropped"')
    await svc.step_writes_sent("#step")


async def test_step_writes_to_a_full_stream_are_dropped_quietly() -> None:
    svc = service()
    svc.append_from_step("NewsFlow", NewsFlow.small, "f", "#s", '"' + "x" * 2000 + '"')
    await svc.step_writes_sent("#s")
    assert (await store_of(svc).stats("NewsFlow", "small"))["messages"] == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"backend": "mongo"},
        {"trim_target_ratio": 0.95},
        {"trim_trigger_ratio": 1.5},
        {"max_read_messages": 0},
        {"message_overhead_bytes": -1},
    ],
)
def test_stream_store_config_refuses_bad_settings(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        StreamStoreConfig(**bad)


async def test_client_write_needs_a_non_empty_source_and_a_valid_value() -> None:
    svc = service()
    for source in ("", None, "x" * 1025):
        with pytest.raises(InvalidArgumentError, match="source"):
            await write(svc, "a", source=source)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="value"):
        await svc.write("NewsFlow", NewsFlow.progress, "f", 42, "me")
    await write(svc, "a", source="#step-like#source")
    await write(svc, "b", source="   ")  # any non-empty source, whitespace too
    page = await svc.list("NewsFlow", NewsFlow.progress, "f", 10, "")
    assert [m.source for m in page.messages] == ["   ", "#step-like#source"]


async def test_a_page_without_a_size_is_the_default_or_the_servers_smaller_maximum() -> None:
    small = service(max_read_messages=3)
    big = service()
    for i in range(5):
        await write(small, f"m{i}")
        await write(big, f"m{i}")
    capped = await small.list("NewsFlow", NewsFlow.progress, "f", None, "")
    default = await big.list("NewsFlow", NewsFlow.progress, "f", None, "")
    assert values(capped) == ["m4", "m3", "m2"] and capped.next_page_token != ""
    assert values(default) == ["m4", "m3", "m2", "m1", "m0"] and default.next_page_token == ""
