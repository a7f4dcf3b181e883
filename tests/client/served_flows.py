"""The Flows the client tests drive, and the app factory their server runs.

``create()`` is what ``ServerProcess(factory="tests.client.served_flows:create")`` serves;
the in-process Engine of the same tests runs the same Registry.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from fastapi import FastAPI
from pydantic import BaseModel

from app.main import create_app
from engine import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Channel,
    ChannelMap,
    Context,
    Flow,
    IndexType,
    Registry,
    Step,
    StepDecision,
    StepList,
    Stream,
    Timer,
    Wait,
    graceful_complete,
    rpc,
)

HOUR = timedelta(hours=1)


class Payload(BaseModel):
    """A value with what JSON cannot carry as is: a time and bytes."""

    name: str
    at: datetime
    data: bytes
    tags: list[str] = []


class Nap(Step[Payload]):
    """Wait for a ``go`` message or an hour, then complete with the input's name."""

    def wait_for(self, context: Context, input: Payload) -> Wait:
        return Wait.any_of(self.flow.go.for_one(), Timer.by_duration(HOUR))

    def execute(self, context: Context, input: Payload) -> StepDecision:
        return graceful_complete(input.name)


class Orders(Flow[Payload]):
    """A Flow with typed state of every kind and RPCs over it."""

    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "state"))
    placed_at = Attribute("placed_at", datetime)
    blob = Attribute("blob", bytes)
    payload = Attribute("payload", Payload)
    counter = Attribute("counter", int)
    notes = AttributeMap("notes", str)
    go = Channel("go", str)
    inbox = ChannelMap("inbox", Payload)
    progress = Stream("progress", Payload)

    def get_steps(self) -> StepList[Payload]:
        return StepList.start_step(Nap())

    @rpc
    def echo(self, context: Context, input: Payload) -> Payload:
        self.payload.set(context, input)
        return input

    @rpc
    def stamp(self, context: Context, input: datetime) -> datetime:
        self.placed_at.set(context, input)
        return input + HOUR

    @rpc(lock_attributes=(counter.lock(),))
    def increment(self, context: Context, input: int) -> int:
        value = (self.counter.get(context) or 0) + input
        self.counter.set(context, value)
        return value

    @rpc(lock_attributes=(counter.lock(),))
    async def hold(self, context: Context, input: float) -> None:
        await asyncio.sleep(input)

    @rpc
    def boom(self, context: Context) -> None:
        raise ValueError("boom")

    @rpc
    def read_note(self, context: Context, input: str) -> str | None:
        return self.notes.get(context, input)

    @rpc
    def write_note(self, context: Context, input: str) -> None:
        self.notes.set(context, "a", input)

    @rpc
    def peek_inbox(self, context: Context, input: str) -> list[Payload]:
        return [m.value for m in self.inbox.pending_messages(context, input)]


ORDERS = Orders()


def registry() -> Registry:
    """Return the Registry of the client tests' Flows."""
    return Registry([ORDERS])


def create() -> FastAPI:
    """Build the app serving the client tests' Flows (a uvicorn ``--factory``)."""
    return create_app(registry=registry())
