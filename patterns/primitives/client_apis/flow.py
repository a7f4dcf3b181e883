"""ShipmentFlow: an RPC-only Flow whose ``stage`` Attribute an RPC changes.

It exists to be read from outside: GetAttributes reads the stage, SearchFlows finds shipments by
it and WaitForAttributeMatch waits for it. ``stage`` is indexed as ``keyword1``, the slot that
AttributeFlow uses for its status: a generic key means something different in each Flow type,
which is why every application query must be scoped to its FlowType.
"""

from __future__ import annotations

from engine import Attribute, AttributeIndex, Context, Flow, IndexType, rpc

STAGE_CREATED = "created"
STAGE_INDEX_KEY = "keyword1"


class ShipmentFlow(Flow[None]):
    """A shipment whose stage moves on through ``set_stage``."""

    stage: Attribute[str] = Attribute(
        "shipment-stage", str, index=AttributeIndex(IndexType.KEYWORD, STAGE_INDEX_KEY)
    )

    @rpc(lock_attributes=(stage.lock(),))
    def set_stage(self, context: Context, input: str) -> str | None:
        """Set the stage to ``input`` and return the previous one (the lock keeps it exact)."""
        previous = self.stage.get(context)
        self.stage.set(context, input)
        return previous
