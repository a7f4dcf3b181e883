"""Flows for the time-travel tests, in process and over HTTP.

``OrderFlow`` reserves, waits for a payment on its ``payments`` Channel, charges and ships. Its
Charge Step fails while the Flow's ``declineCharges`` Attribute is true (the "bug" a client
fixes by writing false), or while ``BEHAVIOUR`` says so (the code fix of a test in process).
RPCs write a note, add to a locked total, publish a payment and delete a message, so a test
can put outside writes after any point; nothing waits on the ``mail`` Channel, so messages a
client publishes there stay pending. ``RefundFlow`` is a second type for searches matching
two types; ``NoLogFlow`` opts out of the change log. ``LockFlow``'s Step holds a lock for as
long as the test's ``Hold``, handed to that LockFlow instance (``flows(hold)``), keeps it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI

from app.main import create_app
from engine import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Channel,
    Context,
    Flow,
    IndexType,
    Registry,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Wait,
    force_fail,
    go_to,
    graceful_complete,
    rpc,
)

#: What Charge does in process: "decline" fails the Flow, "ok" charges. Tests reset it.
BEHAVIOUR: dict[str, Any] = {"charge": "ok"}
ONCE = StepOptions(
    wait_for_retry=RetryPolicy(max_attempts=1), execute_retry=RetryPolicy(max_attempts=1)
)


class Reserve(Step[str]):
    """Reserves the order and moves on to Charge."""

    def execute(self, context: Context, input: str) -> StepDecision:
        OrderFlow.status.set(context, "reserved")
        OrderFlow.items.set(context, input, 1)
        return go_to(Charge, input)


class Charge(Step[str]):
    """Waits for one payment, then charges it (or declines, failing the Flow)."""

    def get_step_options(self) -> StepOptions:
        return ONCE

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(OrderFlow.payments.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        paid = list(OrderFlow.payments.results(context))
        if BEHAVIOUR["charge"] == "decline" or OrderFlow.decline_charges.get(context):
            OrderFlow.status.set(context, "declined")
            return force_fail(f"card declined for {paid}", error_type="Declined")
        OrderFlow.status.set(context, f"charged:{','.join(paid)}")
        return go_to(Ship, input)


class Ship(Step[str]):
    """Ships and completes with what it charged."""

    def execute(self, context: Context, input: str) -> StepDecision:
        status = OrderFlow.status.get(context)
        OrderFlow.status.set(context, "shipped")
        return graceful_complete({"order": input, "charged": status})


class OrderFlow(Flow[str]):
    """Reserve, then Charge (after a payment), then Ship."""

    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    note = Attribute("note", str)
    total = Attribute("total", int)
    decline_charges = Attribute("declineCharges", bool)
    items = AttributeMap("items", int)
    secret = Attribute("secret", str, hard_delete_on_null=True)
    payments = Channel("payments", str)
    mail = Channel("mail", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Reserve()).other_steps(Charge(), Ship())

    @rpc
    def set_note(self, context: Context, input: str | None) -> None:
        self.note.set(context, input)

    @rpc(lock_attributes=(total.lock(),))
    def add(self, context: Context, input: int) -> int:
        value = (self.total.get(context) or 0) + input
        self.total.set(context, value)
        return value

    @rpc
    def pay(self, context: Context, input: str) -> None:
        self.payments.publish(context, input)

    @rpc(is_transactional=True)
    def drop(self, context: Context, input: str) -> None:
        self.payments.delete(context, input)

    @rpc
    def forget(self, context: Context) -> None:
        self.secret.set(context, None)


class Refund(Step[str]):
    """Refunds at once."""

    def execute(self, context: Context, input: str) -> StepDecision:
        RefundFlow.status.set(context, "refunded")
        return graceful_complete(input)


class RefundFlow(Flow[str]):
    """A second Flow type sharing keyword1, without a Charge Step."""

    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Refund())


class NoLogFlow(Flow[None]):
    """An RPC-only Flow that keeps no change log: it cannot travel."""

    keep_change_log = False
    count = Attribute("count", int)

    @rpc
    def bump(self, context: Context) -> RPCResult[int]:
        value = (self.count.get(context) or 0) + 1
        self.count.set(context, value)
        return RPCResult(value)


@dataclass
class Hold:
    """What a test holds HoldStep with, handed to the LockFlow it registers."""

    #: Set by a test: HoldStep's first execution with that input waits for the event (holding
    #: its lock).
    gates: dict[str, threading.Event] = field(default_factory=dict)
    #: The input of each HoldStep execute that began, in order.
    calls: list[str] = field(default_factory=list)


class HoldStep(Step[str]):
    """Takes the ``total`` lock for its execute; its first execution waits for its Flow's
    ``hold`` gate of that input, if the test set one."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(LockFlow.total.lock(),))

    def execute(self, context: Context, input: str) -> StepDecision:
        hold: Hold = self.flow.hold
        hold.calls.append(input)
        gate = hold.gates.get(input)
        if gate is not None and len(hold.calls) == 1:
            # A ``def`` handler cannot be interrupted: it returns when the test lets it.
            gate.wait(timeout=60)
            LockFlow.total.set(context, -1)  # what the traveled attempt returns: discarded
            return graceful_complete("late")
        LockFlow.total.set(context, (LockFlow.total.get(context) or 0) + 1)
        return graceful_complete("done")


class LockFlow(Flow[str]):
    """One Step that holds the ``total`` lock while it executes."""

    total = Attribute("total", int)

    def __init__(self, hold: Hold | None = None) -> None:
        # Without one (every test but the one that holds it, and the server process of
        # ``create``) the Flow has a Hold of its own that holds nothing.
        self.hold = Hold() if hold is None else hold

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(HoldStep())

    @rpc(lock_attributes=(total.lock(),))
    def add(self, context: Context, input: int) -> int:
        value = (self.total.get(context) or 0) + input
        self.total.set(context, value)
        return value


def flows(hold: Hold | None = None) -> list[Flow[Any]]:
    """Return fresh instances of the time-travel Flows, LockFlow's with ``hold``."""
    return [OrderFlow(), RefundFlow(), NoLogFlow(), LockFlow(hold)]


def create() -> FastAPI:
    """Return the app serving the time-travel Flows (used as `uvicorn --factory`)."""
    return create_app(registry=Registry(flows()))
