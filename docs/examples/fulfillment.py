"""The tutorial's Flow: an order is checked, charged, receipted and shipped.

Serve it from this directory with ``DEXLITE_REGISTRY=fulfillment:registry dexlite serve``.
The ``--8<--`` comments mark the parts the tutorial shows one at a time.
"""

# --8<-- [start:imports]
from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from engine import (
    Attribute,
    AttributeIndex,
    Context,
    Flow,
    IndexType,
    Registry,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    dead_end,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)

# --8<-- [end:imports]

# --8<-- [start:order]
#: How long an order waits before it ships: the time a customer has to change the address.
PACKING_TIME = timedelta(seconds=10)


class Order(BaseModel):
    """What the shop sends when an order is placed: the items and the total, in cents."""

    items: list[str]
    cents: int


# --8<-- [end:order]


# --8<-- [start:gateway]
class PaymentDeclinedError(Exception):
    """The card was refused."""


def charge_card(order_id: str, cents: int, attempt: int) -> str:
    """Charge an order and return the charge's ID: a stand-in for a payment provider's call.

    It times out on every first attempt, so that the retry shows, and declines any total
    above 1,000.00.
    """
    if cents > 100_000:
        raise PaymentDeclinedError(f"{cents / 100:.2f} is over the card's limit")
    if attempt == 1:
        raise TimeoutError("the payment provider did not answer in time")
    return f"charge-{order_id}"


# --8<-- [end:gateway]


# --8<-- [start:check]
class CheckOrder(Step[Order]):
    """The start Step: refuse an order that cannot be shipped."""

    def execute(self, context: Context, input: Order) -> StepDecision:
        if not input.items:
            return force_fail("an order needs at least one item", error_type="EmptyOrder")
        if self.flow.address.get(context) is None:
            return force_fail("the order has no delivery address", error_type="NoAddress")
        self.flow.status.set(context, "checked")
        return go_to(ChargeCard, input)


# --8<-- [end:check]


# --8<-- [start:charge]
class ChargeCard(Step[Order]):
    """Charge the card; a failed attempt is retried, and the last failure takes the failure
    route to PaymentFailed."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(max_attempts=3, initial_interval=timedelta(seconds=2)),
            failure_step=PaymentFailed,
        )

    def execute(self, context: Context, input: Order) -> StepDecision:
        charge_id = charge_card(context.flow_id, input.cents, context.attempt)
        self.flow.charge_id.set(context, charge_id)
        self.flow.status.set(context, "paid")
        return go_to_many(StepMovement.of(SendReceipt, input), StepMovement.of(Ship, input))


# --8<-- [end:charge]


# --8<-- [start:failed]
class PaymentFailed(Step[dict[str, Any]]):
    """The failure route of ChargeCard: record why, then fail the Flow with that error."""

    def execute(self, context: Context, input: dict[str, Any]) -> StepDecision:
        self.flow.status.set(context, "payment-failed")
        return force_fail(input["errorMessage"], error_type=input["errorType"])


# --8<-- [end:failed]


# --8<-- [start:receipt]
class SendReceipt(Step[Order]):
    """One branch after the charge: write the receipt, and end the branch there."""

    def execute(self, context: Context, input: Order) -> StepDecision:
        self.flow.receipt.set(context, f"{len(input.items)} item(s), {input.cents / 100:.2f}")
        return dead_end()


# --8<-- [end:receipt]


# --8<-- [start:ship]
class Ship(Step[Order]):
    """The other branch: wait out the packing time, then ship to the address of that moment."""

    def wait_for(self, context: Context, input: Order) -> Wait:
        return Wait.until(Timer.by_duration(PACKING_TIME))

    def get_step_options(self) -> StepOptions:
        # While the parcel is labelled, change_address is refused with a lock conflict.
        return StepOptions(execute_lock_attributes=(self.flow.address.lock(),))

    def execute(self, context: Context, input: Order) -> StepDecision:
        address = self.flow.address.get(context)
        self.flow.status.set(context, "shipped")
        return graceful_complete(f"{len(input.items)} item(s) shipped to {address}")


# --8<-- [end:ship]


# --8<-- [start:flow]
class FulfillmentFlow(Flow[Order]):
    """An order, from its check to its shipping."""

    status: Attribute[str] = Attribute(
        "status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1")
    )
    address: Attribute[str] = Attribute("address", str)
    charge_id: Attribute[str] = Attribute("charge_id", str)
    receipt: Attribute[str] = Attribute("receipt", str)

    def get_steps(self) -> StepList[Order]:
        return StepList.start_step(CheckOrder()).other_steps(
            ChargeCard(), PaymentFailed(), SendReceipt(), Ship()
        )

    # --8<-- [start:rpc]
    @rpc(lock_attributes=(address.lock(),))
    def change_address(self, context: Context, input: str) -> RPCResult[str | None]:
        """Change the delivery address and answer with the one it replaced."""
        previous = self.address.get(context)
        self.address.set(context, input)
        return RPCResult(previous)

    # --8<-- [end:rpc]


registry = Registry([FulfillmentFlow()])
# --8<-- [end:flow]
